// SearchSpace: the values each knob of a parallel configuration may take in
// a plan. An empty list means "every value the planner considers":
//   tp:          divisors of the GPU count up to the devices of one node
//   pp:          divisors of the layer count (with tp x pp dividing the GPUs)
//   vpp:         1 (1F1B) and every divisor > 1 of the layers per stage
//                (interleaved 1F1B)
//   zero_stage:  0, 1, 2, 3
//   micro-batch: powers of two up to 16 that divide global batch / dp
//   recompute:   none, selective, full (every block); with
//                partial_recompute, also full recompute of only the first k
//                blocks of each chunk (Megatron's block method), k the
//                smallest that fits (found by the planner)
//   sequence_parallel: off, and on where tp > 1 (a fixed list applies where
//                      tp > 1; tp = 1 is always without)
//   flash_attention:   on, off
// DP is what remains: GPUs / (tp x pp). Every combination is listed;
// validate() decides which are valid.
#pragma once

#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::tune {

struct SearchSpace {
  std::vector<int> tp, pp, vpp, zero_stage, micro_batch_size;
  std::vector<Recompute> recompute;
  std::vector<bool> sequence_parallel, flash_attention;
  bool bf16 = true;
  bool partial_recompute = true;
};

// Every combination (valid or not) for `num_gpus` ranks and a global batch,
// with at most `max_tp` as the default tensor-parallel sizes.
std::vector<ParallelConfig> enumerate(const ModelConfig& m, const SearchSpace& space, int num_gpus,
                                      int global_batch_size, int max_tp);

}  // namespace meshtrain::tune
