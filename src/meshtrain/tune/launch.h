// Plans that launch: a chosen layout written out as something a user runs.
//   train_args      the `meshtrain train` flags of a layout (also what a tune
//                   trial passes to the engine)
//   train_command   one `meshtrain train` line, under `mpirun -np N` when N > 1;
//                   --model and the shape flags where the model differs from it,
//                   --no-zero-prefetch where the spec turns the prefetch off
//   slurm_script    a Slurm batch script: nodes, tasks per node, GPU binding;
//                   flavours "frontier" (srun --gpus-per-task=1
//                   --gpu-bind=closest, 7 cores a task: 56 of 64 usable) and
//                   "dgx" (8 GPUs and 14 cores a task of 112)
//   megatron_args   the same layout as Megatron-LM's pretrain_gpt.py arguments;
//                   ZeRO-1 is --use-distributed-optimizer (Megatron's sharded
//                   optimizer state); ZeRO-2/3 have no Megatron argument and
//                   are refused with an Error naming them. Uneven stages are
//                   --decoder-first/last-pipeline-num-layers (a balanced
//                   partition that divides is the even split), or with the
//                   embedding and the head counted over virtual stages
//                   --account-for-embedding-in-pipeline-split and
//                   --account-for-loss-in-pipeline-split (Megatron-core).
// `emit` dispatches on a kind: train, slurm-frontier, slurm-dgx, megatron.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::tune {

struct LaunchSpec {
  std::string model;            // --model as the user gave it (preset or JSON path; empty: none)
  ModelConfig model_config;     // its shape (Megatron lists every dimension)
  ParallelConfig parallel;
  int num_gpus = 1;
  int devices_per_node = 1;     // tasks per node in a Slurm script
  bool zero_prefetch = true;    // false: train --no-zero-prefetch (ZeRO-3 units gathered at their use)
  std::string exe = "meshtrain";
};

std::vector<std::string> train_args(const ParallelConfig& p, int num_layers);
std::string train_command(const LaunchSpec& s);
std::string slurm_script(const LaunchSpec& s, const std::string& flavour);
std::string megatron_args(const LaunchSpec& s);

// The kinds `emit` takes, for help texts and errors.
const std::vector<std::string>& emit_kinds();
// Throws Error for an unknown kind.
std::string emit(const LaunchSpec& s, const std::string& kind);

std::string shell_quote(const std::string& s);

}  // namespace meshtrain::tune
