#include "meshtrain/tune/validate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain::tune {

namespace {

std::map<std::string, std::string> filled_values(const RunRow& row, const ParallelConfig& c) {
  std::map<std::string, std::string> f;
  for (const std::string& b : row.blanks) {
    if (b == "tp") f[b] = std::to_string(c.tp);
    if (b == "pp") f[b] = std::to_string(c.pp);
    if (b == "vpp") f[b] = std::to_string(c.vpp);
    if (b == "zero_stage") f[b] = std::to_string(c.zero_stage);
    if (b == "micro_batch") f[b] = std::to_string(c.micro_batch_size);
    if (b == "dp_shard") f[b] = std::to_string(c.zero_shard);
    if (b == "recompute") {
      f[b] = std::string(recompute_name(c.recompute));
      if (c.recompute == Recompute::full && c.recompute_method == RecomputeMethod::block)
        f["recompute_num_layers"] = std::to_string(c.recompute_num_layers);
    }
    if (b == "seq_parallel") f[b] = c.sequence_parallel ? "yes" : "no";
    if (b == "flash_attn") f[b] = c.flash_attention ? "yes" : "no";
    if (b == "stage_counting" && c.pp > 1 && c.stage_counting == StageCounting::embedding_head) f[b] = "embedding-head";
  }
  return f;
}

// Whether a knob of `c` lies outside the values `s` lists for it (blanks the
// profile narrowed, filled from RunRow::widened).
bool outside_space(const SearchSpace& s, const ParallelConfig& c) {
  auto out = [](const auto& list, auto v) {
    return !list.empty() && std::find(list.begin(), list.end(), v) == list.end();
  };
  return out(s.vpp, c.vpp) || out(s.zero_stage, c.zero_stage) || out(s.recompute, c.recompute) ||
         (c.tp > 1 && out(s.sequence_parallel, c.sequence_parallel)) || out(s.flash_attention, c.flash_attention);
}

double predicted_metric(const std::string& metric, const perf::Prediction& p, int row_gpus) {
  if (metric == "hardware_tflops_per_gpu") return p.hardware_tflops_per_gpu;
  if (metric == "model_tflops_per_gpu") return p.model_tflops_per_gpu;
  if (metric == "mfu_pct") return 100 * p.mfu;
  if (metric == "hfu_pct") return 100 * p.hfu;
  if (metric == "iter_time_s") return p.step_time_s;
  if (metric == "tokens_per_s_per_gpu") return p.tokens_per_s / row_gpus;
  return p.tokens_per_s;
}

}  // namespace

RowResult predict_run(const RunRow& row, const perf::SystemSpec& sys, perf::PerfCache& cache, PlanMemo* memo) {
  RowResult res;
  res.id = row.id;
  res.system = row.system;
  res.source = row.source;
  res.profile = row.profile;
  res.profile_inferred = row.profile_inferred;
  res.system_from = row.system_from;
  res.tflops_kind_inferred = row.tflops_kind_inferred;
  res.hybrid_shard_inferred = row.hybrid_shard_inferred;
  res.flash_attention_named = row.flash_attention_named;
  res.inferred = row.inferred;
  res.unread = row.unread;
  res.model = row.model.name;
  res.expected_oom = row.expected_oom;
  const auto hit = memo ? memo->find(row.key) : PlanMemo::iterator{};
  if (memo && hit != memo->end()) {
    res.config = hit->second.first;
    res.prediction = hit->second.second;
  } else {
    Plan pl = plan(row.model, sys, row.num_gpus, row.global_batch, row.space, row.options, &cache);
    // A run that ran fits. Where nothing its profile offers does, first the
    // layouts the model puts over the capacity by less than its memory
    // error (tight); then, where none is, the profile's narrowing is what
    // fails (e.g. no fused attention assumed for a framework whose model
    // code had one), so the blanks take any value, tight ones last.
    for (int pass = 1; pl.ranked.empty() && !row.expected_oom && pass < 4; ++pass) {
      SearchSpace s = pass == 1 ? row.space : row.widened;
      s.admit_tight = pass != 2;
      pl = plan(row.model, sys, row.num_gpus, row.global_batch, s, row.options, &cache);
    }
    if (!pl.ranked.empty()) {
      res.config = pl.ranked.front().config;
      res.prediction = pl.ranked.front().prediction;
    } else {
      res.config = row.fallback;
      res.prediction = perf::predict(row.model, row.fallback, sys, row.num_gpus, row.options, &cache);
    }
    if (memo) memo->emplace(row.key, std::make_pair(res.config, res.prediction));
  }
  res.filled = filled_values(row, res.config);
  res.beyond_profile = outside_space(row.space, res.config);
  res.metric = row.metric;
  res.reported = row.reported;
  res.predicted = predicted_metric(row.metric, res.prediction, row.num_gpus);
  if (!row.metric.empty() && !row.expected_oom) {
    res.compared = true;
    res.error = res.predicted / res.reported - 1;
  }
  res.reported_memory = row.reported_memory;
  if (row.reported_memory > 0) res.memory_error = res.prediction.memory.total() / row.reported_memory - 1;
  return res;
}

ErrorSummary summarize(std::vector<double> errs) {
  ErrorSummary s;
  s.rows = int(errs.size());
  if (errs.empty()) return s;
  for (double& e : errs) e = std::fabs(e);
  s.max_abs_error = *std::max_element(errs.begin(), errs.end());
  s.median_abs_error = median_of(std::move(errs));
  return s;
}

void tally(Validation& v) {
  std::map<std::string, std::vector<double>> errs;
  std::vector<double> memory;
  v.not_fitting.clear();
  v.tight.clear();
  v.oom_mismatch.clear();
  for (const RowResult& r : v.rows) {
    if (!r.prediction.fits && !r.expected_oom) (r.prediction.tight ? v.tight : v.not_fitting).push_back(r.id);
    if (r.prediction.fits && r.expected_oom) v.oom_mismatch.push_back(r.id);
    if (r.reported_memory > 0) memory.push_back(r.memory_error);
    if (!r.compared) continue;
    errs[r.system].push_back(r.error);
    errs[""].push_back(r.error);
  }
  v.all = summarize(errs[""]);
  v.memory = summarize(memory);
  v.by_system.clear();
  for (const auto& [sys, e] : errs)
    if (!sys.empty()) v.by_system[sys] = summarize(e);
}

Validation validate_runs(const CsvTable& t, perf::PerfCache* cache_or_null) {
  perf::PerfCache local;
  perf::PerfCache& cache = cache_or_null ? *cache_or_null : local;
  RunRows runs = read_runs(t);
  Validation v;
  v.skipped = std::move(runs.skipped);
  std::map<std::string, perf::SystemSpec> systems;
  PlanMemo memo;  // keys include the system name
  for (const RunRow& row : runs.rows) {
    try {
      if (!systems.count(row.system)) systems.emplace(row.system, perf::load_system_spec(row.system));
      v.rows.push_back(predict_run(row, systems.at(row.system).for_profile(row.profile), cache, &memo));
    } catch (const Error& e) {
      v.skipped.push_back(fmt::format("{} line {}: {}", row.id, row.line, e.what()));
    }
  }
  tally(v);
  return v;
}

std::vector<SweepRank> sweep_rankings(const Validation& v, int min_layouts) {
  struct Group {
    std::vector<double> predicted, reported;
    std::set<std::string> layouts;
  };
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Group> groups;
  for (const RowResult& r : v.rows) {
    if (!r.compared) continue;
    Group& g = groups[{r.source, r.model, r.system, r.metric}];
    g.predicted.push_back(r.predicted);
    g.reported.push_back(r.reported);
    g.layouts.insert(describe(r.config) + fmt::format(" gbs={}", r.config.global_batch_size));
  }
  std::vector<SweepRank> out;
  for (const auto& [k, g] : groups) {
    if (int(g.layouts.size()) < min_layouts) continue;
    const auto& [source, model, system, metric] = k;
    out.push_back({source, model, system, metric, int(g.predicted.size()), int(g.layouts.size()),
                   spearman(g.predicted, g.reported)});
  }
  return out;
}

nlohmann::json validation_json(const Validation& v) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RowResult& r : v.rows) {
    nlohmann::json j{{"id", r.id},
                     {"system", r.system},
                     {"source", r.source},
                     {"profile", r.profile},
                     {"profile_inferred", r.profile_inferred},
                     {"flash_attention_named", r.flash_attention_named},
                     {"inferred", r.inferred},
                     {"unread", r.unread},
                     {"system_inferred", !r.system_from.empty()},
                     {"system_from", r.system_from},
                     {"tflops_kind_inferred", r.tflops_kind_inferred},
                     {"hybrid_shard_inferred", r.hybrid_shard_inferred},
                     {"beyond_profile", r.beyond_profile},
                     {"filled", r.filled},
                     {"config", r.config},
                     {"prediction", r.prediction},
                     {"metric", r.metric},
                     {"reported", r.reported},
                     {"predicted", r.predicted},
                     {"expected_oom", r.expected_oom}};
    j["error"] = r.compared ? nlohmann::json(r.error) : nlohmann::json(nullptr);
    if (r.reported_memory > 0) {
      j["reported_memory_bytes"] = r.reported_memory;
      j["memory_error"] = r.memory_error;
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json sweeps = nlohmann::json::array();
  for (const SweepRank& w : sweep_rankings(v))
    sweeps.push_back({{"source", w.source}, {"model", w.model}, {"system", w.system}, {"metric", w.metric},
                      {"rows", w.rows}, {"layouts", w.layouts}, {"spearman", w.spearman}});
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [s, e] : v.by_system)
    by[s] = {{"rows", e.rows}, {"median_abs_error", e.median_abs_error}, {"max_abs_error", e.max_abs_error}};
  return {{"rows", rows},
          {"compared", v.all.rows},
          {"median_abs_error", v.all.median_abs_error},
          {"max_abs_error", v.all.max_abs_error},
          {"by_system", by},
          {"memory",
           {{"rows", v.memory.rows},
            {"median_abs_error", v.memory.median_abs_error},
            {"max_abs_error", v.memory.max_abs_error}}},
          {"not_fitting", v.not_fitting},
          {"tight", v.tight},
          {"oom_mismatch", v.oom_mismatch},
          {"sweeps", sweeps},
          {"skipped", v.skipped}};
}

}  // namespace meshtrain::tune
