// Stage layers: how many transformer layers each pipeline stage runs. A pure
// function of the layer count and the parallel config, read by Layout (which
// places the blocks, so the engine and the performance model both follow it)
// and by validate(), which refuses any split that does not divide.
//
// Three ways, as the frameworks the model describes split a model:
//   even (default): num_layers / pp per stage (Megatron-LM).
//   first / last (ParallelConfig::first_stage_layers, last_stage_layers):
//     Megatron-LM's --decoder-first-pipeline-num-layers and
//     --decoder-last-pipeline-num-layers: the named stages get that many,
//     the other stages split the rest evenly; a remainder that does not
//     divide is refused (Megatron-core asserts the same). With pp = 2 and
//     both given they must add up to num_layers.
//   embedding-head (StageCounting::embedding_head): Megatron-DeepSpeed with
//     --pp-partition-method 'type:transformer|embedding' (DeepSpeed
//     PipelineModule's partition_method "type:[regex]": the layers whose
//     class matches are balanced over the stages): the embedding and the
//     head count as one layer each, num_layers + 2 items split evenly, so
//     the first and the last stage run one transformer layer fewer than the
//     others (BLOOM-176B: 70 layers on 12 stages = 72 items, 6 a stage:
//     embedding + 5, 6 x 10, 5 + head). Items that do not divide by pp are
//     refused: DeepSpeed's balanced partition of a remainder is not modelled.
// Virtual stages (interleaved schedule, vpp chunks): every stage's count
// must divide by vpp and chunk c of stage s runs count(s) / vpp layers, the
// virtual stages c x pp + s taking the layers in that order (Megatron-core
// since uneven stages support interleaving: each stage's layers divisible
// by the virtual pipeline size). Embedding-head counting with vpp > 1 is
// refused (Megatron-DeepSpeed's pipeline has no interleaved schedule).
// Every stage runs at least one transformer layer.
#pragma once

#include <vector>

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

// Transformer layers of each pipeline stage, [pp], summing to num_layers.
// Throws Error (one line naming the failed constraint) on a split that does
// not divide.
std::vector<int> stage_layers(int num_layers, const ParallelConfig& p);

// The first transformer layer of virtual stage v = chunk x pp + stage, for
// the counts stage_layers() returns.
int virtual_stage_first_layer(const std::vector<int>& per_stage, int vpp, int v);

}  // namespace meshtrain
