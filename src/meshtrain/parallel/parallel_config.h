// ParallelConfig: how a model is split over ranks and how a step is run.
// world = PP x DP x CP x TP, ranks ordered as Megatron orders them (TP
// fastest, then CP, then DP, then PP), so a TP group sits inside one node.
// Context parallelism (CP > 1) is a layout the performance model prices
// (perf/context_parallel.h); the engine runs CP 1.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/model/model_config.h"

namespace meshtrain {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };
enum class Recompute { none, selective, full };
enum class RecomputeMethod { uniform, block };
// How pipeline stages count layers when the split is derived
// (parallel/stage_layers.h): transformer layers only (Megatron-LM), or the
// embedding and the head as one layer each (Megatron-DeepSpeed's
// --pp-partition-method 'type:transformer|embedding').
enum class StageCounting { transformer, embedding_head };
// How the counted items are balanced over the stages when they do not divide
// (parallel/stage_layers.h): even (Megatron-LM refuses a remainder), or
// balanced (DeepSpeed PipelineModule's partition_balanced, which Megatron-
// DeepSpeed's --pp-partition-method 'type:...' runs: the fewest items on the
// busiest stage, stages filled in order, so the remainder is the last's).
enum class StagePartition { even, balanced };

std::string_view schedule_name(ScheduleKind k);  // "gpipe", "1f1b", "interleaved"
ScheduleKind parse_schedule(std::string_view s);  // throws Error on unknown
std::string_view recompute_name(Recompute r);     // "none", "selective", "full"
Recompute parse_recompute(std::string_view s);
std::string_view recompute_method_name(RecomputeMethod m);
RecomputeMethod parse_recompute_method(std::string_view s);
std::string_view stage_counting_name(StageCounting c);  // "transformer", "embedding-head"
StageCounting parse_stage_counting(std::string_view s);  // "" = transformer; throws Error on unknown
std::string_view stage_partition_name(StagePartition s);  // "even", "balanced"
StagePartition parse_stage_partition(std::string_view s);  // "" = even; throws Error on unknown

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  // Context parallelism: every sequence split over `cp` ranks, which hold
  // the same weights and reduce their gradients together (Megatron-Core's
  // --context-parallel-size, its data-parallel group "with CP").
  int cp = 1;
  int vpp = 1;  // model chunks per pipeline stage (interleaved schedule)
  // Uneven pipeline stages (parallel/stage_layers.h): transformer layers of
  // the first and of the last stage, 0 = their even share (Megatron-LM's
  // --decoder-first/last-pipeline-num-layers); the other stages split the
  // rest evenly. Or the embedding and the head counted as layers.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  StageCounting stage_counting = StageCounting::transformer;
  StagePartition stage_partition = StagePartition::even;
  int zero_stage = 0;
  // Hybrid sharding (HSDP): the ZeRO stage's states sharded over groups of
  // `zero_shard` consecutive DP ranks and replicated across the dp /
  // zero_shard groups, gradients reduce-scattered in the group and then
  // all-reduced across the replicas (PyTorch FSDP's HYBRID_SHARD, torchtitan's
  // dp_shard x dp_replicate). 0 (or dp): sharded over the whole DP group. ZeRO
  // stages 1-3, in the engine and the performance model.
  int zero_shard = 0;
  bool sequence_parallel = false;
  int micro_batch_size = 1;
  int global_batch_size = 1;  // sequences per optimizer step, all DP ranks
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  Recompute recompute = Recompute::none;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  int recompute_num_layers = 1;
  bool bf16 = false;
  bool flash_attention = true;  // engine: always tiled; cost model: either

  int world() const { return tp * cp * pp * dp; }
  // DP ranks one ZeRO shard group spans, and the groups holding a replica.
  int shard_size() const { return zero_shard > 0 ? zero_shard : dp; }
  int shard_replicas() const { return dp / shard_size(); }
  bool hybrid_shard() const { return zero_shard > 0 && zero_shard < dp; }
  // Whether the layers are split otherwise than num_layers / pp per stage.
  bool uneven_stages() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || stage_counting != StageCounting::transformer ||
           stage_partition != StagePartition::even;
  }
  // Micro-batches each DP rank runs per optimizer step (gradient accumulation).
  int num_micro_batches() const { return global_batch_size / (micro_batch_size * dp); }
};

// Where one rank sits in the mesh of a CP 1 layout (the engine's; the
// performance model places CP ranks as DP ranks, perf/context_parallel.h).
struct RankCoord {
  int tp = 0, dp = 0, pp = 0;
};
inline int rank_of(const ParallelConfig& p, RankCoord c) { return (c.pp * p.dp + c.dp) * p.tp + c.tp; }
inline RankCoord coord_of(const ParallelConfig& p, int rank) {
  return RankCoord{rank % p.tp, (rank / p.tp) % p.dp, rank / (p.tp * p.dp)};
}

// Checks every constraint of the combination and throws Error naming the
// first that fails: positive sizes; ZeRO stage in 0..3; heads, kv heads, FFN
// and padded vocabulary divisible by TP; the layers split over the stages
// (stage_layers.h: by default divisible by PP x VPP);
// global batch divisible by micro-batch x DP; micro-batches a multiple of PP
// for the interleaved schedule; sequence divisible by TP with sequence
// parallelism; with CP > 1, the sequence divisible by 2 x CP (two chunks a
// rank, Megatron-Core's causal load balancing) and flash attention; a
// hybrid shard group dividing DP, under a ZeRO stage.
// `world`, when positive, must equal TP x CP x PP x DP.
void validate(const ModelConfig& m, const ParallelConfig& p, int world = 0);

void to_json(nlohmann::json& j, const ParallelConfig& p);
// The inverse of to_json: the sizes and batches required, every other key
// optional (its default); throws on a value of the wrong type or an unknown
// name.
void from_json(const nlohmann::json& j, ParallelConfig& p);

}  // namespace meshtrain
