#include "meshtrain/tune/search_space.h"

#include <algorithm>
#include <utility>

namespace meshtrain::tune {

namespace {

std::vector<int> divisors(int n, int limit) {
  std::vector<int> d;
  for (int i = 1; i <= n && i <= limit; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// Interleaving candidates of pp stages: 1 and every v > 1 that splits the
// layers of each stage into v chunks (even and first/last splits), or that
// divides the layers plus the embedding and the head over pp x v virtual
// stages (embedding-head counting, stage_layers.h).
std::vector<int> vpp_candidates(const ModelConfig& m, const SearchSpace& sp, int pp, StageCounting counting) {
  std::vector<int> vpps = {1};
  if (pp == 1 || sp.stage_partition == StagePartition::balanced) return vpps;  // DeepSpeed: no virtual stages
  if (counting == StageCounting::embedding_head && sp.first_stage_layers == 0 && sp.last_stage_layers == 0) {
    for (int v = 2; v * pp <= m.num_layers + 2; ++v)
      if ((m.num_layers + 2) % (pp * v) == 0) vpps.push_back(v);
    return vpps;
  }
  const int per_stage = m.num_layers % pp == 0 ? m.num_layers / pp : 1;
  for (int v : divisors(per_stage, per_stage))
    if (v > 1) vpps.push_back(v);
  return vpps;
}

template <typename T>
const std::vector<T>& or_default(const std::vector<T>& given, const std::vector<T>& all) {
  return given.empty() ? all : given;
}

// Context-parallel sizes worth planning: powers of two that split each
// sequence into 2 x cp equal chunks of at least 512 tokens.
std::vector<int> cp_candidates(const ModelConfig& m) {
  std::vector<int> cps = {1};
  for (int cp = 2; cp <= 32 && m.seq_length / cp >= 1024; cp *= 2)
    if (m.seq_length % (2 * cp) == 0) cps.push_back(cp);
  return cps;
}

}  // namespace

void restrict_to_framework(const perf::FrameworkProfile& f, SearchSpace& sp, const ModelConfig& m) {
  if (sp.cp.empty()) sp.cp = f.context_parallel ? cp_candidates(m) : std::vector<int>{1};
  if (!f.tensor_parallel && sp.tp.empty()) sp.tp = {1};
  if (!f.pipeline && sp.pp.empty()) sp.pp = {1};
  if (!f.interleaving && sp.vpp.empty()) sp.vpp = {1};
  if (!f.sequence_parallel && sp.sequence_parallel.empty()) sp.sequence_parallel = {false};
  if (f.sequence_parallel_always && sp.sequence_parallel.empty()) sp.sequence_parallel = {true};
  if (!f.flash_attention && sp.flash_attention.empty()) sp.flash_attention = {false};
  if (!f.selective_recompute && sp.recompute.empty()) sp.recompute = {Recompute::none, Recompute::full};
  if (!f.partial_recompute) sp.partial_recompute = false;
  if (sp.zero_stage.empty()) sp.zero_stage = f.zero_stages;
  if (sp.zero_shard.empty() && f.hybrid_shard) sp.hybrid_shard = true;
  sp.stage_partition = perf::partition_under(f, sp.first_stage_layers, sp.last_stage_layers, sp.stage_partition);
}

namespace {

// The TP x CP x PP x DP meshes of `num_gpus` ranks the space lists.
struct Mesh {
  int tp, cp, pp, dp;
};
std::vector<Mesh> meshes(const ModelConfig& m, const SearchSpace& sp, int num_gpus, int max_tp) {
  std::vector<Mesh> out;
  // Copies: or_default may return its temporary argument.
  const std::vector<int> tps = or_default(sp.tp, divisors(num_gpus, max_tp));
  const std::vector<int> cps = sp.cp.empty() ? std::vector<int>{1} : sp.cp;
  for (int tp : tps)
    for (int cp : cps) {
      if (num_gpus % (tp * cp) != 0) continue;
      // Uneven splits need not divide the layers by pp: validate() decides.
      const auto pps = or_default(sp.pp, sp.uneven_stages() ? divisors(num_gpus / (tp * cp), m.num_layers)
                                                            : divisors(m.num_layers, m.num_layers));
      for (int pp : pps) {
        if (num_gpus % (tp * cp * pp) != 0) continue;
        const int dp = num_gpus / (tp * cp * pp);
        if (sp.data_parallel == 0 || dp == sp.data_parallel) out.push_back({tp, cp, pp, dp});
      }
    }
  return out;
}

// The ZeRO stage and shard group pairs of a TP x CP x PP x DP mesh: every
// stage over the whole DP group, and stages 1-3 over the given groups or,
// with hybrid_shard, over groups spanning one node (`node` devices) and
// every power of two of nodes below the whole group (of two DP ranks at
// least: one would shard nothing).
std::vector<std::pair<int, int>> zero_layouts(const SearchSpace& sp, const std::vector<int>& zeros, int ranks_per_dp,
                                              int dp, int node) {
  std::vector<int> shards = sp.zero_shard;
  if (shards.empty()) {
    shards = {0};
    if (sp.hybrid_shard)
      for (int gpus = node; gpus < ranks_per_dp * dp; gpus *= 2)
        if (gpus % ranks_per_dp == 0 && gpus / ranks_per_dp > 1 && dp % (gpus / ranks_per_dp) == 0)
          shards.push_back(gpus / ranks_per_dp);
  }
  std::vector<std::pair<int, int>> out;
  for (int zero : zeros)
    for (int shard : shards)
      if (shard == 0 || shard == dp || zero > 0) out.emplace_back(zero, shard == dp ? 0 : shard);
  return out;
}

}  // namespace

std::vector<ParallelConfig> enumerate(const ModelConfig& m, const SearchSpace& sp, int num_gpus, int gbs,
                                      int max_tp) {
  std::vector<ParallelConfig> out;
  const auto zeros = or_default(sp.zero_stage, std::vector<int>{0, 1, 2, 3});
  const auto recs = or_default(sp.recompute, std::vector<Recompute>{Recompute::none, Recompute::selective,
                                                                     Recompute::full});
  const auto flashes = or_default(sp.flash_attention, std::vector<bool>{true, false});
  for (const auto [tp, cp, pp, dp] : meshes(m, sp, num_gpus, max_tp)) {
    // The stage splits: as given, and searched ones.
    std::vector<StageCounting> countings = {sp.stage_counting};
    if (sp.search_stage_splits && pp > 1 && sp.stage_counting == StageCounting::transformer &&
        sp.first_stage_layers == 0 && sp.last_stage_layers == 0)
      countings.push_back(StageCounting::embedding_head);
    const int per_dp = gbs % dp == 0 ? gbs / dp : 1;
    // Every micro-batch that divides a replica's share of the batch, up to
    // 64 sequences: tables run 26 or 18 where no accumulation is wanted.
    std::vector<int> mbss;
    for (int b = 1; b <= std::min(per_dp, 64); ++b)
      if (per_dp % b == 0) mbss.push_back(b);
    // Sequence parallelism splits the TP group's work: none without TP.
    const auto sps = tp > 1 ? or_default(sp.sequence_parallel, std::vector<bool>{false, true})
                            : std::vector<bool>{false};
    const auto zero_shards = zero_layouts(sp, zeros, tp * cp, dp, max_tp);
    for (StageCounting counting : countings) {
      const std::vector<int> vpps = vpp_candidates(m, sp, pp, counting);
      for (int vpp : or_default(sp.vpp, vpps))
        for (int mbs : or_default(sp.micro_batch_size, mbss))
          for (const auto& [zero, shard] : zero_shards)
            for (Recompute rc : recs)
              for (bool seqp : sps)
                for (bool flash : flashes) {
                  ParallelConfig p;
                  p.tp = tp;
                  p.pp = pp;
                  p.cp = cp;
                  p.dp = dp;
                  p.vpp = vpp;
                  p.schedule = vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
                  p.zero_stage = zero;
                  p.zero_shard = shard;
                  p.micro_batch_size = mbs;
                  p.global_batch_size = gbs;
                  p.recompute = rc;
                  if (rc == Recompute::full && sp.recompute_num_layers > 0) {
                    p.recompute_method = RecomputeMethod::block;
                    p.recompute_num_layers = sp.recompute_num_layers;
                  }
                  p.sequence_parallel = seqp;
                  p.flash_attention = flash;
                  p.bf16 = sp.bf16;
                  p.first_stage_layers = sp.first_stage_layers;
                  p.last_stage_layers = sp.last_stage_layers;
                  p.stage_counting = counting;
                  p.stage_partition = sp.stage_partition;
                  out.push_back(p);
                }
    }
  }
  return out;
}

}  // namespace meshtrain::tune
