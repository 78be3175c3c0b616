// The flags that split a model's layers unevenly over the pipeline stages
// (parallel/stage_layers.h), shared by train, predict and plan:
//   --decoder-first-pipeline-num-layers N   --decoder-last-pipeline-num-layers N
//     (Megatron-LM: the other stages split the rest evenly)
//   --pipeline-layer-counting transformer|embedding-head
//     (embedding-head: Megatron-DeepSpeed's --pp-partition-method
//     'type:transformer|embedding', the embedding and the head counted as
//     layers; over virtual stages too)
//   --pipeline-stage-partition even|balanced
//     (balanced: DeepSpeed's partition_balanced, a remainder on the last stage)
//   --pp-partition-method 'type:transformer' | 'type:transformer|embedding'
//     (Megatron-DeepSpeed's name: balanced, with that counting)
//   --account-for-embedding-in-pipeline-split
//   --account-for-loss-in-pipeline-split
//     (Megatron-core's names for embedding-head counting; the engine counts
//     both or neither, so one alone is refused)
//   --num-virtual-stages-per-pipeline-rank V (train, predict: model chunks per
//     stage; Megatron-LM takes it instead of --num-layers-per-virtual-
//     pipeline-stage when the stages are uneven)
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::cli {

struct StageFlags {
  int first = 0, last = 0;
  std::string counting = "transformer";
  std::string partition = "even";
  std::string pp_partition_method;
  bool account_embedding = false, account_loss = false;
  std::optional<int> virtual_stages;
};

// `virtual_stages`: also add --num-virtual-stages-per-pipeline-rank.
void add_stage_flags(CLI::App* cmd, StageFlags& f, const std::string& group, bool virtual_stages);

// Sets p's stage split, and with --num-virtual-stages-per-pipeline-rank its
// chunks and the interleaved schedule. `layers_per_virtual_stage`: whether
// --num-layers-per-virtual-pipeline-stage was given, which needs even stages.
// Throws Error on an invalid value or combination.
void apply_stage_flags(const StageFlags& f, bool layers_per_virtual_stage, ParallelConfig& p);

}  // namespace meshtrain::cli
