// Stage layers: how many transformer layers each pipeline stage, and each of
// its model chunks (virtual stages), runs. A pure
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
//   embedding-head (StageCounting::embedding_head): the embedding and the
//     head count as one layer each and num_layers + 2 items are split evenly
//     over the pp x vpp virtual stages (k = (num_layers + 2) / (pp x vpp)
//     each): virtual stage 0 runs the embedding and k - 1 transformer
//     layers, the last virtual stage k - 1 layers and the head, every other
//     one k. With vpp = 1 this is Megatron-DeepSpeed's --pp-partition-method
//     'type:transformer|embedding' (DeepSpeed PipelineModule's
//     partition_method "type:[regex]": the layers whose class matches are
//     balanced over the stages; BLOOM-176B: 70 layers on 12 stages = 72
//     items, 6 a stage: embedding + 5, 6 x 10, 5 + head). With vpp >= 1 it
//     is Megatron-core's --account-for-embedding-in-pipeline-split together
//     with --account-for-loss-in-pipeline-split, as Llama 3 405B was trained
//     (arXiv 2407.21783, Sec. 3.3.2: 126 layers on 16 stages with 8 chunks,
//     128 items, one per virtual stage: "the first model chunk on the first
//     stage has only the embedding, and the last model chunk on the last
//     stage has only output projection and loss calculation"). A virtual
//     stage may so hold no transformer layer (k = 1); items that do not
//     divide by pp x vpp are refused.
//   balanced (ParallelConfig::stage_partition, vpp = 1): DeepSpeed
//     PipelineModule's partition_balanced over the counted items (the
//     transformer layers, or with embedding-head counting also the
//     embedding and the head), as Megatron-DeepSpeed's --pp-partition-method
//     'type:transformer' or 'type:transformer|embedding' runs it. Its binary
//     search finds the smallest bottleneck, b = ceil(items / pp), and its
//     probe fills the stages in order with b items each, so every stage but
//     the last has b and the last the rest (BLOOM's prototype, 78 layers on
//     12 stages: 7 x 11 and 1, bigscience-workshop/bigscience
//     train/tr11-176B-ml/chronicles-prequel.md, 'Re-do'). Where the items
//     divide, it is the even split. A stage left without a transformer
//     layer is refused (DeepSpeed cannot run one).
// Virtual stages (interleaved schedule, vpp chunks): chunk c of stage s is
// virtual stage v = c x pp + s, and the virtual stages take the layers in
// that order. Under the even split and the first/last counts every stage's
// count must divide by vpp and each of its chunks runs count(s) / vpp layers
// (Megatron-core since uneven stages support interleaving: each stage's
// layers divisible by the virtual pipeline size).
// Every pipeline stage runs at least one transformer layer over its chunks.
#pragma once

#include <vector>

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

// Transformer layers of each virtual stage v = chunk x pp + stage,
// [pp x vpp], summing to num_layers; entries may be 0 (embedding-head
// counting only). Throws Error (one line naming the failed constraint) on a
// split that does not divide.
std::vector<int> virtual_stage_layers(int num_layers, const ParallelConfig& p);

// Transformer layers of each pipeline stage, [pp]: the sums of its chunks'
// virtual_stage_layers(). Throws as virtual_stage_layers().
std::vector<int> stage_layers(int num_layers, const ParallelConfig& p);

// The first transformer layer of virtual stage v, for the counts
// virtual_stage_layers() returns (the layers of the virtual stages before).
int virtual_stage_first_layer(const std::vector<int>& per_virtual_stage, int v);

}  // namespace meshtrain
