// Context parallelism (CP) as the performance model prices it.
//
// cost_view(m, p) returns the model and layout the memory and time models
// price for a layout with CP > 1, and returns them unchanged for CP 1. In
// the view:
//   - seq_length is the tokens one CP rank holds of each sequence (seq /
//     cp), so everything priced per token (matmuls, norms, activations,
//     pipeline sends, the loss, TP collectives) is one rank's share;
//   - dp counts the CP ranks (dp x cp): they hold the same weights and
//     reduce gradients and shard ZeRO state together, next to each other in
//     the rank order (TP, CP, DP, PP), as Megatron-Core's data-parallel group
//     "with CP" does (a hybrid shard group spans its DP ranks' CP ranks too,
//     torchtitan's dp_shard x cp mesh); the global batch is cp times the
//     layout's, so that each rank runs the layout's micro-batches per step;
//   - cp stays: attention runs over the keys of the whole sequence
//     (seq_length x cp, causal, two chunks a rank so that every rank does the
//     same share), and a block's K and V go round the CP ring
//     (time_model.cc: Pricer::kv_exchange; Llama 3's all-gather instead
//     under PerfOptions::cp_all_gather).
// Rates (tokens and FLOPs per step) come from the layout itself. Apply the
// view once, at the memory and time models' entry points.
#pragma once

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::perf {

struct CostView {
  ModelConfig model;
  ParallelConfig parallel;
};

CostView cost_view(const ModelConfig& m, const ParallelConfig& p);

// One CP rank's K and V of one block for one micro-batch, in a cost view:
// what each step of the ring passes on.
double kv_chunk_bytes(const ModelConfig& view_m, const ParallelConfig& view_p);

}  // namespace meshtrain::perf
