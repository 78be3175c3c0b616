#include "meshtrain/measure/run_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "meshtrain/model/activations.h"
#include "meshtrain/parallel/stage_layers.h"

namespace meshtrain {

nlohmann::json spread(const std::vector<double>& values, const std::vector<int>& ranks) {
  if (values.empty()) return {{"min", 0.0}, {"median", 0.0}, {"max", 0.0}, {"min_rank", -1}, {"max_rank", -1}};
  size_t lo = 0, hi = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] < values[lo]) lo = i;
    if (values[i] > values[hi]) hi = i;
  }
  return {{"min", values[lo]},
          {"median", median_of(values)},
          {"max", values[hi]},
          {"min_rank", ranks[lo]},
          {"max_rank", ranks[hi]}};
}


// ------------------------------------------------------------------ FLOPs --

StepFlops rank_step_flops(const ModelConfig& m, const ParallelConfig& p, int pp_rank, double step_tokens) {
  const double tokens = step_tokens / p.dp;
  // This stage's chunks (stage_layers.h: they may differ in size) and the
  // blocks of them that recompute.
  const std::vector<int> chunks = virtual_stage_layers(m.num_layers, p);
  int layers = 0, recomputed = 0;
  for (int c = 0; c < p.vpp; ++c) {
    const int n = chunks[static_cast<size_t>(c * p.pp + pp_rank)];
    layers += n;
    for (int i = 0; i < n; ++i) recomputed += block_is_recomputed(p, i, n) ? 1 : 0;
  }
  const double block = block_forward_flops_per_token(m);
  const bool head = pp_rank == p.pp - 1;
  const double fwd = layers * block + (head ? head_forward_flops_per_token(m) : 0.0);
  StepFlops f;
  f.model = 3.0 * fwd * tokens / p.tp;
  double extra = 0;
  if (p.recompute == Recompute::full) {
    extra = double(recomputed) * block;
  } else if (p.recompute == Recompute::selective) {
    extra = layers * attention_core_flops_per_token(m);
  }
  f.hardware = f.model + extra * tokens / p.tp;
  return f;
}

double theoretical_bubble_fraction(const ParallelConfig& p) {
  if (p.pp <= 1) return 0.0;
  const double m = p.num_micro_batches(), pp = p.pp;
  const double v = p.schedule == ScheduleKind::interleaved ? std::max(1, p.vpp) : 1;
  return (pp - 1) / (m + pp - 1) / v;
}

// ------------------------------------------------------------ rank record --

nlohmann::json rank_record_json(const RankRecord& r) {
  // One array per StepRecord field, in iteration order.
  static constexpr std::pair<const char*, double StepRecord::*> kSeconds[] = {
      {"time_s", &StepRecord::time_s},       {"pipeline_s", &StepRecord::pipeline_s},
      {"forward_s", &StepRecord::forward_s}, {"backward_s", &StepRecord::backward_s},
      {"compute_s", &StepRecord::compute_s}, {"idle_s", &StepRecord::idle_s},
      {"optimizer_s", &StepRecord::optimizer_s}, {"matmul_s", &StepRecord::matmul_s},
      {"matmul_flops", &StepRecord::matmul_flops}, {"attention_s", &StepRecord::attention_s},
      {"attention_flops", &StepRecord::attention_flops}};
  static constexpr std::pair<const char*, int64_t StepRecord::*> kCounts[] = {
      {"loss_tokens", &StepRecord::loss_tokens}, {"step_tokens", &StepRecord::step_tokens}};
  nlohmann::json steps = nlohmann::json::object();
  auto col = [&](const char* name, auto field) {
    nlohmann::json a = nlohmann::json::array();
    for (const StepRecord& s : r.steps) a.push_back(s.*field);
    steps[name] = std::move(a);
  };
  for (const auto& [name, field] : kSeconds) col(name, field);
  for (const auto& [name, field] : kCounts) col(name, field);
  nlohmann::json mem = nlohmann::json::object();
  for (int i = 0; i < kNumMemCategories; ++i)
    mem[std::string(mem_category_name(MemCategory(i)))] = r.memory.peak[i];
  mem["total"] = r.memory.peak_total;
  nlohmann::json j{{"rank", r.rank},
                   {"coord", {{"tp", r.coord.tp}, {"dp", r.coord.dp}, {"pp", r.coord.pp}}},
                   {"steps", std::move(steps)},
                   {"memory_peak_bytes", std::move(mem)},
                   {"process_peak_rss_bytes", r.peak_rss_bytes},
                   {"model_flops_per_step", r.flops.model},
                   {"hardware_flops_per_step", r.flops.hardware},
                   {"comm_steps", r.comm_steps}};
  j["comm"] = r.comm;
  if (!r.timeline.is_null()) j["timeline"] = r.timeline;
  return j;
}

// -------------------------------------------------------------- aggregate --

namespace {

std::vector<double> column(const nlohmann::json& steps, const char* name) {
  std::vector<double> v;
  if (steps.contains(name))
    for (const auto& x : steps[name]) v.push_back(x.get<double>());
  return v;
}

// The iterations after the first (or the only one).
std::vector<double> steady(const std::vector<double>& v) {
  if (v.size() <= 1) return v;
  return std::vector<double>(v.begin() + 1, v.end());
}

const char* const kGroupOrder[] = {"tp", "pp", "dp", "dp_shard", "dp_replicate", "embedding", "mp", "world"};

int group_rank(const std::string& g) {
  constexpr int n = int(std::size(kGroupOrder));
  for (int i = 0; i < n; ++i)
    if (g == kGroupOrder[i]) return i;
  return n;
}

// Pipeline: medians over the steady iterations of the phases and of
//   bubble_fraction     1 - compute / span: the share of the pipeline's
//                       span (the slowest rank's train_step) this rank did
//                       not compute, leading, middle and trailing waits alike;
//   recv_wait_fraction  idle / (idle + compute): blocked in pipeline
//                       receives (StepStats.idle_s; misses the trailing wait
//                       of stages that finish early);
//   idle_fraction_of_step  idle / the whole iteration.
// t: the steady iterations' times; span[i] as derive_rank's.
nlohmann::json derive_pipeline(const nlohmann::json& st, const std::vector<double>& t, const std::vector<double>& span) {
  nlohmann::json pipe;
  for (const char* k : {"pipeline_s", "forward_s", "backward_s", "compute_s", "idle_s", "optimizer_s"})
    pipe[k] = median_of(steady(column(st, k)));
  const std::vector<double> idle = steady(column(st, "idle_s")), compute = steady(column(st, "compute_s"));
  const std::vector<double> sp = steady(span);
  std::vector<double> bubble, wait, of_step;
  for (size_t i = 0; i < idle.size(); ++i) {
    if (i < sp.size() && sp[i] > 0) bubble.push_back(std::max(0.0, 1.0 - compute[i] / sp[i]));
    if (idle[i] + compute[i] > 0) wait.push_back(idle[i] / (idle[i] + compute[i]));
    if (t[i] > 0) of_step.push_back(idle[i] / t[i]);
  }
  pipe["bubble_fraction"] = median_of(bubble);
  pipe["recv_wait_fraction"] = median_of(wait);
  pipe["idle_fraction_of_step"] = median_of(of_step);
  return pipe;
}

// Compute: this rank's share of the FLOPs over its median step, and where
// the compute time went (medians over the steady iterations):
//   matmul_s      the oneDNN matmuls (linear layers, logits);
//   attention_s   the tiled attention kernels;
//   in_layer_comm_s  the tp group's calls (TP/SP collectives and the
//                 vocab-parallel cross-entropy's), made inside forward and
//                 backward;
//   other_s       compute_s minus those three: element-wise kernels
//                 (LayerNorm, GELU, residuals, embeddings, softmax-CE,
//                 bf16 conversions), ZeRO-3 gathers and bookkeeping.
// Rates: each kernel class's FLOPs over its own time.
nlohmann::json derive_compute(const nlohmann::json& r, double step, const ReportContext& ctx) {
  const nlohmann::json& st = r["steps"];
  const double mf = r["model_flops_per_step"].get<double>(), hf = r["hardware_flops_per_step"].get<double>();
  nlohmann::json comp{{"model_flops_per_step", mf},
                      {"hardware_flops_per_step", hf},
                      {"model_tflops", step > 0 ? mf / step / 1e12 : 0.0},
                      {"hardware_tflops", step > 0 ? hf / step / 1e12 : 0.0}};
  const double compute_s = median_of(steady(column(st, "compute_s")));
  const double mm_s = median_of(steady(column(st, "matmul_s")));
  const double at_s = median_of(steady(column(st, "attention_s")));
  const double mm_f = median_of(steady(column(st, "matmul_flops")));
  const double at_f = median_of(steady(column(st, "attention_flops")));
  double tp_comm_s = 0;
  for (const auto& e : r["comm"])
    if (e["group"] == "tp") tp_comm_s += e["total_s"].get<double>() / std::max(1, r.value("comm_steps", 1));
  comp["compute_s"] = compute_s;
  comp["matmul_s"] = mm_s;
  comp["attention_s"] = at_s;
  comp["in_layer_comm_s"] = tp_comm_s;
  comp["other_s"] = std::max(0.0, compute_s - mm_s - at_s - tp_comm_s);
  comp["matmul_fraction"] = compute_s > 0 ? mm_s / compute_s : 0.0;
  comp["attention_fraction"] = compute_s > 0 ? at_s / compute_s : 0.0;
  comp["matmul_flops_per_step"] = mm_f;
  comp["attention_flops_per_step"] = at_f;
  comp["matmul_tflops"] = mm_s > 0 ? mm_f / mm_s / 1e12 : 0.0;
  comp["attention_tflops"] = at_s > 0 ? at_f / at_s / 1e12 : 0.0;
  if (ctx.peak_tflops > 0) {
    comp["mfu"] = comp["model_tflops"].get<double>() / ctx.peak_tflops;
    comp["hfu"] = comp["hardware_tflops"].get<double>() / ctx.peak_tflops;
    comp["matmul_efficiency"] = comp["matmul_tflops"].get<double>() / ctx.peak_tflops;
  }
  return comp;
}

// Communication: per group, per step (every iteration runs the same calls),
// into d; t: the steady iterations' times.
void derive_comm(const nlohmann::json& r, const std::vector<double>& t, nlohmann::json& d) {
  nlohmann::json groups = nlohmann::json::object();
  double exposed = 0, total = 0;
  const double n = std::max(1, r.value("comm_steps", 1));
  d["comm_steps"] = n;
  for (const auto& e : r["comm"]) {
    const std::string g = e["group"];
    auto& o = groups[g];
    if (o.is_null()) o = {{"calls_per_step", 0.0}, {"bytes_per_step", 0.0}, {"time_s_per_step", 0.0},
                          {"exposed_s_per_step", 0.0}};
    o["calls_per_step"] = o["calls_per_step"].get<double>() + e["calls"].get<double>() / n;
    o["bytes_per_step"] = o["bytes_per_step"].get<double>() + e["bytes"].get<double>() / n;
    o["time_s_per_step"] = o["time_s_per_step"].get<double>() + e["total_s"].get<double>() / n;
    o["exposed_s_per_step"] = o["exposed_s_per_step"].get<double>() + e["exposed_s"].get<double>() / n;
    exposed += e["exposed_s"].get<double>() / n;
    total += e["total_s"].get<double>() / n;
  }
  d["comm_by_group"] = groups;
  d["comm_exposed_s_per_step"] = exposed;
  // Exposed communication over the steady iterations' time (a mean over
  // the same iterations, where step_time_s is a median).
  double steady_time = 0;
  for (double x : t) steady_time += x;
  d["comm_exposed_fraction"] = steady_time > 0 ? exposed * n / steady_time : 0.0;
  d["comm_time_s_per_step"] = total;
  d["comm"] = r["comm"];
}

// The derived figures of one rank. span[i]: the pipeline's span in
// iteration i, the longest train_step of any rank.
nlohmann::json derive_rank(const nlohmann::json& r, const ReportContext& ctx, const std::vector<double>& span) {
  const nlohmann::json& st = r["steps"];
  const std::vector<double> time = column(st, "time_s");
  const std::vector<double> t = steady(time);
  const double step = median_of(t);
  nlohmann::json d;
  d["rank"] = r["rank"];
  d["coord"] = r["coord"];
  d["iterations"] = time.size();
  d["step_time_s"] = step;
  d["pipeline"] = derive_pipeline(st, t, span);
  d["steps"] = st;
  if (r.contains("timeline")) d["timeline"] = r["timeline"];

  // Throughput from the tokens the steps consumed (summed over the world).
  const std::vector<double> tok = steady(column(st, "step_tokens"));
  std::vector<double> tps;
  for (size_t i = 0; i < tok.size(); ++i) tps.push_back(t[i] > 0 ? tok[i] / t[i] : 0.0);
  d["step_tokens"] = median_of(tok);
  d["tokens_per_s"] = median_of(tps);

  d["compute"] = derive_compute(r, step, ctx);
  d["memory_peak_bytes"] = r["memory_peak_bytes"];
  d["process_peak_rss_bytes"] = r["process_peak_rss_bytes"];
  derive_comm(r, t, d);
  return d;
}

// Value at a JSON pointer, 0 if absent.
double at(const nlohmann::json& j, const std::string& ptr) {
  const nlohmann::json::json_pointer p(ptr);
  return j.contains(p) && j[p].is_number() ? j[p].get<double>() : 0.0;
}

// The pipeline's span in each iteration: the longest train_step of any rank.
std::vector<double> pipeline_span(const std::vector<nlohmann::json>& raw) {
  std::vector<double> span;
  for (const auto& r : raw) {
    const std::vector<double> ps = column(r["steps"], "pipeline_s");
    if (span.size() < ps.size()) span.resize(ps.size(), 0.0);
    for (size_t i = 0; i < ps.size(); ++i) span[i] = std::max(span[i], ps[i]);
  }
  return span;
}

// The spread over the ranks of the figure at a JSON pointer.
nlohmann::json spread_over(const std::vector<nlohmann::json>& ranks, const std::string& ptr) {
  std::vector<double> v;
  std::vector<int> ids;
  for (const auto& r : ranks) {
    v.push_back(at(r, ptr));
    ids.push_back(r["rank"].get<int>());
  }
  return spread(v, ids);
}

// Bubble per pipeline stage: the median over the stage's ranks.
nlohmann::json stage_bubbles(const std::vector<nlohmann::json>& ranks) {
  std::map<int, std::vector<double>> by_stage, by_stage_wait;
  for (const auto& r : ranks) {
    by_stage[r["coord"]["pp"].get<int>()].push_back(at(r, "/pipeline/bubble_fraction"));
    by_stage_wait[r["coord"]["pp"].get<int>()].push_back(at(r, "/pipeline/recv_wait_fraction"));
  }
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& [s, v] : by_stage)
    stages.push_back({{"stage", s}, {"bubble_fraction", median_of(v)},
                      {"recv_wait_fraction", median_of(by_stage_wait[s])}});
  return stages;
}

// Communication per group, over the ranks that are members and communicated.
nlohmann::json comm_by_group(const std::vector<nlohmann::json>& ranks) {
  nlohmann::json out = nlohmann::json::object();
  std::set<std::string> group_names;
  for (const auto& r : ranks)
    for (const auto& [g, _] : r["comm_by_group"].items()) group_names.insert(g);
  for (const std::string& g : group_names) {
    for (const char* k : {"calls_per_step", "bytes_per_step", "time_s_per_step", "exposed_s_per_step"}) {
      std::vector<double> v;
      std::vector<int> who;
      for (const auto& r : ranks)
        if (r["comm_by_group"].contains(g)) {
          v.push_back(r["comm_by_group"][g][k].get<double>());
          who.push_back(r["rank"].get<int>());
        }
      out[g][k] = spread(v, who);
    }
  }
  return out;
}

// Communication per (group, op), groups in kGroupOrder.
nlohmann::json comm_by_op(const std::vector<nlohmann::json>& ranks) {
  std::map<std::pair<int, std::string>, std::vector<std::pair<int, const nlohmann::json*>>> entries;
  for (const auto& r : ranks)
    for (const auto& e : r["comm"]) {
      const std::string g = e["group"], op = e["op"];
      entries[{group_rank(g), g + "\n" + op}].push_back({r["rank"].get<int>(), &e});
    }
  const double iters = ranks.empty() ? 1.0 : ranks.front()["comm_steps"].get<double>();
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& [key, list] : entries) {
    const nlohmann::json& first = *list.front().second;
    nlohmann::json o{{"group", first["group"]}, {"op", first["op"]}, {"group_size", first["group_size"]},
                     {"ranks", list.size()}};
    for (const char* k : {"calls", "bytes", "total_s", "exposed_s", "p50_s", "p99_s", "algbw_Bps", "busbw_Bps"}) {
      std::vector<double> v;
      std::vector<int> who;
      for (const auto& [rk, e] : list) {
        v.push_back((*e)[k].get<double>());
        who.push_back(rk);
      }
      o[k] = spread(v, who);
    }
    o["bytes_per_step"] = o["bytes"]["median"].get<double>() / iters;
    o["calls_per_step"] = o["calls"]["median"].get<double>() / iters;
    ops.push_back(o);
  }
  return ops;
}

// The spread over ranks of every per-rank figure.
nlohmann::json aggregate_ranks(const std::vector<nlohmann::json>& ranks, const ReportContext& ctx) {
  auto over = [&](const std::string& ptr) { return spread_over(ranks, ptr); };
  nlohmann::json agg;
  agg["step_time_s"] = over("/step_time_s");
  agg["tokens_per_s"] = over("/tokens_per_s");
  agg["step_tokens"] = over("/step_tokens");
  for (const char* k : {"model_flops_per_step", "hardware_flops_per_step", "model_tflops", "hardware_tflops",
                        "compute_s", "matmul_s", "attention_s", "in_layer_comm_s", "other_s", "matmul_fraction",
                        "attention_fraction", "matmul_flops_per_step", "attention_flops_per_step", "matmul_tflops",
                        "attention_tflops"})
    agg["compute"][k] = over(std::string("/compute/") + k);
  if (ctx.peak_tflops > 0)
    for (const char* k : {"mfu", "hfu", "matmul_efficiency"}) agg["compute"][k] = over(std::string("/compute/") + k);
  for (const char* k : {"pipeline_s", "forward_s", "backward_s", "compute_s", "idle_s", "optimizer_s",
                        "bubble_fraction", "recv_wait_fraction", "idle_fraction_of_step"})
    agg["pipeline"][k] = over(std::string("/pipeline/") + k);
  agg["pipeline"]["stages"] = stage_bubbles(ranks);
  for (int i = 0; i < kNumMemCategories; ++i) {
    const std::string c(mem_category_name(MemCategory(i)));
    agg["memory_peak_bytes"][c] = over("/memory_peak_bytes/" + c);
  }
  agg["memory_peak_bytes"]["total"] = over("/memory_peak_bytes/total");
  agg["process_peak_rss_bytes"] = over("/process_peak_rss_bytes");
  agg["comm_exposed_s_per_step"] = over("/comm_exposed_s_per_step");
  agg["comm_exposed_fraction"] = over("/comm_exposed_fraction");
  agg["comm_time_s_per_step"] = over("/comm_time_s_per_step");
  const nlohmann::json groups = comm_by_group(ranks);
  if (!groups.empty()) agg["comm_by_group"] = groups;
  agg["comm"] = comm_by_op(ranks);
  return agg;
}

}  // namespace

nlohmann::json aggregate_measurements(const std::vector<nlohmann::json>& raw, const ReportContext& ctx) {
  const std::vector<double> span = pipeline_span(raw);
  std::vector<nlohmann::json> ranks;
  for (const auto& r : raw) ranks.push_back(derive_rank(r, ctx, span));
  nlohmann::json theory{{"bubble_fraction", theoretical_bubble_fraction(ctx.parallel)},
                        {"pipeline_stages", ctx.parallel.pp},
                        {"micro_batches", ctx.parallel.num_micro_batches()},
                        {"virtual_stages", ctx.parallel.vpp},
                        {"schedule", std::string(schedule_name(ctx.parallel.schedule))}};
  nlohmann::json out;
  out["world_size"] = ctx.world_size;
  out["mesh"] = {{"tp", ctx.parallel.tp}, {"dp", ctx.parallel.dp}, {"pp", ctx.parallel.pp}};
  if (ctx.parallel.hybrid_shard()) out["mesh"]["dp_shard"] = ctx.parallel.shard_size();
  out["iterations"] = ranks.empty() ? 0 : ranks.front()["iterations"].get<int>();
  out["steady_iterations"] = std::max(0, out["iterations"].get<int>() - (out["iterations"].get<int>() > 1 ? 1 : 0));
  out["comm_steps"] = ranks.empty() ? 1.0 : ranks.front()["comm_steps"].get<double>();
  out["peak_tflops_per_rank"] = ctx.peak_tflops;
  out["aggregate"] = aggregate_ranks(ranks, ctx);
  out["theory"] = theory;
  out["ranks"] = ranks;
  return out;
}

// ------------------------------------------------------------------ table --

namespace {

// One line per figure: its min, median and max over ranks and the worst rank.
std::string per_rank_rows(const nlohmann::json& a) {
  std::string out = fmt::format("{:<34} {:>12} {:>12} {:>12} {:>6}\n", "per rank", "min", "median", "max", "worst");
  auto row = [&](const std::string& label, const nlohmann::json& s, auto fmtv, bool worst_is_min = false) {
    out += fmt::format("{:<34} {:>12} {:>12} {:>12} {:>6}\n", label, fmtv(s["min"].get<double>()),
                       fmtv(s["median"].get<double>()), fmtv(s["max"].get<double>()),
                       s[worst_is_min ? "min_rank" : "max_rank"].get<int>());
  };
  auto secs = [](double v) { return fmt::format("{:.4f} s", v); };
  auto num = [](double v) { return fmt::format("{:.4g}", v); };
  auto pct = [](double v) { return fmt::format("{:.1f}%", 100 * v); };
  auto bytes = [](double v) { return format_bytes(v); };
  auto tf = [](double v) { return fmt::format("{:.4f}", v); };
  const nlohmann::json& c = a["compute"];
  row("step time", a["step_time_s"], secs);
  row("tokens/s (consumed)", a["tokens_per_s"], num, true);
  row("model TFLOP/s", c["model_tflops"], tf, true);
  row("hardware TFLOP/s", c["hardware_tflops"], tf, true);
  if (c.contains("mfu")) {
    row("MFU", c["mfu"], pct, true);
    row("HFU", c["hfu"], pct, true);
  }
  if (c.contains("matmul_s")) {
    row("compute per step", c["compute_s"], secs);
    row("  matmuls", c["matmul_s"], secs);
    row("  attention kernels", c["attention_s"], secs);
    row("  tp collectives in layers", c["in_layer_comm_s"], secs);
    row("  other kernels", c["other_s"], secs);
    row("matmuls / compute", c["matmul_fraction"], pct, true);
    row("matmul TFLOP/s (achieved)", c["matmul_tflops"], tf, true);
    row("attention TFLOP/s (achieved)", c["attention_tflops"], tf, true);
    if (c.contains("matmul_efficiency")) row("matmul efficiency (of peak)", c["matmul_efficiency"], pct, true);
  }
  const nlohmann::json& p = a["pipeline"];
  row("forward per step", p["forward_s"], secs);
  row("backward per step", p["backward_s"], secs);
  row("optimizer per step", p["optimizer_s"], secs);
  row("pipeline idle per step", p["idle_s"], secs);
  row("bubble (1 - compute / span)", p["bubble_fraction"], pct);
  row("recv wait / (wait + compute)", p["recv_wait_fraction"], pct);
  row("recv wait / step", p["idle_fraction_of_step"], pct);
  row("exposed comm per step (mean)", a["comm_exposed_s_per_step"], secs);
  row("exposed comm / time", a["comm_exposed_fraction"], pct);
  for (int i = 0; i < kNumMemCategories; ++i) {
    const std::string cat(mem_category_name(MemCategory(i)));
    row("peak " + cat, a["memory_peak_bytes"][cat], bytes);
  }
  row("peak total (tracked)", a["memory_peak_bytes"]["total"], bytes);
  row("process peak RSS", a["process_peak_rss_bytes"], bytes);
  return out;
}

// The measured bubble of each stage beside the schedule's formula.
std::string stage_bubble_line(const nlohmann::json& m) {
  const nlohmann::json& th = m["theory"];
  if (th["pipeline_stages"].get<int>() <= 1) return "";
  const int v = th["virtual_stages"].get<int>();
  std::string out = fmt::format("bubble by stage (1 - compute / span), theory {:.1f}% = (p-1)/(m+p-1){} with p={} m={}{}:",
                                100 * th["bubble_fraction"].get<double>(), v > 1 ? "/v" : "",
                                th["pipeline_stages"].get<int>(), th["micro_batches"].get<int>(),
                                v > 1 ? fmt::format(" v={}", v) : "");
  for (const auto& s : m["aggregate"]["pipeline"]["stages"])
    out += fmt::format(" s{} {:.1f}%", s["stage"].get<int>(), 100 * s["bubble_fraction"].get<double>());
  return out + "\n";
}

// Every (group, op): calls, bytes, time and bandwidths per step.
std::string comm_table(const nlohmann::json& m) {
  const nlohmann::json& ops = m["aggregate"]["comm"];
  if (ops.empty()) return "";
  std::string out =
      fmt::format("\ncommunication per step (median over member ranks; worst = rank with most exposed time)\n");
  out += fmt::format("{:<10} {:<16} {:>4} {:>7} {:>11} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>6}\n", "group",
                     "op", "n", "calls", "bytes", "time s", "exposed s", "p50 us", "p99 us", "algbw", "busbw",
                     "worst");
  const double iters = std::max(1.0, m.value("comm_steps", 1.0));
  for (const auto& e : ops)
    out += fmt::format("{:<10} {:<16} {:>4} {:>7.4g} {:>11} {:>10.5f} {:>10.5f} {:>10.1f} {:>10.1f} {:>11} {:>11} {:>6}\n",
                       e["group"].get<std::string>(), e["op"].get<std::string>(), e["group_size"].get<int>(),
                       e["calls_per_step"].get<double>(), format_bytes(e["bytes_per_step"].get<double>()),
                       e["total_s"]["median"].get<double>() / iters, e["exposed_s"]["median"].get<double>() / iters,
                       1e6 * e["p50_s"]["median"].get<double>(), 1e6 * e["p99_s"]["median"].get<double>(),
                       format_rate(e["algbw_Bps"]["median"].get<double>()),
                       format_rate(e["busbw_Bps"]["median"].get<double>()), e["exposed_s"]["max_rank"].get<int>());
  return out;
}

}  // namespace

std::string summary_table(const nlohmann::json& m) {
  std::string out = fmt::format(
      "\nrun report | {} ranks (tp {} x dp {} x pp {}) | {} iterations, steady-state figures over {}\n",
      m["world_size"].get<int>(), m["mesh"]["tp"].get<int>(), m["mesh"]["dp"].get<int>(),
      m["mesh"]["pp"].get<int>(), m["iterations"].get<int>(), m["steady_iterations"].get<int>());
  return out + per_rank_rows(m["aggregate"]) + stage_bubble_line(m) + comm_table(m);
}

}  // namespace meshtrain
