#include "meshtrain/tune/planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/parallel/stage_layers.h"

namespace meshtrain::tune {

namespace {

// A validation message with its numbers replaced, so equal reasons count once.
std::string reason_of(const std::string& msg) {
  std::string r;
  for (size_t i = 0; i < msg.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(msg[i]))) {
      while (i + 1 < msg.size() && std::isdigit(static_cast<unsigned char>(msg[i + 1]))) ++i;
      r += 'N';
    } else {
      r += msg[i];
    }
  }
  return r;
}

// The most layers a chunk runs (stage_layers.h); 0 when the split is invalid.
int most_chunk_layers(const ModelConfig& m, const ParallelConfig& p) {
  int layers = 0;
  try {
    for (int n : virtual_stage_layers(m.num_layers, p)) layers = std::max(layers, n);
  } catch (const Error&) {
  }
  return layers;
}

// One search: what each candidate is checked and costed against, and the
// plan it fills.
struct Search {
  const ModelConfig& m;
  const perf::SystemSpec& s;
  int num_gpus;
  const SearchSpace& space;
  const perf::PerfOptions& o;
  perf::PerfCache& cache;
  Plan& r;

  // Costs p if it is valid, the framework runs it and it fits; else counts
  // why it was dropped.
  void consider(const ParallelConfig& p) {
    ++r.candidates_evaluated;
    try {
      validate(m, p, num_gpus);
    } catch (const Error& e) {
      ++r.dropped[reason_of(e.what())];
      return;
    }
    if (space.framework)
      if (std::string why = perf::unsupported_by(*space.framework, p, m.num_layers); !why.empty()) {
        ++r.dropped[why];
        return;
      }
    if (const perf::MemoryEstimate mem = perf::estimate_memory(m, p, s, cache, o);
        !mem.fits() && !(space.admit_tight && mem.tight())) {
      ++r.dropped["out of memory"];
      return;
    }
    r.ranked.push_back({p, perf::predict(m, p, s, num_gpus, o, &cache)});
  }

  bool fits(const ParallelConfig& q) const {
    try {
      validate(m, q, num_gpus);
    } catch (const Error&) {
      return false;
    }
    return perf::estimate_memory(m, q, s, cache, o).fits();
  }

  // Partial recompute of a fully recomputed p: fewer recomputed blocks are
  // faster and need more memory, so only the smallest count that fits is
  // worth costing. None if no count below the chunk's layers fits.
  std::optional<ParallelConfig> fewest_recomputed_blocks(const ParallelConfig& p) const {
    const int layers = most_chunk_layers(m, p);
    if (!space.partial_recompute || space.recompute_num_layers > 0 || p.recompute != Recompute::full || layers < 2)
      return std::nullopt;
    ParallelConfig q = p;
    q.recompute_method = RecomputeMethod::block;
    auto fits_with = [&](int k) {
      q.recompute_num_layers = k;
      return fits(q);
    };
    if (!fits_with(layers - 1)) return std::nullopt;
    int lo = 1, hi = layers - 1;  // smallest k in [lo, hi] that fits; hi fits
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (fits_with(mid)) hi = mid; else lo = mid + 1;
    }
    q.recompute_num_layers = hi;
    return q;
  }
};

}  // namespace

Plan plan(const ModelConfig& m, const perf::SystemSpec& s, int num_gpus, int gbs, const SearchSpace& space,
          const perf::PerfOptions& o, perf::PerfCache* cache_or_null) {
  m.validate();
  check(num_gpus > 0, "num-gpus must be positive (got {})", num_gpus);
  check(gbs > 0, "global-batch-size must be positive (got {})", gbs);
  perf::PerfCache local;
  Plan r;
  Search search{m, s, num_gpus, space, o, cache_or_null ? *cache_or_null : local, r};
  for (const ParallelConfig& p : enumerate(m, space, num_gpus, gbs, s.devices_per_node)) {
    search.consider(p);
    if (const auto q = search.fewest_recomputed_blocks(p)) search.consider(*q);
  }
  r.candidates_fitting = int64_t(r.ranked.size());
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Candidate& a, const Candidate& b) {
    if (a.prediction.tokens_per_s != b.prediction.tokens_per_s)
      return a.prediction.tokens_per_s > b.prediction.tokens_per_s;
    return a.prediction.memory.total() < b.prediction.memory.total();
  });
  return r;
}

std::string describe(const ParallelConfig& p) {
  std::string rc(recompute_name(p.recompute));
  if (p.recompute == Recompute::full && p.recompute_method == RecomputeMethod::block)
    rc += fmt::format("(block:{})", p.recompute_num_layers);
  std::string d = fmt::format("tp={} pp={} vpp={} dp={} zero={} mbs={} recompute={} sp={} flash={}", p.tp, p.pp,
                              p.vpp, p.dp, p.zero_stage, p.micro_batch_size, rc, p.sequence_parallel ? "on" : "off",
                              p.flash_attention ? "on" : "off");
  if (p.cp > 1) d += fmt::format(" cp={}", p.cp);
  if (p.hybrid_shard()) d += fmt::format(" shard={}", p.shard_size());
  if (p.first_stage_layers > 0) d += fmt::format(" first={}", p.first_stage_layers);
  if (p.last_stage_layers > 0) d += fmt::format(" last={}", p.last_stage_layers);
  if (p.stage_counting != StageCounting::transformer) d += fmt::format(" stages={}", stage_counting_name(p.stage_counting));
  if (p.stage_partition != StagePartition::even)
    d += fmt::format(" partition={}", stage_partition_name(p.stage_partition));
  return d;
}

int within_error_of_best(const Plan& plan, double e) {
  if (e <= 0 || plan.ranked.empty()) return 0;
  const double low_of_best = plan.ranked.front().prediction.tokens_per_s * (1 - e);
  int n = 0;
  for (size_t i = 1; i < plan.ranked.size() && plan.ranked[i].prediction.tokens_per_s * (1 + e) >= low_of_best; ++i)
    ++n;
  return n;
}

std::string why_best(const Plan& plan) {
  if (plan.ranked.empty()) return "no candidate fits";
  if (plan.ranked.size() == 1) return "only one candidate fits";
  const Candidate &a = plan.ranked[0], &b = plan.ranked[1];
  const auto &x = a.prediction.time, &y = b.prediction.time;
  struct Diff {
    const char* name;
    double d;
  };
  std::vector<Diff> diffs = {{"compute", y.compute - x.compute},   {"tp_comm", y.tp_comm - x.tp_comm},
                             {"pp_comm", y.pp_comm - x.pp_comm},   {"dp_comm", y.dp_comm - x.dp_comm},
                             {"bubble", y.bubble - x.bubble},      {"optimizer", y.optimizer - x.optimizer},
                             {"cp_comm", y.cp_comm - x.cp_comm}};
  std::sort(diffs.begin(), diffs.end(), [](const Diff& u, const Diff& v) { return std::fabs(u.d) > std::fabs(v.d); });
  std::vector<std::string> knobs;
  const ParallelConfig &p = a.config, &q = b.config;
  auto differ = [&](const char* name, auto u, auto v) {
    if (u != v) knobs.push_back(fmt::format("{} {} vs {}", name, u, v));
  };
  differ("tp", p.tp, q.tp);
  differ("pp", p.pp, q.pp);
  differ("cp", p.cp, q.cp);
  differ("vpp", p.vpp, q.vpp);
  differ("stages", stage_counting_name(p.stage_counting), stage_counting_name(q.stage_counting));
  differ("first-stage-layers", p.first_stage_layers, q.first_stage_layers);
  differ("last-stage-layers", p.last_stage_layers, q.last_stage_layers);
  differ("zero", p.zero_stage, q.zero_stage);
  differ("mbs", p.micro_batch_size, q.micro_batch_size);
  differ("recompute", recompute_name(p.recompute), recompute_name(q.recompute));
  differ("recompute-num-layers", p.recompute_method == RecomputeMethod::block ? p.recompute_num_layers : 0,
         q.recompute_method == RecomputeMethod::block ? q.recompute_num_layers : 0);
  differ("sp", p.sequence_parallel ? "on" : "off", q.sequence_parallel ? "on" : "off");
  differ("flash", p.flash_attention ? "on" : "off", q.flash_attention ? "on" : "off");
  std::string k;
  for (size_t i = 0; i < knobs.size(); ++i) k += (i ? ", " : "") + knobs[i];
  const double margin = a.prediction.tokens_per_s / b.prediction.tokens_per_s - 1;
  std::string why;
  for (int i = 0; i < 2; ++i) {
    if (std::fabs(diffs[i].d) < 1e-12) break;
    why += fmt::format("{}{} {} {:.3g} s", i ? ", " : "", diffs[i].name, diffs[i].d > 0 ? "saves" : "costs",
                       std::fabs(diffs[i].d));
  }
  if (why.empty()) why = "equal step time; lower memory";
  return fmt::format("best beats runner-up by {:.2f}% ({}): {} per step", 100 * margin,
                     k.empty() ? "same knobs" : k, why);
}

nlohmann::json plan_json(const Plan& plan, size_t top) {
  nlohmann::json j;
  j["candidates_evaluated"] = plan.candidates_evaluated;
  j["candidates_fitting"] = plan.candidates_fitting;
  j["dropped"] = plan.dropped;
  j["top"] = nlohmann::json::array();
  for (size_t i = 0; i < plan.ranked.size() && i < top; ++i)
    j["top"].push_back({{"config", plan.ranked[i].config}, {"prediction", plan.ranked[i].prediction}});
  j["why_best"] = why_best(plan);
  return j;
}

}  // namespace meshtrain::tune
