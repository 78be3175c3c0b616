// SearchSpace: the values each knob of a parallel configuration may take in
// a plan. An empty list means "every value the planner considers":
//   tp:          divisors of the GPU count up to the devices of one node
//   pp:          divisors of the layer count (with tp x cp x pp dividing the
//                GPUs)
//   cp:          1 (the engine has no context parallelism); under a
//                framework that has it (restrict_to_framework), also the
//                powers of two up to 32 that leave each rank at least 1,024
//                tokens of a sequence in two equal chunks
//   vpp:         1 (1F1B) and every divisor > 1 of the layers per stage
//                (interleaved 1F1B); with the embedding and the head
//                counted as layers, every v > 1 with pp x v dividing the
//                layers + 2 (stage_layers.h)
//   zero_stage:  0, 1, 2, 3
//   zero_shard:  DP ranks per ZeRO shard group, 0 the whole DP group (a size
//                that does not divide DP leaves its candidates invalid);
//                empty: the whole group, and with hybrid_shard (plan
//                --hybrid-shard; set by restrict_to_framework under a
//                framework that has it) also groups of one node and of every
//                power of two of nodes below the whole group (ZeRO stages
//                1-3 only; groups of two DP ranks or more)
//   micro-batch: powers of two up to 16 that divide global batch / dp
//   recompute:   none, selective, full (every block); with
//                partial_recompute, also full recompute of only the first k
//                blocks of each chunk (Megatron's block method), k the
//                smallest that fits (found by the planner); with
//                recompute_num_layers, full recompute is that k instead
//   sequence_parallel: off, and on where tp > 1 (a fixed list applies where
//                      tp > 1; tp = 1 is always without)
//   flash_attention:   on, off
//   stage split (parallel/stage_layers.h): as given (first_stage_layers,
//                last_stage_layers, stage_counting, stage_partition;
//                default even) on every
//                candidate; with search_stage_splits, every pp > 1 also
//                with the embedding and the head counted as layers
//                (Megatron-DeepSpeed; the same stages as Megatron-LM's
//                first = last = (layers + 2) / pp - 1). Where the split is
//                not even, pp takes every value up to the layer count.
// DP is what remains: GPUs / (tp x cp x pp). Every combination is listed;
// validate() decides which are valid.
#pragma once

#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/framework_profile.h"

namespace meshtrain::tune {

struct SearchSpace {
  std::vector<int> tp, pp, cp, vpp, zero_stage, zero_shard, micro_batch_size;
  // The data-parallel size where it is known but not the split of the rest
  // into TP, CP and PP (a table that prints the model-parallel size alone);
  // 0: any.
  int data_parallel = 0;
  bool hybrid_shard = false;
  std::vector<Recompute> recompute;
  std::vector<bool> sequence_parallel, flash_attention;
  bool bf16 = true;
  bool partial_recompute = true;
  // Full recompute of only the first k blocks of each chunk (Megatron's
  // block method) where k is given, e.g. published with the run; 0: every
  // block, and the planner's own k where partial_recompute.
  int recompute_num_layers = 0;
  int first_stage_layers = 0, last_stage_layers = 0;
  StageCounting stage_counting = StageCounting::transformer;
  StagePartition stage_partition = StagePartition::even;
  bool search_stage_splits = false;
  // Also keep candidates over the capacity by less than the memory model's
  // error (perf::MemoryEstimate::tight): for a run known to have run, whose
  // layout nothing the model says fits can describe.
  bool admit_tight = false;
  // Candidates this framework cannot run are dropped, with its reason
  // (perf::unsupported_by); nullptr: every valid candidate is kept.
  const perf::FrameworkProfile* framework = nullptr;
  bool uneven_stages() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || stage_counting != StageCounting::transformer ||
           stage_partition != StagePartition::even || search_stage_splits;
  }
};

// Narrows the knobs `space` leaves open to what framework `f` can run
// (perf/framework_profile.h), and takes its stage partition where the
// space has the default one (even, no first/last counts). Knobs fixed in `space` are kept: the planner
// drops candidates the framework cannot run (SearchSpace::framework).
void restrict_to_framework(const perf::FrameworkProfile& f, SearchSpace& space, const ModelConfig& m);

// Every combination (valid or not) for `num_gpus` ranks and a global batch,
// with at most `max_tp` (the devices of a node) as the default tensor-parallel
// sizes and the node hybrid shard groups are counted in.
std::vector<ParallelConfig> enumerate(const ModelConfig& m, const SearchSpace& space, int num_gpus,
                                      int global_batch_size, int max_tp);

}  // namespace meshtrain::tune
