// parity_driver: the one program behind the parallel-parity suite
// (tests/parallel/README.md). Subcommands:
//
//   generate
//       Prints the pairwise covering set (greedy, deterministic) in the
//       format of parity_configs.txt.
//   check-coverage FILE
//       Checks that every line of FILE is a valid configuration whose derived
//       fields (name, np, gbs) agree with its knobs, and that every feasible
//       pair of knob values (two knobs, one value each, that some valid
//       configuration combines) occurs in at least one line. Exits non-zero
//       otherwise.
//   reference --meshtrain BIN --dir DIR --model MODEL --gbs G [--layers L]
//       Runs the serial reference of MODEL (1 rank, micro-batch 1, global
//       batch G; with L, L layers) and writes DIR/ref_MODEL_gG.json and .bin
//       (ref_MODEL_gG_lL.*).
//   parity --meshtrain BIN --dir DIR --config LINE -- LAUNCHER...
//       Runs LINE's configuration under LAUNCHER (mpirun and its flags; the
//       driver appends -np N) and compares it with DIR/ref_MODEL_gG.*.
//   memory --dir DIR --config LINE
//       Holds the memory model (perf::stage_memory) against the per-rank
//       memory peaks of the report the parity run of LINE left in DIR
//       (criterion at cmd_memory).
//   expect-error --timeout S --regex RE -- COMMAND...
//       Passes iff COMMAND exits non-zero within S seconds and its stderr holds
//       exactly one "meshtrain ...: error: ..." line, which matches RE.
//
// Parity criterion (stated once, here): with the serial run s and the
// parallel run p of the same global batch,
//   losses      |p_i - s_i| / |s_i| <= 1e-5 for each of the 5 steps
//   grad norms  |p_i - s_i| / |s_i| <= 1e-5 for each step (clipping is on at
//               its default of 1.0, so the global norm must be right)
//   val losses  the same, for the evaluations at iterations 2, 4 and 5
//   weights     ||p - s||_2 / ||s||_2 <= 1e-5 over the whole model (norm-wise,
//               in the serial layout's order), and, as an element-wise guard,
//               max_i |p_i - s_i| / max_i |s_i| <= 1e-4. Reassociation noise
//               measured ~1e-7 norm-wise and <= ~5e-6 element-wise (Adam
//               amplifies it where a gradient is near eps); a missing or
//               doubled contribution to one tensor moves it by O(lr) = 3e-4.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/perf_cache.h"
#include "meshtrain/perf/system_spec.h"

namespace mt = meshtrain;

namespace {

constexpr int kMaxWorld = 8;
constexpr int kIters = 5;
constexpr int kSeed = 7;
constexpr double kLossTol = 1e-5, kNormTol = 1e-5, kWeightNormTol = 1e-5, kWeightMaxTol = 1e-4;
// Memory: the model's activation bytes within this fraction of the measured peak.
constexpr double kActivationTol = 0.05;

// ------------------------------------------------------------------ knobs --
// Each knob has a list of values; a configuration picks one index per knob.
struct Knob {
  std::string name;
  std::vector<std::string> values;
};
const std::vector<Knob>& knobs() {
  static const std::vector<Knob> k = {
      {"tp", {"1", "2", "4"}},
      {"pp", {"1", "2", "4"}},
      {"dp", {"1", "2", "4"}},
      {"zero", {"0", "1", "2", "3"}},
      {"sched", {"gpipe", "1f1b", "interleaved"}},
      {"rc", {"none", "selective", "full", "fullblock"}},
      {"sp", {"0", "1"}},
      {"ga", {"1", "many"}},  // gradient accumulation: one micro-batch, or several
      {"mb", {"1", "2"}},
      // tiny as configs/models has it (tied embeddings, learned positions),
      // tests/parallel/models/tiny-{untied,nopos}.json, or configs/models'
      // tiny-llama (RMSNorm, SwiGLU, rotary, grouped-query attention, untied,
      // no biases)
      {"model", {"tied", "untied", "nopos", "llama"}},
  };
  return k;
}
enum { kTp, kPp, kDp, kZero, kSched, kRc, kSp, kGa, kMb, kModel, kNumKnobs };
using Pick = std::array<int, kNumKnobs>;

struct Config {
  Pick pick{};
  int tp = 1, pp = 1, dp = 1, zero = 0, sp = 0, mb = 1;
  std::string sched, rc, model;
  int ga = 1;    // micro-batches per DP rank per step
  int lpvs = 0;  // layers per virtual stage (interleaved), else 0
  int vpp = 1;
  // Not knobs (added by hand after the covering set): uneven pipeline stages
  // ("f3": the first stage 3 layers, "l3" the last, "f1l3" both, "eh": the
  // embedding and the head counted as layers, "ehc": the same by
  // Megatron-core's --account-for-embedding/loss-in-pipeline-split, "b":
  // DeepSpeed's balanced partition of the transformer layers, "beh": of the
  // layers, the embedding and the head, by --pp-partition-method), a layer
  // count other than the model file's, and (interleaved) the chunks per
  // stage, given as --num-virtual-stages-per-pipeline-rank (vpp_given), and
  // hybrid sharding's shard group (--data-parallel-shard-size).
  std::string stages;
  int layers = 0;
  bool vpp_given = false;
  int shard = 0;  // hybrid sharding: DP ranks per ZeRO shard group (0: all)
  bool prefetch = true;  // ZeRO-3 gathers one unit ahead (prefetch=0: --no-zero-prefetch)
  bool embedding_head() const { return stages == "eh" || stages == "ehc" || stages == "beh"; }
  bool balanced() const { return stages == "b" || stages == "beh"; }
  int first_layers() const { return stage_count('f'); }
  int last_layers() const { return stage_count('l'); }
  int stage_count(char which) const {
    const auto at = stages.find(which);
    return at == std::string::npos || embedding_head() ? 0 : std::atoi(stages.c_str() + at + 1);
  }
  int np() const { return tp * pp * dp; }
  int gbs() const { return mb * dp * ga; }
  std::string name() const {
    std::string s = fmt::format("parity_tp{}_pp{}_dp{}_z{}_{}", tp, pp, dp, zero, sched);
    if (sched == "interleaved") s += fmt::format("v{}", vpp);
    if (sp) s += "_sp";
    s += fmt::format("_rc{}_ga{}_mb{}", rc, ga, mb);
    if (model != "tied") s += "_" + model;
    if (!stages.empty()) s += "_st" + stages;
    if (layers > 0) s += fmt::format("_l{}", layers);
    if (shard > 0) s += fmt::format("_sh{}", shard);
    if (!prefetch) s += "_nopf";
    return s;
  }
  std::string line() const {
    std::string l = fmt::format("name={} np={} gbs={} model={} tp={} pp={} dp={} zero={} sched={} rc={} sp={} ga={} mb={}",
                                name(), np(), gbs(), model, tp, pp, dp, zero, sched, rc, sp,
                                knobs()[kGa].values[pick[kGa]], mb);
    if (!stages.empty()) l += " stages=" + stages;
    if (layers > 0) l += fmt::format(" layers={}", layers);
    if (vpp_given) l += fmt::format(" vpp={}", vpp);
    if (shard > 0) l += fmt::format(" shard={}", shard);
    if (!prefetch) l += " prefetch=0";
    return l;
  }
  // The flags of `meshtrain train` beyond the common ones.
  std::vector<std::string> flags() const {
    std::vector<std::string> f = {"--tensor-model-parallel-size", std::to_string(tp),
                                  "--pipeline-model-parallel-size", std::to_string(pp),
                                  "--micro-batch-size", std::to_string(mb),
                                  "--global-batch-size", std::to_string(gbs()),
                                  "--zero-stage", std::to_string(zero)};
    if (sched == "interleaved" && vpp_given) {
      f.insert(f.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(vpp)});
    } else if (sched == "interleaved") {
      f.insert(f.end(), {"--num-layers-per-virtual-pipeline-stage", std::to_string(lpvs)});
    } else {
      f.insert(f.end(), {"--pipeline-schedule", sched});
    }
    if (sp) f.push_back("--sequence-parallel");
    if (shard > 0) f.insert(f.end(), {"--data-parallel-shard-size", std::to_string(shard)});
    if (!prefetch) f.push_back("--no-zero-prefetch");
    if (first_layers() > 0) f.insert(f.end(), {"--decoder-first-pipeline-num-layers", std::to_string(first_layers())});
    if (last_layers() > 0) f.insert(f.end(), {"--decoder-last-pipeline-num-layers", std::to_string(last_layers())});
    if (stages == "eh") f.insert(f.end(), {"--pipeline-layer-counting", "embedding-head"});
    if (stages == "b") f.insert(f.end(), {"--pipeline-stage-partition", "balanced"});
    if (stages == "beh") f.insert(f.end(), {"--pp-partition-method", "type:transformer|embedding"});
    if (stages == "ehc")
      f.insert(f.end(), {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"});
    if (rc == "none" || rc == "selective") {
      f.insert(f.end(), {"--recompute-granularity", rc});
    } else if (rc == "full") {
      f.insert(f.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform"});
    } else {  // fullblock: the first layer of each chunk recomputed, the others stashed
      f.insert(f.end(), {"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1"});
    }
    return f;
  }
};

// The --model argument of a model knob value.
std::string model_arg(const std::string& model) {
  if (model == "tied") return "tiny";
  if (model == "llama") return "tiny-llama";
  return std::string(MESHTRAIN_SOURCE_DIR) + "/tests/parallel/models/tiny-" + model + ".json";
}
const mt::ModelConfig& model_config(const std::string& model) {
  static std::map<std::string, mt::ModelConfig> cache;
  auto it = cache.find(model);
  if (it != cache.end()) return it->second;
  mt::ModelConfig m = mt::load_model_config(model_arg(model));
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  return cache.emplace(model, m).first->second;
}
// The reference's name: ref_MODEL_gG, ref_MODEL_gG_lL with another layer count.
std::string ref_name(const std::string& model, int gbs, int layers) {
  return layers > 0 ? fmt::format("{}_g{}_l{}", model, gbs, layers) : fmt::format("{}_g{}", model, gbs);
}
// The model a configuration runs: its model's, with its layer count.
mt::ModelConfig model_of(const std::string& model, int layers) {
  mt::ModelConfig m = model_config(model);
  if (layers > 0) m.num_layers = layers;
  return m;
}

// Derives the concrete run from the knob values:
//   ga "many": 3 micro-batches (odd, so 1F1B runs m < pp and m not a
//     multiple of pp), or 2 x pp with the interleaved schedule (which needs a
//     multiple of pp; 2 x pp > pp takes its steady-state path, not only the
//     all-forwards-first one of m == pp);
//   interleaved: 1 layer per virtual stage with pp = 4 (2 chunks); with pp = 2
//     1 layer (4 chunks) for micro-batch 1, 2 layers (2 chunks) for 2.
Config derive(const Pick& p) {
  const auto& k = knobs();
  Config c;
  c.pick = p;
  c.tp = std::stoi(k[kTp].values[p[kTp]]);
  c.pp = std::stoi(k[kPp].values[p[kPp]]);
  c.dp = std::stoi(k[kDp].values[p[kDp]]);
  c.zero = std::stoi(k[kZero].values[p[kZero]]);
  c.sched = k[kSched].values[p[kSched]];
  c.rc = k[kRc].values[p[kRc]];
  c.sp = p[kSp];
  c.mb = std::stoi(k[kMb].values[p[kMb]]);
  c.model = k[kModel].values[p[kModel]];
  const int layers = model_config(c.model).num_layers;
  const bool many = k[kGa].values[p[kGa]] == "many";
  if (c.sched == "interleaved") {
    c.lpvs = c.pp == 2 && c.mb == 2 ? 2 : 1;
    c.vpp = layers % c.pp == 0 ? layers / c.pp / c.lpvs : 1;
    c.ga = many ? 2 * c.pp : 1;
  } else {
    c.ga = many ? 3 : 1;
  }
  return c;
}

// The ParallelConfig `meshtrain train` builds from the configuration's flags.
mt::ParallelConfig parallel_config(const Config& c) {
  mt::ParallelConfig p;
  p.tp = c.tp;
  p.pp = c.pp;
  p.dp = c.dp;
  p.vpp = c.vpp;
  p.zero_stage = c.zero;
  p.zero_shard = c.shard;
  p.sequence_parallel = c.sp;
  p.micro_batch_size = c.mb;
  p.global_batch_size = c.gbs();
  p.schedule = mt::parse_schedule(c.sched);
  p.recompute = c.rc == "none" ? mt::Recompute::none : c.rc == "selective" ? mt::Recompute::selective : mt::Recompute::full;
  p.recompute_method = c.rc == "fullblock" ? mt::RecomputeMethod::block : mt::RecomputeMethod::uniform;
  p.recompute_num_layers = 1;
  p.first_stage_layers = c.first_layers();
  p.last_stage_layers = c.last_layers();
  p.stage_counting = c.embedding_head() ? mt::StageCounting::embedding_head : mt::StageCounting::transformer;
  p.stage_partition = c.balanced() ? mt::StagePartition::balanced : mt::StagePartition::even;
  return p;
}

// Empty when the configuration is runnable here, else why not. The engine's
// own validate() decides, plus what this suite adds: at most 8 ranks, and
// sequence parallelism only with TP > 1 (it means nothing without).
std::string invalid_reason(const Config& c) {
  if (c.np() > kMaxWorld) return fmt::format("world {} > {}", c.np(), kMaxWorld);
  if (c.sp && c.tp == 1) return "sequence parallel without TP";
  const mt::ModelConfig m = model_of(c.model, c.layers);
  if (c.sched == "interleaved" && !c.vpp_given && (m.num_layers % c.pp != 0 || (m.num_layers / c.pp) % c.lpvs != 0))
    return "layers per stage not divisible by layers per virtual stage";
  try {
    mt::validate(m, parallel_config(c), c.np());
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "";
}

std::vector<Config> all_valid() {
  std::vector<Config> out;
  const auto& k = knobs();
  Pick p{};
  std::function<void(int)> rec = [&](int i) {
    if (i == kNumKnobs) {
      Config c = derive(p);
      if (invalid_reason(c).empty()) out.push_back(c);
      return;
    }
    for (int v = 0; v < static_cast<int>(k[i].values.size()); ++v) {
      p[i] = v;
      rec(i + 1);
    }
  };
  rec(0);
  return out;
}

// Two notions of a pair of knob values (knob a = value va, knob b = value vb,
// a < b) being met by a configuration:
//   literal    the configuration sets both values;
//   effective  it sets both and both take effect: a ZeRO stage > 0 only with
//              DP > 1 (else nothing is sharded), a pipeline schedule only with
//              PP > 1 (else there is no pipeline). (Sequence parallelism
//              without TP is not a valid configuration here at all.)
// The suite must meet every feasible pair (one that some valid configuration
// meets) in both senses. A Pair is (a, va, b, vb, effective?).
using Pair = std::array<int, 5>;
bool active(const Config& c, int knob) {
  if (knob == kZero) return c.zero == 0 || c.dp > 1;
  if (knob == kSched) return c.pp > 1;
  return true;
}
std::set<Pair> pairs_of(const Config& c) {
  std::set<Pair> s;
  const Pick& p = c.pick;
  for (int a = 0; a < kNumKnobs; ++a)
    for (int b = a + 1; b < kNumKnobs; ++b) {
      s.insert({a, p[a], b, p[b], 0});
      if (active(c, a) && active(c, b)) s.insert({a, p[a], b, p[b], 1});
    }
  return s;
}
std::set<Pair> feasible_pairs(const std::vector<Config>& valid) {
  std::set<Pair> s;
  for (const Config& c : valid)
    for (const Pair& q : pairs_of(c)) s.insert(q);
  return s;
}
std::string pair_name(const Pair& q) {
  const auto& k = knobs();
  return fmt::format("{}={} x {}={}{}", k[q[0]].name, k[q[0]].values[q[1]], k[q[2]].name, k[q[2]].values[q[3]],
                     q[4] ? " (effective)" : "");
}

// Estimated seconds of one parity run on this 2-core machine: mpirun start-up
// and per-rank start-up dominate (measured: ~1.3 s at 1 rank, ~5-7 s at 8).
double cost_s(const Config& c) { return 0.8 + 0.7 * c.np() + 0.02 * c.np() * c.ga * c.mb; }

// Greedy covering: repeatedly take the valid configuration that meets the
// most still-unmet feasible pairs (literal and effective counted alike); ties
// go to the cheaper run, then to the first in enumeration order. (Taking the
// most pairs per estimated second instead gave 41 configurations and 198
// rank-runs against this rule's 25 and 168.)
std::vector<Config> generate() {
  const std::vector<Config> valid = all_valid();
  std::set<Pair> uncovered = feasible_pairs(valid);
  std::vector<Config> chosen;
  while (!uncovered.empty()) {
    const Config* best = nullptr;
    int best_gain = 0;
    double best_cost = 0;
    for (const Config& c : valid) {
      int gain = 0;
      for (const Pair& q : pairs_of(c)) gain += uncovered.count(q);
      const double cost = cost_s(c);
      if (gain > best_gain || (gain == best_gain && gain > 0 && cost < best_cost)) {
        best = &c;
        best_gain = gain;
        best_cost = cost;
      }
    }
    MT_ASSERT(best != nullptr);
    for (const Pair& q : pairs_of(*best)) uncovered.erase(q);
    chosen.push_back(*best);
  }
  return chosen;
}

// ------------------------------------------------------------ file format --
std::map<std::string, std::string> parse_fields(const std::string& line) {
  std::map<std::string, std::string> f;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) throw mt::Error("bad field '" + tok + "' in: " + line);
    f[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return f;
}

// The configuration a line describes; throws Error if it is malformed or its
// derived fields disagree with its knobs.
Config parse_config(const std::string& line) {
  auto f = parse_fields(line);
  Pick p{};
  const auto& k = knobs();
  for (int i = 0; i < kNumKnobs; ++i) {
    auto it = f.find(k[i].name);
    if (it == f.end()) throw mt::Error(fmt::format("missing {}= in: {}", k[i].name, line));
    auto v = std::find(k[i].values.begin(), k[i].values.end(), it->second);
    if (v == k[i].values.end()) throw mt::Error(fmt::format("unknown {}={} in: {}", k[i].name, it->second, line));
    p[i] = static_cast<int>(v - k[i].values.begin());
  }
  Config c = derive(p);
  c.stages = f.count("stages") ? f["stages"] : "";
  if (!c.stages.empty() && !std::regex_match(c.stages, std::regex("eh|ehc|b|beh|f[0-9]+|l[0-9]+|f[0-9]+l[0-9]+")))
    throw mt::Error(fmt::format("bad stages={} (eh, ehc, b, beh, fN, lN or fNlM) in: {}", c.stages, line));
  c.layers = f.count("layers") ? std::stoi(f["layers"]) : 0;
  if (f.count("vpp")) {
    if (c.sched != "interleaved") throw mt::Error("vpp= needs sched=interleaved in: " + line);
    c.vpp_given = true;
    c.vpp = std::stoi(f["vpp"]);
    c.lpvs = 0;
  }
  c.shard = f.count("shard") ? std::stoi(f["shard"]) : 0;
  c.prefetch = !f.count("prefetch") || f["prefetch"] != "0";
  if (f["name"] != c.name() || f["np"] != std::to_string(c.np()) || f["gbs"] != std::to_string(c.gbs()) ||
      f["model"] != c.model)
    throw mt::Error(fmt::format("derived fields disagree with the knobs (expected {}) in: {}", c.line(), line));
  return c;
}

std::vector<std::string> config_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw mt::Error("cannot read " + path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("name=", 0) == 0) out.push_back(line);
  return out;
}

int cmd_generate() {
  const std::vector<Config> valid = all_valid();
  const std::vector<Config> set = generate();
  std::printf("# Pairwise covering set of the parallel-parity suite, one configuration a line.\n"
              "# Generated by `parity_driver generate` (greedy, deterministic) from %zu valid\n"
              "# configurations and %zu feasible (literal + effective) pairs; checked by the\n"
              "# ctest parity_coverage. See README.md.\n",
              valid.size(), feasible_pairs(valid).size());
  for (const Config& c : set) std::printf("%s\n", c.line().c_str());
  return 0;
}

int cmd_check_coverage(const std::string& path) {
  const std::vector<Config> valid = all_valid();
  const std::set<Pair> feasible = feasible_pairs(valid);
  std::map<Pair, int> count;
  int bad = 0, ranks = 0;
  std::set<std::string> names;
  std::set<std::string> refs;
  const auto lines = config_lines(path);
  for (const std::string& line : lines) {
    try {
      const Config c = parse_config(line);
      if (const std::string why = invalid_reason(c); !why.empty()) throw mt::Error("invalid (" + why + "): " + line);
      if (!names.insert(c.name()).second) throw mt::Error("duplicate: " + line);
      for (const Pair& q : pairs_of(c)) ++count[q];
      ranks += c.np();
      refs.insert(ref_name(c.model, c.gbs(), c.layers));
    } catch (const mt::Error& e) {
      std::printf("ERROR %s\n", e.what());
      ++bad;
    }
  }
  int missing = 0;
  for (const Pair& q : feasible)
    if (!count.count(q)) {
      std::printf("MISSING pair %s\n", pair_name(q).c_str());
      ++missing;
    }
  // Pairs no valid configuration can meet (reported, not required).
  const auto& k = knobs();
  std::vector<std::string> infeasible[2];
  size_t feasible_of[2] = {0, 0};
  for (const Pair& q : feasible) ++feasible_of[q[4]];
  for (int e = 0; e < 2; ++e)
    for (int a = 0; a < kNumKnobs; ++a)
      for (int b = a + 1; b < kNumKnobs; ++b)
        for (int va = 0; va < static_cast<int>(k[a].values.size()); ++va)
          for (int vb = 0; vb < static_cast<int>(k[b].values.size()); ++vb)
            if (!feasible.count({a, va, b, vb, e})) infeasible[e].push_back(pair_name({a, va, b, vb, 0}));
  std::printf("%zu configurations (%d rank-runs, %zu serial references), %zu valid configurations in the space\n",
              lines.size(), ranks, refs.size(), valid.size());
  std::printf("%zu feasible pairs (%zu literal + %zu effective), %zu met, %d missing\n", feasible.size(),
              feasible_of[0], feasible_of[1], feasible.size() - missing, missing);
  std::printf("%zu pairs no valid configuration sets:\n", infeasible[0].size());
  for (const auto& s : infeasible[0]) std::printf("  %s\n", s.c_str());
  std::printf("%zu pairs no valid configuration makes both take effect (the above and):\n",
              infeasible[1].size() - infeasible[0].size());
  for (const auto& s : infeasible[1])
    if (std::find(infeasible[0].begin(), infeasible[0].end(), s) == infeasible[0].end()) std::printf("  %s\n", s.c_str());
  int min_count = 1 << 30;
  for (const auto& [q, n] : count) min_count = std::min(min_count, n);
  std::printf("each met pair is met at least %d time(s)\n", min_count);
  std::printf("%s\n", bad == 0 && missing == 0 ? "COVERAGE OK" : "COVERAGE FAILED");
  return bad == 0 && missing == 0 ? 0 : 1;
}

// ---------------------------------------------------------------- running --
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) {
    if (ch == '\'')
      q.append("'\\''");
    else
      q.push_back(ch);
  }
  q.push_back('\'');
  return q;
}
std::string join_quoted(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) {
    if (!s.empty()) s.push_back(' ');
    s.append(quote(a));
  }
  return s;
}

struct RunResult {
  int rc = -1;
  bool timed_out = false;
  double seconds = 0;
};
// Runs `argv` under timeout(1), stdout and stderr to the given files.
RunResult run(const std::vector<std::string>& argv, int timeout_s, const std::string& out, const std::string& err) {
  const std::string cmd = "timeout -k 5 " + std::to_string(timeout_s) + " " + join_quoted(argv) + " </dev/null >" +
                          quote(out) + " 2>" + (err == out ? std::string("&1") : quote(err));
  const auto t0 = std::chrono::steady_clock::now();
  const int st = std::system(cmd.c_str());
  RunResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.timed_out = r.rc == 124 || r.rc == 137;
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string ref_base(const std::string& dir, const std::string& model, int gbs, int layers) {
  return fmt::format("{}/ref_{}", dir, ref_name(model, gbs, layers));
}

std::vector<std::string> common_flags(const std::string& model, int layers) {
  std::vector<std::string> f = {"train", "--model", model_arg(model), "--mock-data", "--train-iters",
                                std::to_string(kIters), "--seed", std::to_string(kSeed), "--eval-iters", "1",
                                "--eval-interval", "2", "--quiet"};
  if (layers > 0) f.insert(f.end(), {"--num-layers", std::to_string(layers)});
  return f;
}

int cmd_reference(const std::string& bin, const std::string& dir, const std::string& model, int gbs, int layers) {
  std::filesystem::create_directories(dir);
  const std::string base = ref_base(dir, model, gbs, layers);
  std::vector<std::string> argv = {bin};
  for (auto& a : common_flags(model, layers)) argv.push_back(a);
  // Written under other names first: a test never sees half a reference.
  argv.insert(argv.end(), {"--micro-batch-size", "1", "--global-batch-size", std::to_string(gbs), "--report",
                           base + ".partial.json", "--dump-weights", base + ".partial.bin"});
  std::printf("serial reference: %s\n", join_quoted(argv).c_str());
  const RunResult r = run(argv, 120, base + ".log", base + ".log");
  std::printf("%s", slurp(base + ".log").c_str());
  if (r.rc != 0) {
    std::printf("FAIL: the serial reference exited %d%s\n", r.rc, r.timed_out ? " (timed out)" : "");
    return 1;
  }
  std::filesystem::rename(base + ".partial.bin", base + ".bin");
  std::filesystem::rename(base + ".partial.json", base + ".json");
  std::printf("serial reference for model %s, global batch %d written (%.1f s)\n", model.c_str(), gbs, r.seconds);
  return 0;
}

std::vector<float> read_floats(const std::string& path) {
  const std::string s = slurp(path);
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

// Compares one per-step series; prints it and returns the worst relative error.
double compare_series(const char* what, const std::vector<double>& s, const std::vector<double>& p, double tol,
                      bool& ok) {
  double worst = 0;
  if (s.size() != p.size() || s.empty()) {
    std::printf("  %-11s serial has %zu values, parallel %zu: FAIL\n", what, s.size(), p.size());
    ok = false;
    return INFINITY;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const double rel = std::abs(p[i] - s[i]) / std::max(std::abs(s[i]), 1e-30);
    worst = std::max(worst, rel);
    std::printf("  %-11s [%zu] serial %.9f parallel %.9f rel %.2e%s\n", what, i, s[i], p[i], rel,
                rel <= tol ? "" : "  <-- exceeds");
  }
  if (worst > tol) ok = false;
  return worst;
}

std::vector<double> series(const nlohmann::json& j, const char* key) {
  std::vector<double> v;
  if (!j.contains(key)) return v;
  for (const auto& x : j[key]) v.push_back(x.is_object() ? x["loss"].get<double>() : x.get<double>());
  return v;
}

int cmd_parity(const std::string& bin, const std::string& dir, const std::string& line,
               const std::vector<std::string>& launcher) {
  const Config c = parse_config(line);
  if (const std::string why = invalid_reason(c); !why.empty()) {
    std::printf("FAIL: invalid configuration (%s): %s\n", why.c_str(), line.c_str());
    return 1;
  }
  const std::string ref = ref_base(dir, c.model, c.gbs(), c.layers);
  const std::string base = fmt::format("{}/{}", dir, c.name());
  std::filesystem::remove(base + ".json");
  std::filesystem::remove(base + ".bin");
  std::vector<std::string> argv = launcher;
  argv.insert(argv.end(), {"-np", std::to_string(c.np()), bin});
  for (auto& a : common_flags(c.model, c.layers)) argv.push_back(a);
  for (auto& a : c.flags()) argv.push_back(a);
  argv.insert(argv.end(), {"--report", base + ".json", "--dump-weights", base + ".bin"});
  std::printf("config: %s\nrun: %s\n", line.c_str(), join_quoted(argv).c_str());
  std::fflush(stdout);
  const RunResult r = run(argv, 100, base + ".log", base + ".log");
  std::printf("exit status %d after %.1f s\n", r.rc, r.seconds);
  if (r.rc != 0) {
    std::printf("---- output ----\n%s----\nFAIL %s: the parallel run %s (exit status %d after %.1f s)\n",
                slurp(base + ".log").c_str(), c.name().c_str(), r.timed_out ? "did not finish (hang?)" : "failed",
                r.rc, r.seconds);
    return 1;
  }
  if (!std::filesystem::exists(ref + ".json") || !std::filesystem::exists(ref + ".bin")) {
    std::printf("FAIL: no serial reference %s.{json,bin} (run the test parity_ref_%s first)\n", ref.c_str(),
                ref_name(c.model, c.gbs(), c.layers).c_str());
    return 1;
  }
  const auto js = nlohmann::json::parse(slurp(ref + ".json"));
  const auto jp = nlohmann::json::parse(slurp(base + ".json"));
  bool ok = true;
  const double e_loss = compare_series("loss", series(js, "losses"), series(jp, "losses"), kLossTol, ok);
  const double e_norm = compare_series("grad norm", series(js, "grad_norms"), series(jp, "grad_norms"), kNormTol, ok);
  const double e_val = compare_series("val loss", series(js, "val_losses"), series(jp, "val_losses"), kLossTol, ok);

  const std::vector<float> ws = read_floats(ref + ".bin"), wp = read_floats(base + ".bin");
  if (ws.size() != wp.size() || ws.empty()) {
    std::printf("FAIL: weight dumps differ in size: serial %zu, parallel %zu floats\n", ws.size(), wp.size());
    return 1;
  }
  double d2 = 0, s2 = 0, dmax = 0, smax = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const double d = double(wp[i]) - ws[i];
    d2 += d * d;
    s2 += double(ws[i]) * ws[i];
    dmax = std::max(dmax, std::abs(d));
    smax = std::max(smax, std::abs(double(ws[i])));
  }
  const double w_norm = std::sqrt(d2 / s2), w_max = dmax / smax;
  if (!(w_norm <= kWeightNormTol && w_max <= kWeightMaxTol)) ok = false;
  std::printf("  weights     ||d||/||w|| %.2e (limit %.0e), max|d|/max|w| %.2e (limit %.0e)\n", w_norm,
              kWeightNormTol, w_max, kWeightMaxTol);
  // Where the weights differ most, by tensor (serial layout).
  mt::ParallelConfig serial;
  const mt::Layout L = mt::Layout::build(model_of(c.model, c.layers), serial, 0, 0);
  std::vector<std::pair<double, std::string>> worst;
  for (const auto& u : L.units())
    for (const auto& s : u.params) {
      double td = 0, ts = 0, tmax = 0;
      for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) {
        const double d = double(wp[i]) - ws[i];
        td += d * d;
        ts += double(ws[i]) * ws[i];
        tmax = std::max(tmax, std::abs(d));
      }
      worst.emplace_back(tmax, fmt::format("{} (max|d| {:.2e}, ||d||/||w|| {:.2e})", s.name, tmax,
                                           std::sqrt(td / std::max(ts, 1e-30))));
    }
  std::sort(worst.rbegin(), worst.rend());
  std::printf("  largest differences:\n");
  for (size_t i = 0; i < std::min<size_t>(ok ? 3 : 10, worst.size()); ++i) std::printf("    %s\n", worst[i].second.c_str());
  std::printf("%s %s | loss %.1e grad-norm %.1e val %.1e | weights norm %.1e max %.1e | %.1f s\n", ok ? "PASS" : "FAIL",
              c.name().c_str(), e_loss, e_norm, e_val, w_norm, w_max, r.seconds);
  return ok ? 0 : 1;
}

// ---------------------------------------------------------------- memory --
// One memory category of one rank, the model's bytes against the measured
// peak, and how they must agree.
struct MemCheck {
  enum Rule { exact, within, at_least };
  const char* category;
  int64_t model = 0, measured = 0;
  Rule rule = exact;
  double rel() const {
    return measured ? std::abs(double(measured - model)) / double(measured) : model ? 1.0 : 0.0;
  }
  bool ok() const {
    switch (rule) {
      case exact: return model == measured;
      case within: return rel() <= kActivationTol;
      case at_least: return measured >= model;
    }
    return false;
  }
  const char* verdict() const {
    if (ok()) return rule == at_least && measured > model ? "  (sends in flight)" : "";
    switch (rule) {
      case exact: return "  <-- must be equal";
      case within: return "  <-- exceeds the tolerance";
      case at_least: return "  <-- the engine holds less than the model counts";
    }
    return "";
  }
};

// Holds the memory model (perf::stage_memory, from the same Layout,
// activations.h and Schedule the engine allocates from) against the per-rank
// peaks of the parity run's report, rank by rank:
//   parameters, gradients, optimizer, workspace  equal
//   activations   |model - measured| <= 5% of measured
//   comm_buffers  equal with one pipeline stage; with more, measured >=
//                 model: MPI decides when a non-blocking send completes, and
//                 the engine frees a send's buffer only at its next
//                 completion test, so sends still in flight add to the
//                 measured peak by an amount that varies from run to run.
int cmd_memory(const std::string& dir, const std::string& line) {
  const Config c = parse_config(line);
  const std::string path = fmt::format("{}/{}.json", dir, c.name());
  std::printf("config: %s\nreport: %s\n", line.c_str(), path.c_str());
  if (!std::filesystem::exists(path)) {
    std::printf("FAIL: no run report %s (the test %s writes it)\n", path.c_str(), c.name().c_str());
    return 1;
  }
  const auto report = nlohmann::json::parse(slurp(path));
  const mt::ModelConfig m = model_of(c.model, c.layers);
  const mt::ParallelConfig p = parallel_config(c);
  // The model must cost the configuration the engine ran.
  if (nlohmann::json(p) != report["config"]["parallel"]) {
    std::printf("FAIL: the report's parallel configuration differs from the line's:\n  report %s\n  line   %s\n",
                report["config"]["parallel"].dump().c_str(), nlohmann::json(p).dump().c_str());
    return 1;
  }
  // A system without reserved bytes or fragmentation allowance: the model's
  // workspace is then 0, as the engine's.
  mt::perf::SystemSpec sys;
  mt::perf::PerfCache cache;
  std::vector<mt::perf::MemoryBytes> stages;
  mt::perf::PerfOptions engine;  // the engine's runtime, its ZeRO-3 prefetch as the line sets it
  engine.zero.prefetch_units = c.prefetch ? 1 : 0;
  for (int s = 0; s < p.pp; ++s) stages.push_back(mt::perf::stage_memory(m, p, sys, s, cache, engine));
  const int64_t boundary = int64_t{c.mb} * m.seq_length / (c.sp ? c.tp : 1) * m.hidden_size * (p.bf16 ? 2 : 4);

  bool ok = true;
  double worst_act = 0;
  int worst_rank = -1, ranks = 0;
  int64_t in_flight = 0;  // most comm_buffers bytes measured beyond the model
  std::printf("%-5s %-5s %-13s %10s %10s %7s\n", "rank", "stage", "category", "model", "measured", "diff");
  for (const auto& r : report["measurements"]["ranks"]) {
    const int rank = r["rank"].get<int>(), stage = r["coord"]["pp"].get<int>();
    const auto& meas = r["memory_peak_bytes"];
    const mt::perf::MemoryBytes& mb = stages.at(stage);
    auto get = [&](const char* k) { return meas.at(k).get<int64_t>(); };
    const MemCheck checks[] = {
        {"parameters", int64_t(mb.parameters), get("parameters")},
        {"gradients", int64_t(mb.gradients), get("gradients")},
        {"optimizer", int64_t(mb.optimizer), get("optimizer")},
        {"activations", int64_t(mb.activations), get("activations"), MemCheck::within},
        {"comm_buffers", int64_t(mb.comm_buffers), get("comm_buffers"),
         p.pp > 1 ? MemCheck::at_least : MemCheck::exact},
        {"workspace", int64_t(mb.workspace), get("workspace")},
    };
    for (const MemCheck& k : checks) {
      ok &= k.ok();
      std::printf("%-5d %-5d %-13s %10lld %10lld %6.2f%%%s\n", rank, stage, k.category, (long long)k.model,
                  (long long)k.measured, 100.0 * k.rel(), k.verdict());
      if (k.rule == MemCheck::within && k.rel() >= worst_act) {
        worst_act = k.rel();
        worst_rank = rank;
      }
      if (k.rule == MemCheck::at_least) in_flight = std::max(in_flight, k.measured - k.model);
    }
    ++ranks;
  }
  if (ranks != c.np()) {
    std::printf("FAIL: the report holds %d ranks, the configuration %d\n", ranks, c.np());
    ok = false;
  }
  std::string comm = "comm_buffers exact";
  if (p.pp > 1)
    comm = fmt::format("comm_buffers >= model, at most {} B more ({:.1f} boundary activations of {} B in flight)",
                       in_flight, double(in_flight) / double(boundary), boundary);
  std::printf("%s memory_%s | parameters, gradients, optimizer, workspace exact | activations max error %.2f%% "
              "(rank %d; limit %.0f%%) | %s\n",
              ok ? "PASS" : "FAIL", c.name().substr(std::strlen("parity_")).c_str(), 100.0 * worst_act, worst_rank,
              100.0 * kActivationTol, comm.c_str());
  return ok ? 0 : 1;
}

int cmd_expect_error(int timeout_s, const std::string& re, const std::vector<std::string>& argv) {
  const std::string dir = std::filesystem::temp_directory_path() / fmt::format("mt_expect_error_{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::printf("run: %s\n", join_quoted(argv).c_str());
  const RunResult r = run(argv, timeout_s, dir + "/out", dir + "/err");
  const std::string out = slurp(dir + "/out"), err = slurp(dir + "/err");
  std::filesystem::remove_all(dir);
  std::printf("---- stdout ----\n%s---- stderr ----\n%s----\nexit status %d after %.1f s\n", out.c_str(), err.c_str(),
              r.rc, r.seconds);
  if (r.timed_out || r.seconds >= timeout_s) {
    std::printf("FAIL: still running after %d s (hang)\n", timeout_s);
    return 1;
  }
  if (r.rc == 0) {
    std::printf("FAIL: the command succeeded; it should have failed\n");
    return 1;
  }
  const std::regex error_line("^meshtrain[^:]*: error: .*");
  std::vector<std::string> errors;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line))
    if (std::regex_match(line, error_line)) errors.push_back(line);
  if (errors.size() != 1) {
    std::printf("FAIL: stderr holds %zu 'meshtrain ...: error:' lines; expected exactly one\n", errors.size());
    return 1;
  }
  if (!std::regex_search(errors[0], std::regex(re))) {
    std::printf("FAIL: the error line does not name the constraint /%s/\n", re.c_str());
    return 1;
  }
  std::printf("PASS: non-zero exit in %.1f s with one error line naming the constraint\n", r.seconds);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: parity_driver generate\n"
               "       parity_driver check-coverage FILE\n"
               "       parity_driver reference --meshtrain BIN --dir DIR --model tied|untied|nopos|llama --gbs G [--layers L]\n"
               "       parity_driver parity --meshtrain BIN --dir DIR --config LINE -- LAUNCHER...\n"
               "       parity_driver memory --dir DIR --config LINE\n"
               "       parity_driver expect-error --timeout S --regex RE -- COMMAND...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  std::map<std::string, std::string> opt;
  std::vector<std::string> rest, positional;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      rest.assign(argv + i + 1, argv + argc);
      break;
    }
    if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      opt[a.substr(2)] = argv[++i];
    } else {
      positional.push_back(a);
    }
  }
  try {
    if (cmd == "generate") return cmd_generate();
    if (cmd == "check-coverage" && positional.size() == 1) return cmd_check_coverage(positional[0]);
    if (cmd == "reference")
      return cmd_reference(opt.at("meshtrain"), opt.at("dir"), opt.at("model"), std::stoi(opt.at("gbs")),
                           opt.count("layers") ? std::stoi(opt.at("layers")) : 0);
    if (cmd == "parity" && !rest.empty()) return cmd_parity(opt.at("meshtrain"), opt.at("dir"), opt.at("config"), rest);
    if (cmd == "memory") return cmd_memory(opt.at("dir"), opt.at("config"));
    if (cmd == "expect-error" && !rest.empty())
      return cmd_expect_error(std::stoi(opt.at("timeout")), opt.at("regex"), rest);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return usage();
}
