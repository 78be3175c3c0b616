// meshtrain predict: what one configuration costs on a described system,
// without running it (perf/predict.h). Flags are Megatron-LM's; the output
// is a table, or with --json the contract of docs/ARCHITECTURE.md.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "framework_flag.h"
#include "model_flags.h"
#include "stage_flags.h"
#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/error.h"
#include "meshtrain/parallel/stage_layers.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/launch.h"

namespace meshtrain::cli {

namespace {

struct PredictArgs {
  std::string model, system;
  int num_gpus = 0;
  std::optional<int> num_layers, hidden_size, heads, ffn, seq_length, max_positions, vocab_size;
  ArchFlags arch;
  StageFlags stages;
  int micro_batch_size = 1;
  std::optional<int> global_batch_size;
  int tp = 1, pp = 1, cp = 1;
  std::optional<int> layers_per_virtual_stage;
  std::string schedule;
  bool sequence_parallel = false;
  std::string recompute_granularity, recompute_method = "uniform";
  int recompute_num_layers = 1;
  bool bf16 = false;
  int zero_stage = 0;
  int zero_shard = 0;
  bool zero_prefetch = true;  // --no-zero-prefetch: the engine gathering each ZeRO-3 unit at its use
  bool flash = false;
  perf::PerfOptions options;
  std::string framework;
  bool json = false;
  std::string emit;
};

double gib(double b) { return b / 1073741824.0; }

// The model: a preset or file, the shape flags over it.
ModelConfig model_of(const PredictArgs& a) {
  ModelConfig m;
  if (!a.model.empty()) {
    m = load_model_config(a.model);
  } else {
    m.vocab_size = 50257;  // Megatron-LM's GPT-2 BPE tokenizer, when no model file gives one
  }
  if (a.num_layers) m.num_layers = *a.num_layers;
  if (a.hidden_size) m.hidden_size = *a.hidden_size;
  if (a.heads) m.num_attention_heads = *a.heads;
  if (a.ffn) m.ffn_hidden_size = *a.ffn;
  if (a.seq_length) m.seq_length = *a.seq_length;
  if (a.max_positions) m.max_position_embeddings = *a.max_positions;
  if (a.vocab_size) m.vocab_size = *a.vocab_size;
  apply_arch_flags(a.arch, m);
  m.validate();
  return m;
}

// The layout the flags describe; a framework's stage partition where none is
// given, and refused where that framework could not run it.
ParallelConfig layout_of(const PredictArgs& a, const ModelConfig& m, const perf::FrameworkProfile* framework) {
  ParallelConfig p;
  p.tp = a.tp;
  p.pp = a.pp;
  p.cp = a.cp;
  check(a.num_gpus > 0, "num-gpus must be positive (got {})", a.num_gpus);
  check_context_parallel_flag(a.cp, framework);
  // validate() names the constraint when the GPUs do not divide into TP x CP x PP.
  if (a.tp > 0 && a.pp > 0 && a.cp > 0) p.dp = std::max(1, a.num_gpus / (a.tp * a.cp * a.pp));
  apply_stage_flags(a.stages, a.layers_per_virtual_stage.has_value(), p);
  if (a.layers_per_virtual_stage) {
    const int n = *a.layers_per_virtual_stage;
    check(n > 0 && m.num_layers % (a.pp * n) == 0,
          "num-layers {} is not divisible by pipeline-model-parallel-size x num-layers-per-virtual-pipeline-stage = {}",
          m.num_layers, a.pp * n);
    p.vpp = m.num_layers / (a.pp * n);
  }
  p.schedule = !a.schedule.empty() ? parse_schedule(a.schedule)
               : p.vpp > 1          ? ScheduleKind::interleaved
                                    : ScheduleKind::one_f_one_b;
  p.zero_stage = a.zero_stage;
  p.zero_shard = a.zero_shard;  // the whole group (0 or dp) is full sharding
  p.sequence_parallel = a.sequence_parallel;
  p.micro_batch_size = a.micro_batch_size;
  p.global_batch_size = a.global_batch_size.value_or(a.micro_batch_size * p.dp);
  p.recompute = parse_recompute(a.recompute_granularity);
  p.recompute_method = parse_recompute_method(a.recompute_method);
  p.recompute_num_layers = a.recompute_num_layers;
  p.bf16 = a.bf16;
  p.flash_attention = a.flash;
  if (framework) {
    p.stage_partition = perf::partition_under(*framework, p.first_stage_layers, p.last_stage_layers, p.stage_partition);
    const std::string why = perf::unsupported_by(*framework, p, m.num_layers);
    check(why.empty(), "--framework-profile: {}", why);
  }
  return p;
}

nlohmann::json prediction_json(const PredictArgs& a, const ModelConfig& m, const ParallelConfig& p,
                               const perf::SystemSpec& sys, const perf::Prediction& r) {
  nlohmann::json j = r;
  j["config"] = p;
  j["model"] = m;
  j["system"] = sys.name;
  j["num_gpus"] = a.num_gpus;
  j["framework_profile"] = a.framework;
  if (sys.prediction_error > 0) {  // the system's (or the profile's) held-out error
    j["tokens_per_s_interval"] = {r.tokens_per_s * (1 - sys.prediction_error),
                                  r.tokens_per_s * (1 + sys.prediction_error)};
    j["tokens_per_s_interval_basis"] = sys.prediction_error_basis();
  }
  j["meshtrain_commit"] = build_commit();
  return j;
}

void print_prediction(const PredictArgs& a, const ModelConfig& m, const ParallelConfig& p,
                      const perf::SystemSpec& sys, const perf::FrameworkProfile* framework,
                      const perf::Prediction& r) {
  const auto& b = r.memory;
  const auto& t = r.time;
  fmt::print(
      "{} on {} x {} ({}): tp={} cp={} pp={} vpp={} dp={}{} zero={} mbs={} gbs={} micro-batches={} "
      "recompute={} sp={} flash={} {}\n",
      m.name, a.num_gpus, sys.name, schedule_name(p.schedule), p.tp, p.cp, p.pp, p.vpp, p.dp,
      p.hybrid_shard() ? fmt::format(" (shard {} x replicate {})", p.shard_size(), p.shard_replicas()) : "",
      p.zero_stage, p.micro_batch_size, p.global_batch_size, p.num_micro_batches(), recompute_name(p.recompute),
      p.sequence_parallel ? "on" : "off", p.flash_attention ? "on" : "off", p.bf16 ? "bf16" : "fp32");
  print_framework(framework);
  if (p.uneven_stages()) fmt::print("layers per pipeline stage: {}\n", fmt::join(stage_layers(m.num_layers, p), " "));
  if (p.uneven_stages() && p.vpp > 1)
    fmt::print("layers per virtual stage (chunk x pp + stage): {}\n",
               fmt::join(virtual_stage_layers(m.num_layers, p), " "));
  fmt::print("\nmemory per GPU (stage {}, GiB)   {}\n", r.memory_stage,
             r.fits    ? "fits"
             : r.tight ? fmt::format("TIGHT: over {:.1f} GiB by less than this model's memory error ({:.0f}%): may fit",
                                     gib(r.memory_capacity), 100 * perf::kMemoryOverPrediction)
                       : fmt::format("DOES NOT FIT in {:.1f} GiB", gib(r.memory_capacity)));
  fmt::print("  parameters {:9.2f}\n  gradients  {:9.2f}\n  optimizer  {:9.2f}\n  activations{:9.2f}\n"
             "  comm bufs  {:9.2f}\n  workspace  {:9.2f}\n  total      {:9.2f} of {:.1f}\n",
             gib(b.parameters), gib(b.gradients), gib(b.optimizer), gib(b.activations), gib(b.comm_buffers),
             gib(b.workspace), gib(b.total()), gib(r.memory_capacity));
  if (framework && framework->options.allocator_retries)
    fmt::print("  live       {:9.2f} (what must fit: PyTorch's caching allocator frees its cache and retries)\n",
               gib(b.required()));
  auto pct = [&](double x) { return 100 * x / r.step_time_s; };
  fmt::print("\nstep time {:.4g} s (critical stage {})\n", r.step_time_s, r.critical_stage);
  fmt::print("  compute    {:10.4g} s {:5.1f}%\n  tp comm    {:10.4g} s {:5.1f}%\n  pp comm    {:10.4g} s {:5.1f}%\n"
             "  dp comm    {:10.4g} s {:5.1f}%\n  bubble     {:10.4g} s {:5.1f}%\n  optimizer  {:10.4g} s {:5.1f}%\n",
             t.compute, pct(t.compute), t.tp_comm, pct(t.tp_comm), t.pp_comm, pct(t.pp_comm), t.dp_comm,
             pct(t.dp_comm), t.bubble, pct(t.bubble), t.optimizer, pct(t.optimizer));
  if (p.cp > 1) fmt::print("  cp comm    {:10.4g} s {:5.1f}%\n", t.cp_comm, pct(t.cp_comm));
  fmt::print("\nthroughput {:.4g} tokens/s ({:.4g} tokens/step)\n", r.tokens_per_s, r.tokens_per_step);
  if (sys.prediction_error > 0)
    fmt::print("  interval {:.4g} - {:.4g} tokens/s (+-{:.0f}%: {})\n", r.tokens_per_s * (1 - sys.prediction_error),
               r.tokens_per_s * (1 + sys.prediction_error), 100 * sys.prediction_error, sys.prediction_error_basis());
  fmt::print("  model TFLOP/s per GPU    {:.4g}  (MFU {:.1f}%)\n", r.model_tflops_per_gpu, 100 * r.mfu);
  fmt::print("  hardware TFLOP/s per GPU {:.4g}  (HFU {:.1f}%)\n", r.hardware_tflops_per_gpu, 100 * r.hfu);
  fmt::print("  pipeline bubble          {:.1f}%\n", 100 * r.bubble_fraction);
  fmt::print("\ncommunication per GPU per step: tp {:.3g} GB, pp {:.3g} GB, dp {:.3g} GB{}\n", r.comm_bytes.tp / 1e9,
             r.comm_bytes.pp / 1e9, r.comm_bytes.dp / 1e9,
             p.cp > 1 ? fmt::format(", cp {:.3g} GB", r.comm_bytes.cp / 1e9) : std::string());
}

int run_predict(const PredictArgs& a) {
  const ModelConfig m = model_of(a);
  perf::SystemSpec sys = perf::load_system_spec(a.system);
  perf::PerfOptions options = a.options;
  const perf::FrameworkProfile* framework = apply_framework_flag(a.framework, options, sys);
  const ParallelConfig p = layout_of(a, m, framework);
  if (!a.zero_prefetch) {
    check(!framework, "--no-zero-prefetch describes this engine; --framework-profile {} runs its own ZeRO runtime",
          a.framework);
    check(p.zero_stage == 3, "--no-zero-prefetch applies to --zero-stage 3 (got {})", p.zero_stage);
    options.zero.prefetch_units = 0;
    options.zero.gather_at_use = true;
  }
  const perf::Prediction r = perf::predict(m, p, sys, a.num_gpus, options);
  if (!a.emit.empty())
    std::cout << tune::emit({a.model, m, p, a.num_gpus, sys.devices_per_node, a.zero_prefetch}, a.emit);
  else if (a.json)
    std::cout << prediction_json(a, m, p, sys, r).dump(2) << "\n";
  else
    print_prediction(a, m, p, sys, framework, r);
  return 0;
}

}  // namespace

void add_predict_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<PredictArgs>();
  CLI::App* c = app.add_subcommand("predict", "Predict memory, step time and throughput of one configuration");
  c->add_option("--model", a->model, "Model preset (configs/models) or JSON file; shape flags override it");
  c->add_option("--system", a->system, "System name (configs/systems) or JSON file")->required();
  c->add_option("--num-gpus", a->num_gpus, "Number of GPUs (ranks)")->required();
  c->add_option("--num-layers", a->num_layers);
  c->add_option("--hidden-size", a->hidden_size);
  c->add_option("--num-attention-heads", a->heads);
  c->add_option("--ffn-hidden-size", a->ffn);
  c->add_option("--seq-length", a->seq_length);
  c->add_option("--max-position-embeddings", a->max_positions);
  c->add_option("--vocab-size", a->vocab_size, "Default: the model file's, else 50257 (GPT-2 BPE)");
  add_arch_flags(c, a->arch, "Architecture (overrides --model)");
  c->add_option("--micro-batch-size", a->micro_batch_size);
  c->add_option("--global-batch-size", a->global_batch_size, "Default: micro-batch-size x data-parallel size");
  c->add_option("--tensor-model-parallel-size", a->tp);
  c->add_option("--pipeline-model-parallel-size", a->pp);
  c->add_option("--context-parallel-size", a->cp,
                "Ranks each sequence is split over (Megatron-Core's; priced under a framework profile that has it)");
  c->add_option("--num-layers-per-virtual-pipeline-stage", a->layers_per_virtual_stage,
                "Layers per model chunk (interleaved 1F1B)");
  add_stage_flags(c, a->stages, "Uneven pipeline stages", true);
  c->add_option("--pipeline-schedule", a->schedule, "gpipe, 1f1b or interleaved (default from the chunks)");
  c->add_flag("--sequence-parallel", a->sequence_parallel);
  c->add_option("--recompute-granularity", a->recompute_granularity, "full or selective (default none)");
  c->add_option("--recompute-method", a->recompute_method, "uniform or block");
  c->add_option("--recompute-num-layers", a->recompute_num_layers);
  c->add_flag("--bf16", a->bf16, "Mixed precision (bf16 weights and activations)");
  c->add_option("--zero-stage", a->zero_stage, "0, 1, 2 or 3");
  c->add_option("--data-parallel-shard-size", a->zero_shard,
                "Hybrid sharding: ZeRO state sharded over groups of N data-parallel ranks, replicated across the "
                "groups (as this engine, FSDP's HYBRID_SHARD and torchtitan's dp_shard run it; default: the whole "
                "data-parallel group)");
  c->add_flag("--use-flash-attn", a->flash);
  c->add_flag("--no-zero-prefetch{false}", a->zero_prefetch,
              "ZeRO-3 as train --no-zero-prefetch runs it: each unit gathered at its use (nothing hidden, one unit "
              "less memory)");
  c->add_flag("--overlap-grad-reduce", a->options.overlap_grad_reduce);
  c->add_flag("--overlap-param-gather", a->options.overlap_param_gather);
  c->add_flag("--tp-comm-overlap", a->options.tp_comm_overlap);
  c->add_flag("--overlap-p2p-comm", a->options.overlap_p2p_comm);
  add_framework_flag(c, a->framework);
  c->add_flag("--json", a->json, "One JSON object (contract: docs/ARCHITECTURE.md)");
  c->add_option("--emit", a->emit, "Print the layout as: train, slurm-frontier, slurm-dgx or megatron");
  // Errors (meshtrain::Error) reach main, which prints them on one line.
  c->callback([a, &run] { run = [a] { return run_predict(*a); }; });
}

}  // namespace meshtrain::cli
