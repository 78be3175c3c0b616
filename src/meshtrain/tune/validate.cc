#include "meshtrain/tune/validate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain::tune {

namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A numeric field: nullopt when blank; throws Error when not a number.
std::optional<double> number(const CsvTable& t, size_t r, const std::string& col) {
  const std::string v = trim(t.field(r, col));
  if (v.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    check(used == v.size(), "column {}: '{}' is not a number", col, v);
    return x;
  } catch (const std::logic_error&) {
    throw Error(fmt::format("column {}: '{}' is not a number", col, v));
  }
}

int integer(const CsvTable& t, size_t r, const std::string& col) {
  const auto x = number(t, r, col);
  check(x.has_value(), "column {} is blank", col);
  check(*x == std::floor(*x) && *x > 0, "column {}: '{}' is not a positive integer", col, t.field(r, col));
  return int(*x);
}

std::optional<bool> yes_no(const CsvTable& t, size_t r, const std::string& col) {
  const std::string v = lower(trim(t.field(r, col)));
  if (v.empty()) return std::nullopt;
  if (v == "yes" || v == "true" || v == "1" || v == "on") return true;
  if (v == "no" || v == "false" || v == "0" || v == "off") return false;
  throw Error(fmt::format("column {}: '{}' is not yes or no", col, v));
}

ErrorSummary summarize(std::vector<double> errs) {
  ErrorSummary s;
  s.rows = int(errs.size());
  if (errs.empty()) return s;
  for (double& e : errs) e = std::fabs(e);
  std::sort(errs.begin(), errs.end());
  const size_t n = errs.size();
  s.median_abs_error = n % 2 ? errs[n / 2] : 0.5 * (errs[n / 2 - 1] + errs[n / 2]);
  s.max_abs_error = errs.back();
  return s;
}

struct Parsed {
  std::string id, system;
  ModelConfig model;
  int num_gpus = 0, global_batch = 0;
  SearchSpace space;
  ParallelConfig fallback;  // used when nothing planned fits
  perf::PerfOptions options;
  std::vector<std::string> blanks;
};

Parsed parse_row(const CsvTable& t, size_t r) {
  Parsed p;
  p.id = trim(t.field(r, "id"));
  check(!p.id.empty(), "column id is blank");
  p.system = trim(t.field(r, "system"));
  check(!p.system.empty(), "column system is blank");
  ModelConfig& m = p.model;
  m.name = trim(t.field(r, "model_name"));
  m.num_layers = integer(t, r, "layers");
  m.hidden_size = integer(t, r, "hidden");
  m.num_attention_heads = integer(t, r, "heads");
  if (auto kv = number(t, r, "kv_heads")) m.num_kv_heads = int(*kv);
  if (auto f = number(t, r, "ffn")) m.ffn_hidden_size = int(*f);
  m.seq_length = integer(t, r, "seq_len");
  m.vocab_size = integer(t, r, "vocab");
  m.validate();
  p.num_gpus = integer(t, r, "num_gpus");
  p.global_batch = integer(t, r, "global_batch");

  SearchSpace& s = p.space;
  ParallelConfig& f = p.fallback;
  f.global_batch_size = p.global_batch;
  auto knob = [&](const char* col, std::vector<int>& dst, int& fb, int dflt) {
    if (auto x = number(t, r, col)) {
      dst = {int(*x)};
      fb = int(*x);
    } else {
      p.blanks.push_back(col);
      fb = dflt;
    }
  };
  knob("tp", s.tp, f.tp, 1);
  knob("pp", s.pp, f.pp, 1);
  knob("vpp", s.vpp, f.vpp, 1);
  knob("zero_stage", s.zero_stage, f.zero_stage, 1);
  f.dp = p.num_gpus / (f.tp * f.pp);
  if (auto dp = number(t, r, "dp"); dp && !s.tp.empty() && !s.pp.empty())
    check(int(*dp) * f.tp * f.pp == p.num_gpus, "dp {} x tp {} x pp {} is not num_gpus {}", *dp, f.tp, f.pp,
          p.num_gpus);
  if (auto mb = number(t, r, "micro_batch")) {
    s.micro_batch_size = {int(*mb)};
    f.micro_batch_size = int(*mb);
  } else if (auto ga = number(t, r, "grad_accum"); ga && !s.tp.empty() && !s.pp.empty()) {
    f.micro_batch_size = std::max(1, p.global_batch / (f.dp * int(*ga)));
    s.micro_batch_size = {f.micro_batch_size};
  } else {
    p.blanks.push_back("micro_batch");
  }
  const std::string rc = lower(trim(t.field(r, "recompute")));
  if (!rc.empty()) {
    f.recompute = parse_recompute(rc);
    s.recompute = {f.recompute};
    s.partial_recompute = false;
  } else {
    p.blanks.push_back("recompute");
    f.recompute = Recompute::full;
  }
  if (auto sp = yes_no(t, r, "seq_parallel")) {
    s.sequence_parallel = {*sp};
    f.sequence_parallel = *sp;
  } else {
    p.blanks.push_back("seq_parallel");
  }
  if (auto fa = yes_no(t, r, "flash_attn")) {
    s.flash_attention = {*fa};
    f.flash_attention = *fa;
  } else {
    p.blanks.push_back("flash_attn");
  }
  const std::string prec = lower(trim(t.field(r, "precision")));
  s.bf16 = prec.find("fp32") == std::string::npos || prec.find("16") != std::string::npos;
  f.bf16 = s.bf16;
  f.schedule = f.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  const std::string notes = t.field(r, "notes");
  p.options.overlap_grad_reduce = notes.find("--overlap-grad-reduce") != std::string::npos;
  p.options.overlap_param_gather = notes.find("--overlap-param-gather") != std::string::npos;
  p.options.tp_comm_overlap = notes.find("--tp-comm-overlap") != std::string::npos;
  p.options.overlap_p2p_comm = notes.find("--overlap-p2p-comm") != std::string::npos ||
                               notes.find("PP overlap default") != std::string::npos;
  return p;
}

std::map<std::string, std::string> filled_values(const Parsed& row, const ParallelConfig& c) {
  std::map<std::string, std::string> f;
  for (const std::string& b : row.blanks) {
    if (b == "tp") f[b] = std::to_string(c.tp);
    if (b == "pp") f[b] = std::to_string(c.pp);
    if (b == "vpp") f[b] = std::to_string(c.vpp);
    if (b == "zero_stage") f[b] = std::to_string(c.zero_stage);
    if (b == "micro_batch") f[b] = std::to_string(c.micro_batch_size);
    if (b == "recompute") {
      f[b] = std::string(recompute_name(c.recompute));
      if (c.recompute == Recompute::full && c.recompute_method == RecomputeMethod::block)
        f["recompute_num_layers"] = std::to_string(c.recompute_num_layers);
    }
    if (b == "seq_parallel") f[b] = c.sequence_parallel ? "yes" : "no";
    if (b == "flash_attn") f[b] = c.flash_attention ? "yes" : "no";
  }
  return f;
}

}  // namespace

Validation validate_runs(const CsvTable& t, perf::PerfCache* cache_or_null) {
  perf::PerfCache local;
  perf::PerfCache& cache = cache_or_null ? *cache_or_null : local;
  Validation v;
  for (const std::string& e : t.errors) v.skipped.push_back(e);
  std::map<std::string, perf::SystemSpec> systems;
  std::map<std::string, std::vector<double>> errs;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string where = fmt::format("line {}", t.row_lines[r]);
    try {
      const Parsed row = parse_row(t, r);
      if (!systems.count(row.system)) systems.emplace(row.system, perf::load_system_spec(row.system));
      const perf::SystemSpec& sys = systems.at(row.system);
      RowResult res;
      res.id = row.id;
      res.system = row.system;
      res.expected_oom = lower(trim(t.field(r, "peak_mem"))) == "oom";
      const Plan pl = plan(row.model, sys, row.num_gpus, row.global_batch, row.space, row.options, &cache);
      if (!pl.ranked.empty()) {
        res.config = pl.ranked.front().config;
        res.prediction = pl.ranked.front().prediction;
      } else {
        res.config = row.fallback;
        res.prediction = perf::predict(row.model, row.fallback, sys, row.num_gpus, row.options, &cache);
      }
      res.filled = filled_values(row, res.config);
      if (!res.prediction.fits && !res.expected_oom) v.not_fitting.push_back(res.id);
      if (res.prediction.fits && res.expected_oom) v.oom_mismatch.push_back(res.id);

      const std::string kind = lower(trim(t.field(r, "tflops_kind")));
      const perf::Prediction& p = res.prediction;
      if (auto x = number(t, r, "tflops_per_gpu")) {
        res.metric = kind == "hardware" ? "hardware_tflops_per_gpu" : "model_tflops_per_gpu";
        res.reported = *x;
        res.predicted = kind == "hardware" ? p.hardware_tflops_per_gpu : p.model_tflops_per_gpu;
      } else if (auto x = number(t, r, "mfu_pct")) {
        res.metric = "mfu_pct";
        res.reported = *x;
        res.predicted = 100 * p.mfu;
      } else if (auto x = number(t, r, "hfu_pct")) {
        res.metric = "hfu_pct";
        res.reported = *x;
        res.predicted = 100 * p.hfu;
      } else if (auto x = number(t, r, "iter_time_s")) {
        res.metric = "iter_time_s";
        res.reported = *x;
        res.predicted = p.step_time_s;
      } else if (auto x = number(t, r, "tokens_per_s")) {
        res.metric = "tokens_per_s";
        res.reported = *x;
        res.predicted = p.tokens_per_s;
      }
      if (!res.metric.empty() && res.reported > 0 && !res.expected_oom) {
        res.compared = true;
        res.error = res.predicted / res.reported - 1;
        errs[res.system].push_back(res.error);
        errs[""].push_back(res.error);
      }
      v.rows.push_back(std::move(res));
    } catch (const Error& e) {
      const std::string id = trim(t.field(r, "id"));
      v.skipped.push_back(fmt::format("{}{}: {}", id.empty() ? "" : id + " ", where, e.what()));
    }
  }
  v.all = summarize(errs[""]);
  for (const auto& [sys, e] : errs)
    if (!sys.empty()) v.by_system[sys] = summarize(e);
  return v;
}

nlohmann::json validation_json(const Validation& v) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RowResult& r : v.rows) {
    nlohmann::json j{{"id", r.id},
                     {"system", r.system},
                     {"filled", r.filled},
                     {"config", r.config},
                     {"prediction", r.prediction},
                     {"metric", r.metric},
                     {"reported", r.reported},
                     {"predicted", r.predicted},
                     {"expected_oom", r.expected_oom}};
    j["error"] = r.compared ? nlohmann::json(r.error) : nlohmann::json(nullptr);
    rows.push_back(std::move(j));
  }
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [s, e] : v.by_system)
    by[s] = {{"rows", e.rows}, {"median_abs_error", e.median_abs_error}, {"max_abs_error", e.max_abs_error}};
  return {{"rows", rows},
          {"median_abs_error", v.all.median_abs_error},
          {"max_abs_error", v.all.max_abs_error},
          {"by_system", by},
          {"not_fitting", v.not_fitting},
          {"oom_mismatch", v.oom_mismatch},
          {"skipped", v.skipped}};
}

}  // namespace meshtrain::tune
