#include "meshtrain/measure/sweep.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/run_report.h"

namespace meshtrain {

namespace {

const std::vector<std::string> kKnobs = {"tp", "pp", "zero", "mbs", "recompute", "schedule", "vpp", "sp", "bf16", "gbs"};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\t') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool is_positive_int(const std::string& v) {
  return !v.empty() && v.size() < 9 && std::all_of(v.begin(), v.end(), ::isdigit) && std::stoi(v) > 0;
}

void check_value(const std::string& knob, const std::string& v) {
  if (knob == "zero")
    check(v == "0" || v == "1" || v == "2" || v == "3", "grid: zero takes 0, 1, 2 or 3 (got '{}')", v);
  else if (knob == "recompute")
    check(v == "none" || v == "selective" || v == "full", "grid: recompute takes none, selective or full (got '{}')", v);
  else if (knob == "schedule")
    check(v == "gpipe" || v == "1f1b" || v == "interleaved", "grid: schedule takes gpipe, 1f1b or interleaved (got '{}')",
          v);
  else if (knob == "sp" || knob == "bf16")
    check(v == "0" || v == "1", "grid: {} takes 0 or 1 (got '{}')", knob, v);
  else
    check(is_positive_int(v), "grid: {} takes positive integers (got '{}')", knob, v);
}

// Flags of `train` the grid sets; extra arguments must not repeat them.
const std::vector<std::string> kKnobFlags = {
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--zero-stage", "--micro-batch-size",
    "--recompute-granularity", "--pipeline-schedule", "--num-layers-per-virtual-pipeline-stage",
    "--sequence-parallel", "--global-batch-size", "--report", "--train-iters"};

std::string knob_of(const SweepPoint& p, const std::string& k, const std::string& def) {
  for (const auto& [n, v] : p.knobs)
    if (n == k) return v;
  return def;
}

double num(const nlohmann::json& j, const std::string& ptr, double def = std::nan("")) {
  const nlohmann::json::json_pointer p(ptr);
  if (!j.is_object() || !j.contains(p) || !j[p].is_number()) return def;
  return j[p].get<double>();
}

}  // namespace

Grid parse_grid(std::string_view spec) {
  Grid g;
  std::set<std::string> seen;
  for (const std::string& part : split(spec, ';')) {
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    check(eq != std::string::npos, "grid: '{}' is not knob=v1,v2,...", part);
    Knob k{part.substr(0, eq), {}};
    check(std::find(kKnobs.begin(), kKnobs.end(), k.name) != kKnobs.end(),
          "grid: unknown knob '{}' (tp, pp, zero, mbs, recompute, schedule, vpp, sp, bf16, gbs)", k.name);
    check(seen.insert(k.name).second, "grid: knob '{}' appears twice", k.name);
    for (const std::string& v : split(part.substr(eq + 1), ',')) {
      if (v.empty()) continue;
      check_value(k.name, v);
      check(std::find(k.values.begin(), k.values.end(), v) == k.values.end(), "grid: {}={} appears twice", k.name, v);
      k.values.push_back(v);
    }
    check(!k.values.empty(), "grid: knob '{}' has no values", k.name);
    g.push_back(std::move(k));
  }
  check(!g.empty(), "grid is empty");
  return g;
}

ModelConfig sweep_model(const std::string& model, const std::vector<std::string>& extra) {
  ModelConfig m = load_model_config(model);
  for (size_t i = 0; i < extra.size(); ++i) {
    std::string flag = extra[i], value;
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < extra.size()) {
      value = extra[i + 1];
    }
    for (const auto& [name, field] : kShapeFlags)
      if (flag == name) {
        check(is_positive_int(value), "{} needs a positive integer (got '{}')", name, value);
        m.*field = std::stoi(value);
      }
  }
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  return m;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& s) {
  check(s.ranks >= 1, "--ranks must be positive");
  for (const std::string& a : s.extra)
    for (const std::string& f : kKnobFlags)
      check(a != f && a.rfind(f + "=", 0) != 0, "{} is set by the sweep (grid or its own flags), not as an extra flag",
            f);
  int max_mbs = 1;
  for (const Knob& k : s.grid)
    if (k.name == "mbs")
      for (const std::string& v : k.values) max_mbs = std::max(max_mbs, std::stoi(v));
  const int gbs_default = s.global_batch_size > 0 ? s.global_batch_size : s.ranks * max_mbs;

  std::vector<SweepPoint> out;
  std::vector<size_t> idx(s.grid.size(), 0);
  while (true) {
    SweepPoint p;
    for (size_t i = 0; i < s.grid.size(); ++i) p.knobs.emplace_back(s.grid[i].name, s.grid[i].values[idx[i]]);
    for (const auto& [k, v] : p.knobs) p.name += (p.name.empty() ? "" : "_") + k + v;
    const int tp = std::stoi(knob_of(p, "tp", "1")), pp = std::stoi(knob_of(p, "pp", "1"));
    const int vpp = std::stoi(knob_of(p, "vpp", "2"));
    const std::string schedule = knob_of(p, "schedule", "1f1b");
    ParallelConfig& c = p.parallel;
    c.tp = tp;
    c.pp = pp;
    c.zero_stage = std::stoi(knob_of(p, "zero", "0"));
    c.micro_batch_size = std::stoi(knob_of(p, "mbs", "1"));
    c.global_batch_size = std::stoi(knob_of(p, "gbs", std::to_string(gbs_default)));
    c.recompute = parse_recompute(knob_of(p, "recompute", "none"));
    c.schedule = parse_schedule(schedule);
    c.sequence_parallel = knob_of(p, "sp", "0") == "1";
    c.bf16 = knob_of(p, "bf16", "0") == "1";
    p.train_args = {"--tensor-model-parallel-size", std::to_string(tp), "--pipeline-model-parallel-size",
                    std::to_string(pp), "--zero-stage", std::to_string(c.zero_stage), "--micro-batch-size",
                    std::to_string(c.micro_batch_size), "--global-batch-size", std::to_string(c.global_batch_size),
                    "--recompute-granularity", std::string(recompute_name(c.recompute)), "--pipeline-schedule",
                    schedule};
    if (c.sequence_parallel) p.train_args.push_back("--sequence-parallel");
    if (c.bf16) p.train_args.push_back("--bf16");
    try {
      check(s.ranks % (tp * pp) == 0,
            "world size {} is not divisible by tensor-model-parallel-size x pipeline-model-parallel-size = {}",
            s.ranks, tp * pp);
      c.dp = s.ranks / (tp * pp);
      if (c.schedule == ScheduleKind::interleaved) {
        const int L = s.model_config.num_layers;
        check(pp > 1, "the interleaved schedule needs pipeline-model-parallel-size > 1");
        check(L % pp == 0 && (L / pp) % vpp == 0, "{} model chunks per stage do not divide the {} layers of each of {} stages",
              vpp, L / pp, pp);
        c.vpp = vpp;
        p.train_args.push_back("--num-layers-per-virtual-pipeline-stage");
        p.train_args.push_back(std::to_string(L / pp / vpp));
      }
      validate(s.model_config, c, s.ranks);
    } catch (const Error& e) {
      p.valid = false;
      p.reason = e.what();
    }
    out.push_back(std::move(p));
    // Next combination, the last knob fastest.
    int i = static_cast<int>(s.grid.size()) - 1;
    while (i >= 0 && ++idx[i] == s.grid[i].values.size()) idx[i--] = 0;
    if (i < 0) break;
  }
  return out;
}

nlohmann::json sweep_row(const SweepPoint& p, const std::string& status, const std::string& reason,
                         const nlohmann::json& rep) {
  nlohmann::json r;
  r["name"] = p.name;
  for (const auto& [k, v] : p.knobs) r[k] = v;
  r["dp"] = p.valid ? p.parallel.dp : 0;
  r["status"] = status;
  r["reason"] = reason;
  if (!rep.is_object()) return r;
  const nlohmann::json& a = rep.contains("measurements") && rep["measurements"].is_object()
                                ? rep["measurements"]["aggregate"]
                                : nlohmann::json::object();
  r["step_time_s"] = num(a, "/step_time_s/median");
  // Median over ranks of each rank's steady tokens/s (rank 0's alone, the
  // report's top-level figure, is noisier on an oversubscribed machine).
  r["tokens_per_s"] = num(a, "/tokens_per_s/median", num(rep, "/tokens_per_s"));
  r["model_tflops_per_rank"] = num(rep, "/model_tflops_per_rank");
  r["mfu"] = num(rep, "/mfu");
  for (const char* c : {"parameters", "gradients", "optimizer", "activations", "comm_buffers", "workspace", "total"})
    r[std::string("mem_") + c] = num(rep, std::string("/memory_peak_bytes/") + c);
  r["rss_peak"] = num(rep, "/process_peak_rss_bytes");
  r["comm_exposed_s"] = num(a, "/comm_exposed_s_per_step/max", 0.0);
  // The most exposed rank's share of its steady iterations' time, from the
  // per-rank records (so reports written before the figure existed work too).
  double frac = 0;
  if (rep.contains("measurements") && rep["measurements"].is_object())
    for (const auto& rk : rep["measurements"].value("ranks", nlohmann::json::array())) {
      const double steps = num(rk, "/comm_steps", 1.0);
      double time = 0;
      if (rk.contains("steps") && rk["steps"].contains("time_s")) {
        const auto& ts = rk["steps"]["time_s"];
        for (size_t i = ts.size() > 1 ? 1 : 0; i < ts.size(); ++i) time += ts[i].get<double>();
      }
      if (time > 0) frac = std::max(frac, num(rk, "/comm_exposed_s_per_step", 0.0) * steps / time);
    }
  r["comm_exposed_fraction"] = frac;
  for (const char* g : {"tp", "pp", "dp", "embedding", "world"}) {
    r[std::string("comm_exposed_") + g] = num(a, std::string("/comm_by_group/") + g + "/exposed_s_per_step/max", 0.0);
    r[std::string("comm_bytes_") + g] = num(a, std::string("/comm_by_group/") + g + "/bytes_per_step/max", 0.0);
  }
  r["bubble_measured"] = num(a, "/pipeline/bubble_fraction/median", 0.0);
  r["bubble_theory"] = num(rep, "/measurements/theory/bubble_fraction", 0.0);
  if (rep.contains("losses") && !rep["losses"].empty()) r["final_loss"] = rep["losses"].back();
  return r;
}

std::vector<std::string> sweep_columns(const Grid& g) {
  std::vector<std::string> c{"name"};
  for (const Knob& k : g) c.push_back(k.name);
  for (const char* x :
       {"dp", "status", "reason", "exit_code", "wall_s", "step_time_s", "tokens_per_s", "model_tflops_per_rank", "mfu",
        "mem_parameters", "mem_gradients", "mem_optimizer", "mem_activations", "mem_comm_buffers", "mem_workspace",
        "mem_total", "rss_peak", "comm_exposed_s", "comm_exposed_fraction", "comm_exposed_tp", "comm_exposed_pp", "comm_exposed_dp",
        "comm_exposed_embedding", "comm_exposed_world", "comm_bytes_tp", "comm_bytes_pp", "comm_bytes_dp",
        "comm_bytes_embedding", "comm_bytes_world", "bubble_measured", "bubble_theory", "final_loss", "report"})
    c.push_back(x);
  return c;
}

std::string rows_to_csv(const std::vector<nlohmann::json>& rows, const std::vector<std::string>& columns) {
  auto cell = [](const nlohmann::json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d)) return "";
      if (d == std::floor(d) && std::abs(d) < 1e15) return fmt::format("{:.0f}", d);
      return fmt::format("{:.6g}", d);
    }
    std::string s = v.is_string() ? v.get<std::string>() : v.dump();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
    return q + "\"";
  };
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) out += ',';
    out += columns[i];
  }
  out += '\n';
  for (const auto& r : rows) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i) out += ',';
      if (r.contains(columns[i])) out += cell(r[columns[i]]);
    }
    out += '\n';
  }
  return out;
}

const std::vector<SummaryMetric>& summary_metrics() {
  static const std::vector<SummaryMetric> m{{"mem_total", "peak memory"},
                                            {"comm_exposed_s", "exposed comm"},
                                            {"tokens_per_s", "tokens/s"}};
  return m;
}

nlohmann::json summarize_sweep(const Grid& g, const std::vector<nlohmann::json>& rows) {
  std::vector<const nlohmann::json*> ok;
  for (const auto& r : rows)
    if (r.value("status", "") == "ok") ok.push_back(&r);
  nlohmann::json out = nlohmann::json::array();
  for (const Knob& k : g) {
    // Key of a row: every other knob's value.
    auto key = [&](const nlohmann::json& r) {
      std::string s;
      for (const Knob& o : g)
        if (o.name != k.name) s += o.name + "=" + r.value(o.name, "") + ";";
      return s;
    };
    for (size_t vi = 1; vi < k.values.size(); ++vi) {
      const std::string& base = k.values[0];
      const std::string& val = k.values[vi];
      nlohmann::json e{{"knob", k.name}, {"value", val}, {"baseline", base}};
      int pairs = 0;
      std::map<std::string, std::vector<double>> ratios;
      for (const nlohmann::json* a : ok) {
        if (a->value(k.name, "") != val) continue;
        for (const nlohmann::json* b : ok) {
          if (b->value(k.name, "") != base || key(*a) != key(*b)) continue;
          ++pairs;
          for (const SummaryMetric& m : summary_metrics()) {
            const double x = num(*a, "/" + m.column), y = num(*b, "/" + m.column);
            if (std::isfinite(x) && std::isfinite(y) && y > 0) ratios[m.column].push_back(x / y);
          }
        }
      }
      e["pairs"] = pairs;
      for (const SummaryMetric& m : summary_metrics()) {
        const auto& v = ratios[m.column];
        if (v.empty()) {
          e[m.column] = nullptr;
        } else {
          e[m.column] = {{"median", median_of(v)},
                         {"min", *std::min_element(v.begin(), v.end())},
                         {"max", *std::max_element(v.begin(), v.end())},
                         {"pairs", v.size()}};
        }
      }
      out.push_back(e);
    }
  }
  return out;
}

std::string summary_text(const nlohmann::json& s) {
  std::string out = fmt::format(
      "effect of each knob with the others held fixed: median ratio (min..max) over config pairs differing only in "
      "it\n{:<10} {:<20} {:>6}", "knob", "value / base", "pairs");
  for (const SummaryMetric& m : summary_metrics()) out += fmt::format(" {:>28}", m.label);
  out += "\n";
  for (const auto& e : s) {
    out += fmt::format("{:<10} {:<20} {:>6}", e["knob"].get<std::string>(),
                       e["value"].get<std::string>() + " / " + e["baseline"].get<std::string>(), e["pairs"].get<int>());
    for (const SummaryMetric& m : summary_metrics()) {
      const auto& v = e[m.column];
      out += v.is_null() ? fmt::format(" {:>28}", "-")
                         : fmt::format(" {:>28}", fmt::format("{:.2f}x ({:.2f}..{:.2f})", v["median"].get<double>(),
                                                              v["min"].get<double>(), v["max"].get<double>()));
    }
    out += "\n";
  }
  return out;
}

nlohmann::json grid_json(const Grid& g) {
  nlohmann::json j = nlohmann::json::array();
  for (const Knob& k : g) j.push_back({{"knob", k.name}, {"values", k.values}});
  return j;
}

Grid grid_from_json(const nlohmann::json& j) {
  Grid g;
  for (const auto& k : j) g.push_back(Knob{k["knob"].get<std::string>(), k["values"].get<std::vector<std::string>>()});
  return g;
}

}  // namespace meshtrain
