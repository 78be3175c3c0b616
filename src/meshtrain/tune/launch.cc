#include "meshtrain/tune/launch.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/parallel/stage_layers.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain::tune {

namespace {

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

// The shape flags of `train` where the model differs from its preset (all
// of them without a preset).
std::vector<std::string> shape_args(const LaunchSpec& s) {
  const ModelConfig& m = s.model_config;
  const ModelConfig preset = s.model.empty() ? ModelConfig{} : load_model_config(s.model);
  std::vector<std::string> a;
  if (!s.model.empty()) a = {"--model", s.model};
  for (const auto& [flag, field] : kShapeFlags)
    if (m.*field != preset.*field && m.*field > 0) a.insert(a.end(), {flag, std::to_string(m.*field)});
  return a;
}

std::string train_line(const LaunchSpec& s) {
  std::vector<std::string> a = {s.exe, "train"};
  for (std::string& x : shape_args(s)) a.push_back(std::move(x));
  for (std::string& x : train_args(s.parallel, s.model_config.num_layers)) a.push_back(std::move(x));
  if (!s.zero_prefetch) {
    check(s.parallel.zero_stage == 3, "--no-zero-prefetch applies to --zero-stage 3 (got {})", s.parallel.zero_stage);
    a.push_back("--no-zero-prefetch");
  }
  return joined(a);
}

struct SlurmFlavour {
  const char* name;
  const char* srun_gpu_flags;
  int cpus_per_task;
};

constexpr SlurmFlavour kFlavours[] = {
    {"frontier", "--gpus-per-task=1 --gpu-bind=closest", 7},
    {"dgx", "--gpus-per-task=1", 14},
};

}  // namespace

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<std::string> train_args(const ParallelConfig& p, int num_layers) {
  std::vector<std::string> a = {"--tensor-model-parallel-size", std::to_string(p.tp),
                                "--pipeline-model-parallel-size", std::to_string(p.pp),
                                "--zero-stage", std::to_string(p.zero_stage),
                                "--micro-batch-size", std::to_string(p.micro_batch_size),
                                "--global-batch-size", std::to_string(p.global_batch_size),
                                "--pipeline-schedule", std::string(schedule_name(p.schedule)),
                                "--recompute-granularity", std::string(recompute_name(p.recompute))};
  if (p.first_stage_layers > 0) a.insert(a.end(), {"--decoder-first-pipeline-num-layers", std::to_string(p.first_stage_layers)});
  if (p.last_stage_layers > 0) a.insert(a.end(), {"--decoder-last-pipeline-num-layers", std::to_string(p.last_stage_layers)});
  if (p.stage_counting != StageCounting::transformer)
    a.insert(a.end(), {"--pipeline-layer-counting", std::string(stage_counting_name(p.stage_counting))});
  if (p.stage_partition != StagePartition::even)
    a.insert(a.end(), {"--pipeline-stage-partition", std::string(stage_partition_name(p.stage_partition))});
  if (p.vpp > 1 && p.uneven_stages()) {
    a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(p.vpp)});
  } else if (p.vpp > 1) {
    a.push_back("--num-layers-per-virtual-pipeline-stage");
    a.push_back(std::to_string(num_layers / (p.pp * p.vpp)));
  }
  if (p.recompute == Recompute::full && p.recompute_method == RecomputeMethod::block) {
    a.insert(a.end(), {"--recompute-method", "block", "--recompute-num-layers", std::to_string(p.recompute_num_layers)});
  }
  if (p.hybrid_shard()) a.insert(a.end(), {"--data-parallel-shard-size", std::to_string(p.zero_shard)});
  if (p.sequence_parallel) a.push_back("--sequence-parallel");
  if (p.bf16) a.push_back("--bf16");
  return a;
}

std::string train_command(const LaunchSpec& s) {
  const std::string line = train_line(s);
  return s.num_gpus > 1 ? fmt::format("mpirun -np {} {}", s.num_gpus, line) : line;
}

std::string slurm_script(const LaunchSpec& s, const std::string& flavour) {
  const SlurmFlavour* f = nullptr;
  for (const SlurmFlavour& x : kFlavours)
    if (flavour == x.name) f = &x;
  check(f != nullptr, "unknown Slurm flavour '{}' (frontier, dgx)", flavour);
  check(s.devices_per_node > 0 && s.num_gpus % s.devices_per_node == 0,
        "{} GPUs do not fill whole nodes of {} GPUs", s.num_gpus, s.devices_per_node);
  const int nodes = s.num_gpus / s.devices_per_node;
  std::string out = "#!/bin/bash\n";
  out += fmt::format("#SBATCH --job-name=meshtrain-{}\n", s.model_config.name);
  out += fmt::format("#SBATCH --nodes={}\n", nodes);
  out += fmt::format("#SBATCH --ntasks-per-node={}\n", s.devices_per_node);
  out += fmt::format("#SBATCH --gpus-per-node={}\n", s.devices_per_node);
  out += "#SBATCH --exclusive\n";
  out += fmt::format("# {} on {} GPUs ({} nodes of {}): {}\n", s.model_config.name, s.num_gpus, nodes,
                     s.devices_per_node, describe(s.parallel));
  out += fmt::format("export OMP_NUM_THREADS={}\n", f->cpus_per_task);
  out += fmt::format("srun --nodes={} --ntasks={} --ntasks-per-node={} --cpus-per-task={} {} \\\n  {}\n", nodes,
                     s.num_gpus, s.devices_per_node, f->cpus_per_task, f->srun_gpu_flags, train_line(s));
  return out;
}

std::string megatron_args(const LaunchSpec& s) {
  const ModelConfig& m = s.model_config;
  const ParallelConfig& p = s.parallel;
  check(p.zero_stage <= 1,
        "ZeRO-{} has no Megatron-LM argument (its distributed optimizer shards the optimizer state: ZeRO-1)",
        p.zero_stage);
  check(!p.hybrid_shard(), "hybrid sharding (data-parallel shard size {} of {}) has no Megatron-LM argument",
        p.zero_shard, p.dp);
  std::vector<std::string> a = {
      "--tensor-model-parallel-size", std::to_string(p.tp), "--pipeline-model-parallel-size", std::to_string(p.pp),
      "--num-layers", std::to_string(m.num_layers), "--hidden-size", std::to_string(m.hidden_size),
      "--num-attention-heads", std::to_string(m.num_attention_heads), "--ffn-hidden-size", std::to_string(m.ffn()),
      "--seq-length", std::to_string(m.seq_length), "--max-position-embeddings", std::to_string(m.max_positions()),
      "--micro-batch-size", std::to_string(p.micro_batch_size), "--global-batch-size",
      std::to_string(p.global_batch_size)};
  if (m.kv_heads() != m.num_attention_heads)
    a.insert(a.end(), {"--group-query-attention", "--num-query-groups", std::to_string(m.kv_heads())});
  if (m.gated_mlp) a.push_back("--swiglu");
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  if (!m.learned_positions) a.insert(a.end(), {"--position-embedding-type", "rope"});
  if (p.stage_counting == StageCounting::embedding_head && p.pp > 1 && p.vpp > 1) {
    // Over virtual stages Megatron-core counts the embedding and the loss as
    // layers itself (stage_layers.h).
    a.insert(a.end(), {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
                       "--num-virtual-stages-per-pipeline-rank", std::to_string(p.vpp)});
  } else if (const std::vector<int> s = stage_layers(m.num_layers, p);
             p.pp > 1 && std::adjacent_find(s.begin(), s.end(), std::not_equal_to<>()) != s.end()) {
    // Megatron-LM names the first and last stages' layers; Megatron-DeepSpeed's
    // embedding-head counting and DeepSpeed's balanced partition are such
    // splits (stage_layers.h). A balanced split that divides is the even one.
    a.insert(a.end(), {"--decoder-first-pipeline-num-layers", std::to_string(s.front()),
                       "--decoder-last-pipeline-num-layers", std::to_string(s.back())});
    if (p.vpp > 1) a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(p.vpp)});
  } else if (p.vpp > 1) {
    a.insert(a.end(), {"--num-layers-per-virtual-pipeline-stage", std::to_string(m.num_layers / (p.pp * p.vpp))});
  }
  if (p.sequence_parallel) a.push_back("--sequence-parallel");
  if (p.recompute == Recompute::selective) a.insert(a.end(), {"--recompute-granularity", "selective"});
  if (p.cp > 1) a.insert(a.end(), {"--context-parallel-size", std::to_string(p.cp)});
  if (p.recompute == Recompute::full) {
    const bool block = p.recompute_method == RecomputeMethod::block;
    a.insert(a.end(), {"--recompute-granularity", "full", "--recompute-method", block ? "block" : "uniform",
                       "--recompute-num-layers", std::to_string(block ? p.recompute_num_layers : 1)});
  }
  if (p.zero_stage == 1) a.push_back("--use-distributed-optimizer");
  if (p.bf16) a.push_back("--bf16");
  if (p.flash_attention) a.push_back("--use-flash-attn");
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool flag_with_value = i + 1 < a.size() && a[i + 1].rfind("--", 0) != 0;
    out += a[i];
    if (flag_with_value) out += " " + a[++i];
    out += i + 1 < a.size() ? " \\\n" : "\n";
  }
  return out;
}

const std::vector<std::string>& emit_kinds() {
  static const std::vector<std::string> k = {"train", "slurm-frontier", "slurm-dgx", "megatron"};
  return k;
}

std::string emit(const LaunchSpec& s, const std::string& kind) {
  check(kind == "megatron" || s.parallel.cp == 1,
        "--emit {}: this project's engine runs no context parallelism (context-parallel-size {}); --emit megatron "
        "prints it",
        kind, s.parallel.cp);
  if (kind == "train") return train_command(s) + "\n";
  if (kind == "slurm-frontier") return slurm_script(s, "frontier");
  if (kind == "slurm-dgx") return slurm_script(s, "dgx");
  if (kind == "megatron") return megatron_args(s);
  throw Error(fmt::format("--emit takes train, slurm-frontier, slurm-dgx or megatron (got '{}')", kind));
}

}  // namespace meshtrain::tune
