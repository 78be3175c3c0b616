// meshtrain train: one training run under MPI (mpirun -np N meshtrain train
// ..., or srun). Flags carry Megatron-LM's names; --zero-stage is
// DeepSpeed's. Every rank validates the whole configuration, the output paths
// and the node's memory before any large allocation; the first failing rank
// prints the one-line error and all exit non-zero (agreed.h).
#include <mpi.h>

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "agreed.h"
#include "commands.h"
#include "json_file.h"
#include "model_flags.h"
#include "stage_flags.h"
#include "meshtrain/comm/abort.h"
#include "meshtrain/comm/agreed_error.h"
#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/backends.h"
#include "meshtrain/core/device.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/train/memory_check.h"
#include "meshtrain/train/option_ranges.h"
#include "meshtrain/train/trainer.h"

namespace meshtrain::cli {

namespace {

struct TrainFlags {
  std::string model = "tiny";
  std::optional<int> num_layers, hidden_size, heads, ffn, seq, positions, vocab;
  ArchFlags arch;
  StageFlags stages;
  int tp = 1, pp = 1, zero = 0, zero_shard = 0, mbs = 1, recompute_layers = 1;
  std::optional<int> gbs, layers_per_virtual_stage;
  std::string schedule = "1f1b", recompute = "none", recompute_method = "uniform";
  bool sp = false, bf16 = false, no_memory_check = false;
  std::string peak_from;
  std::string device = "cpu";
  TrainOptions o;
};

// --device: the CPU engine, or the GPU backend where it is compiled. The
// training step itself does not run on a GPU yet: the CUDA kernels are built
// and checked against the CPU kernels (test_gpu), the engine's device path is
// not written, so `cuda` is refused with the reason.
void check_device(const std::string& name) {
  const std::optional<Device> d = parse_device(name);
  check(d.has_value(), "--device {}: expected cpu or cuda", name);
  check(*d == Device::cpu || cuda_compiled(),
        "--device cuda: this build has no CUDA backend (compiled: {}); configure with a CUDA toolkit", compiled_backends());
  check(*d == Device::cpu,
        "--device cuda: the training step does not run on a GPU yet (only the CUDA kernels are built: test_gpu)");
}

// Ranks on this node, from the launcher's environment (1 if unknown).
int ranks_on_node() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local) local = std::getenv("SLURM_NTASKS_PER_NODE");
  return local ? std::max(1, std::atoi(local)) : 1;
}

// Ranks sharing a node share its cores: unless OMP_NUM_THREADS says
// otherwise, each rank gets cores / ranks-on-this-node threads (spinning
// OpenMP threads on oversubscribed cores are far slower than fewer threads).
void set_threads_per_rank() {
  if (std::getenv("OMP_NUM_THREADS")) return;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  omp_set_num_threads(std::max(1, cores / ranks_on_node()));
}

// --peak-from: a rank's peak from `meshtrain bench gemm --out FILE` run on
// this machine: the square-matmul peak per OpenMP thread of the run's dtype
// times the cores this rank has, its threads but at most its share of the
// node's cores (8 ranks on 2 cores have a quarter core each).
double peak_from_bench(const std::string& path, bool bf16) {
  const nlohmann::json j = read_json_arg("--peak-from", path);
  const char* dt = bf16 ? "bf16" : "fp32";
  const nlohmann::json* bench = j.is_object() && j.contains("bench") ? &j["bench"] : nullptr;
  check(bench && *bench == "gemm" && j.contains("peak") && j["peak"].is_object(),
        "--peak-from {}: not the output of meshtrain bench gemm", path);
  check(j["peak"].contains(dt), "--peak-from {}: no {} peak in the file (bench gemm --dtypes {})", path, dt, dt);
  const nlohmann::json& peak = j["peak"][dt];
  const nlohmann::json* v = peak.is_object() && peak.contains("tflops_per_thread") ? &peak["tflops_per_thread"] : nullptr;
  check(v && v->is_number(), "--peak-from {}: peak.{}.tflops_per_thread is not a number", path, dt);
  const double per_thread = v->get<double>();
  check(std::isfinite(per_thread) && per_thread > 0, "--peak-from {}: the {} peak is not positive", path, dt);
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double share = std::min<double>(omp_get_max_threads(), cores / ranks_on_node());
  return per_thread * share;
}

TrainOptions resolve(const TrainFlags& f, int world) {
  TrainOptions o = f.o;
  o.model = load_model_config(f.model);
  auto set = [](const std::optional<int>& v, int& dst) {
    if (v) dst = *v;
  };
  set(f.num_layers, o.model.num_layers);
  set(f.hidden_size, o.model.hidden_size);
  set(f.heads, o.model.num_attention_heads);
  set(f.ffn, o.model.ffn_hidden_size);
  set(f.seq, o.model.seq_length);
  set(f.positions, o.model.max_position_embeddings);
  set(f.vocab, o.model.vocab_size);
  apply_arch_flags(f.arch, o.model);
  ParallelConfig& p = o.parallel;
  p.tp = f.tp;
  p.pp = f.pp;
  check(f.tp > 0 && f.pp > 0, "tensor- and pipeline-model-parallel sizes must be positive");
  check(world % (f.tp * f.pp) == 0,
        "world size {} is not divisible by tensor-model-parallel-size x pipeline-model-parallel-size = {}", world,
        f.tp * f.pp);
  p.dp = world / (f.tp * f.pp);
  p.zero_stage = f.zero;
  p.zero_shard = f.zero_shard;  // validate() checks that it divides DP
  p.sequence_parallel = f.sp;
  p.micro_batch_size = f.mbs;
  check(f.gbs || int64_t{f.mbs} * p.dp <= INT32_MAX, "micro-batch-size {} x {} data-parallel ranks exceeds {}", f.mbs,
        p.dp, INT32_MAX);
  p.global_batch_size = f.gbs ? *f.gbs : f.mbs * p.dp;
  p.schedule = parse_schedule(f.schedule);
  apply_stage_flags(f.stages, f.layers_per_virtual_stage.has_value(), p);
  if (f.layers_per_virtual_stage) {
    check(o.model.num_layers > 0 && o.model.num_layers % f.pp == 0,
          "num-layers {} is not divisible by pipeline-model-parallel-size {}", o.model.num_layers, f.pp);
    const int per_stage = o.model.num_layers / f.pp;
    check(*f.layers_per_virtual_stage > 0 && per_stage % *f.layers_per_virtual_stage == 0,
          "num-layers-per-virtual-pipeline-stage {} does not divide the {} layers of each of {} stages",
          *f.layers_per_virtual_stage, per_stage, f.pp);
    p.vpp = per_stage / *f.layers_per_virtual_stage;
    p.schedule = ScheduleKind::interleaved;
  }
  p.recompute = parse_recompute(f.recompute);
  p.recompute_method = parse_recompute_method(f.recompute_method);
  p.recompute_num_layers = f.recompute_layers;
  p.bf16 = f.bf16;
  check_device(f.device);
  if (o.lr.decay_iters == 0) o.lr.decay_iters = o.train_iters;
  if (o.model.max_position_embeddings == 0) o.model.max_position_embeddings = o.model.seq_length;
  if (!f.peak_from.empty()) {
    check(o.peak_tflops == 0, "--peak-tflops and --peak-from exclude each other");
    o.peak_tflops = peak_from_bench(f.peak_from, p.bf16);
  }
  return o;
}

int run_train(const TrainFlags& f) {
  set_threads_per_rank();
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  TrainOptions o;
  // The configuration, the data, the output paths (rank 0 writes them: a bad
  // one fails now, not after training), then memory: before any allocation.
  const bool ok = agreed("train", [&] {
    o = resolve(f, world);
    check_options(o, world);
    check_option_ranges(o);
    if (rank == 0)
      for (auto [path, what] : {std::pair{&o.report_path, "run report"}, {&o.trace_path, "trace"},
                                {&o.dump_weights_path, "weights"}})
        OutputFile::open(*path, what);
  }) && (f.no_memory_check || agreed("train", [&] { check_node_memory(o); }));
  if (!ok) {
    MPI_Finalize();
    return 2;
  }
  const int rc = run_or_abort([&] {
    ProcessMesh mesh(o.parallel);
    if (rank == 0 && !o.quiet) std::printf("%s\n", mesh.describe().c_str());
    try {
      train(o, mesh);
    } catch (const AgreedError& e) {
      // Every rank reached it together (a bad checkpoint, non-finite values).
      if (rank == 0) std::fprintf(stderr, "meshtrain train: error: %s\n", e.what());
      return 3;
    }
    return 0;
  });
  MPI_Finalize();
  return rc;
}

}  // namespace

void add_train_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("train", "Train a GPT or Llama model (launch with mpirun -np N or srun for N ranks)");
  auto f = std::make_shared<TrainFlags>();
  TrainOptions& o = f->o;
  cmd->add_option("--model", f->model, "Model preset (configs/models/NAME.json) or a JSON file")
      ->capture_default_str();
  auto* g = "Model shape (overrides --model)";
  cmd->add_option("--num-layers", f->num_layers, "Transformer layers")->group(g);
  cmd->add_option("--hidden-size", f->hidden_size, "Hidden size")->group(g);
  cmd->add_option("--num-attention-heads", f->heads, "Attention heads")->group(g);
  cmd->add_option("--ffn-hidden-size", f->ffn, "MLP hidden size (default 4 x hidden)")->group(g);
  cmd->add_option("--seq-length", f->seq, "Sequence length")->group(g);
  cmd->add_option("--max-position-embeddings", f->positions, "Position table size")->group(g);
  cmd->add_option("--vocab-size", f->vocab, "Vocabulary size (padded to a multiple of 128)")->group(g);
  add_arch_flags(cmd, f->arch, g);
  g = "Parallelism";
  cmd->add_option("--tensor-model-parallel-size", f->tp, "TP ranks")->capture_default_str()->group(g);
  cmd->add_option("--pipeline-model-parallel-size", f->pp, "PP stages")->capture_default_str()->group(g);
  cmd->add_option("--num-layers-per-virtual-pipeline-stage", f->layers_per_virtual_stage,
                  "Layers per model chunk; implies the interleaved schedule")->group(g);
  add_stage_flags(cmd, f->stages, g, true);
  cmd->add_option("--pipeline-schedule", f->schedule, "gpipe, 1f1b or interleaved")->capture_default_str()->group(g);
  cmd->add_flag("--sequence-parallel", f->sp, "Shard LayerNorm/residual regions along the sequence")->group(g);
  cmd->add_option("--zero-stage", f->zero, "ZeRO stage 0-3 over the data-parallel group")
      ->capture_default_str()->group(g);
  cmd->add_option("--data-parallel-shard-size", f->zero_shard,
                  "Hybrid sharding: ZeRO state sharded over groups of N consecutive data-parallel ranks and "
                  "replicated across the groups (ZeRO stage 1-3; default: the whole group)")
      ->group(g);
  cmd->add_flag("--no-zero-prefetch{false}", o.zero_prefetch,
                "ZeRO-3: gather each unit's weights when it is needed instead of one unit ahead while the one "
                "before it computes (one unit's weights less memory, no overlap)")
      ->group(g);
  cmd->add_option("--recompute-granularity", f->recompute, "none, selective or full")->capture_default_str()->group(g);
  cmd->add_option("--recompute-method", f->recompute_method, "uniform or block (full recompute)")
      ->capture_default_str()->group(g);
  cmd->add_option("--recompute-num-layers", f->recompute_layers, "Layers per chunk recomputed (block method)")
      ->capture_default_str()->group(g);
  g = "Batch and precision";
  cmd->add_option("--micro-batch-size", f->mbs, "Sequences per micro-batch")->capture_default_str()->group(g);
  cmd->add_option("--global-batch-size", f->gbs, "Sequences per step over all DP ranks (default micro x DP)")
      ->group(g);
  cmd->add_flag("--bf16", f->bf16, "bf16 weights/activations/matmuls, fp32 master weights, grads and Adam")
      ->group(g);
  cmd->add_option("--device", f->device, "cpu or cuda (cuda: only where the CUDA backend is compiled)")
      ->capture_default_str()->group(g);
  g = "Optimizer";
  cmd->add_option("--lr", o.lr.lr, "Peak learning rate")->capture_default_str()->group(g);
  cmd->add_option("--min-lr", o.lr.min_lr, "Learning rate at the end of the cosine decay")
      ->capture_default_str()->group(g);
  cmd->add_option("--lr-warmup-iters", o.lr.warmup, "Linear warmup iterations")->capture_default_str()->group(g);
  cmd->add_option("--lr-decay-iters", o.lr.decay_iters, "Cosine decay length (default train-iters)")->group(g);
  cmd->add_option("--weight-decay", o.adam.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str()->group(g);
  cmd->add_option("--adam-beta1", o.adam.beta1)->capture_default_str()->group(g);
  cmd->add_option("--adam-beta2", o.adam.beta2)->capture_default_str()->group(g);
  cmd->add_option("--adam-eps", o.adam.eps)->capture_default_str()->group(g);
  cmd->add_option("--clip-grad", o.clip_grad, "Global gradient-norm clip (0: off)")->capture_default_str()->group(g);
  g = "Run";
  o.lr.decay_iters = 0;
  cmd->add_option("--train-iters", o.train_iters, "Optimizer steps")->capture_default_str()->group(g);
  cmd->add_option("--seed", o.seed, "Seed of initialisation and data order")
      ->check(CLI::NonNegativeNumber)->capture_default_str()->group(g);
  cmd->add_option("--data-path", o.data_path,
                  "Folder with train.bin/val.bin (meshtrain prepare-data), a token file, a glob of llm.c shards or a "
                  "Megatron .bin/.idx prefix")
      ->group(g);
  cmd->add_flag("--mock-data", o.mock_data, "Deterministic pseudo-random tokens instead of a file")->group(g);
  cmd->add_option("--eval-interval", o.eval_interval, "Evaluate every N iterations (0: at the end only)")
      ->capture_default_str()->group(g);
  cmd->add_option("--eval-iters", o.eval_iters, "Validation batches per evaluation")->capture_default_str()->group(g);
  cmd->add_option("--log-interval", o.log_interval, "Print every N iterations")->capture_default_str()->group(g);
  cmd->add_flag("--quiet", o.quiet, "No per-iteration output")->group(g);
  const std::map<std::string, LiveOutput> progress{
      {"auto", LiveOutput::automatic}, {"on", LiveOutput::on}, {"off", LiveOutput::off}};
  cmd->add_option("--progress", o.progress,
                  "Progress bar and ETA: auto (only on a terminal, never under a launcher), on, off")
      ->transform(CLI::CheckedTransformer(progress))->default_str("auto")->group(g);
  cmd->add_option("--log-file", o.log_file, "Append per-interval metrics as JSON lines here (flushed each interval)")
      ->group(g);
  cmd->add_option("--skip-nonfinite", o.skip_nonfinite,
                  "Skip up to N steps with a non-finite loss or gradient norm (no update) before stopping")
      ->capture_default_str()->group(g);
  g = "Checkpoints";
  cmd->add_option("--save", o.save_dir, "Write checkpoints into this folder")->group(g);
  cmd->add_option("--save-interval", o.save_interval, "Save every N iterations (and at the end)")->group(g);
  cmd->add_option("--load", o.load_dir, "Resume from this folder's latest checkpoint (any layout)")->group(g);
  cmd->add_option("--exit-interval", o.exit_interval, "Stop after iteration N (saving first with --save)")->group(g);
  cmd->add_option("--exit-duration-in-mins", o.exit_duration_mins, "Stop (saving first) after M minutes")->group(g);
  cmd->add_flag("--exit-signal-handler", o.exit_signal_handler,
                "On SIGTERM: finish the step, save, exit 0")->group(g);
  cmd->add_option("--keep-last", o.keep_last, "Keep only the K newest checkpoints (0: all)")->group(g);
  cmd->add_flag("--async-save", o.async_save, "Write checkpoints from a background thread after a memory snapshot")
      ->group(g);
  g = "Measurement";
  cmd->add_option("--report", o.report_path, "Write the run report (JSON) here")->group(g);
  cmd->add_option("--trace", o.trace_path, "Write a Chrome trace (Perfetto) here")->group(g);
  cmd->add_option("--dump-weights", o.dump_weights_path, "Write the trained weights (fp32, serial order) here")
      ->group(g);
  cmd->add_option("--sample-tokens", o.sample_tokens, "After training, generate this many tokens")->group(g);
  cmd->add_option("--sample-prompt", o.sample_prompt, "Text the sample continues")->group(g);
  cmd->add_option("--tokenizer", o.tokenizer,
                  "Tokenizer of the sample: 'gpt2', a .model, .tiktoken or encoder.json file (default: the data folder's)")
      ->group(g);
  cmd->add_option("--peak-tflops", o.peak_tflops, "Peak TFLOP/s per rank for MFU/HFU")->group(g);
  cmd->add_flag("--no-memory-check", f->no_memory_check,
                "Skip the check that the ranks of each node fit in its available memory")->group(g);
  cmd->add_option("--peak-from", f->peak_from,
                  "Peak per rank for MFU/HFU from `meshtrain bench gemm --out FILE` on this machine")->group(g);
  cmd->callback([&run, f] { run = [f] { return run_train(*f); }; });
}

}  // namespace meshtrain::cli
