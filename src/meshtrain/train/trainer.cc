#include "meshtrain/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/data/loader.h"
#include "meshtrain/data/token_dataset.h"
#include "meshtrain/kernels/kernel_clock.h"
#include "meshtrain/measure/atomic_file.h"
#include "meshtrain/measure/gather.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/measure/timeline.h"
#include "meshtrain/measure/timer.h"
#include "meshtrain/measure/trace.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/data/tokenizer.h"
#include "meshtrain/parallel/pipeline_engine.h"
#include "meshtrain/train/generate.h"

namespace meshtrain {

void to_json(nlohmann::json& j, const TrainOptions& o) {
  j = nlohmann::json{{"model", o.model},
                     {"parallel", o.parallel},
                     {"lr", o.lr.lr},
                     {"min_lr", o.lr.min_lr},
                     {"lr_warmup_iters", o.lr.warmup},
                     {"lr_decay_iters", o.lr.decay_iters},
                     {"adam_beta1", o.adam.beta1},
                     {"adam_beta2", o.adam.beta2},
                     {"adam_eps", o.adam.eps},
                     {"weight_decay", o.adam.weight_decay},
                     {"clip_grad", o.clip_grad},
                     {"train_iters", o.train_iters},
                     {"seed", o.seed},
                     {"data_path", o.data_path},
                     {"mock_data", o.mock_data},
                     {"eval_interval", o.eval_interval},
                     {"eval_iters", o.eval_iters},
                     {"peak_tflops", o.peak_tflops}};
}

namespace {

namespace fs = std::filesystem;

// The step's sequences for this rank: micro-batch i at offset i * N. The
// samples of global batch `it` depend on the seed alone, never on the
// layout (see data/loader.h).
class BatchSource {
 public:
  BatchSource(const TrainOptions& o) : o_(o) {
    if (o.mock_data) return;
    const data::DataPaths paths = data::resolve_data_path(o.data_path);
    train_ = std::make_unique<data::TokenDataset>(paths.train);
    sampler_ = std::make_unique<data::SequenceSampler>(*train_, o.model.seq_length, o.seed);
    if (!paths.val.empty() && o.eval_iters > 0) {
      val_ = std::make_unique<data::TokenDataset>(paths.val);
      eval_ = std::make_unique<data::EvalSampler>(*val_, o.model.seq_length, o.parallel.global_batch_size);
    }
  }
  bool has_eval() const { return o_.mock_data ? o_.eval_iters > 0 : eval_ != nullptr; }
  int64_t eval_batches() const { return o_.mock_data ? o_.eval_iters : std::min<int64_t>(o_.eval_iters, eval_->num_batches()); }

  void fill(int64_t it, bool eval, int dp_rank, int32_t* tokens, int32_t* targets) const {
    const ParallelConfig& p = o_.parallel;
    const int m = p.num_micro_batches(), N = p.micro_batch_size * o_.model.seq_length;
    for (int mb = 0; mb < m; ++mb) {
      const int first = data::micro_batch_first_sequence(dp_rank, m, mb, p.micro_batch_size);
      int32_t* tk = tokens + int64_t{mb} * N;
      int32_t* tg = targets + int64_t{mb} * N;
      if (o_.mock_data)
        mock(it, eval, first, tk, tg);
      else if (eval)
        eval_->fill_micro_batch(it, first, p.micro_batch_size, tk, tg);
      else
        sampler_->fill_micro_batch(it, p.global_batch_size, first, p.micro_batch_size, tk, tg);
    }
  }

 private:
  // Token t of sequence j of batch `it`: a hash, so any layout sees the same.
  void mock(int64_t it, bool eval, int first, int32_t* tk, int32_t* tg) const {
    const int S = o_.model.seq_length, V = o_.model.vocab_size;
    for (int b = 0; b < o_.parallel.micro_batch_size; ++b) {
      const uint64_t seq = static_cast<uint64_t>(it) * o_.parallel.global_batch_size + first + b;
      for (int t = 0; t <= S; ++t) {
        const int32_t v = static_cast<int32_t>(hash3(o_.seed, eval ? 2 : 1, seq * (S + 1) + t) % V);
        if (t < S) tk[b * S + t] = v;
        if (t > 0) tg[b * S + t - 1] = v;
      }
    }
  }
  const TrainOptions& o_;
  std::unique_ptr<data::TokenDataset> train_, val_;
  std::unique_ptr<data::SequenceSampler> sampler_;
  std::unique_ptr<data::EvalSampler> eval_;
};

std::string human_bytes(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, ++i;
  return fmt::format("{:.1f} {}", b, u[i]);
}

std::string human_time(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s) / 3600, (int(s) % 3600) / 60);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Every element of the model once, in the serial run's parameter order:
// each rank adds the elements it is the owner of (DP rank 0, TP rank 0 for
// replicated tensors, the first stage for the tied embedding) into a
// world-wide sum that lands on every rank.
template <class T>
std::vector<float> gather_serial_weights(ShardedState<T>& state, ProcessMesh& mesh, const TrainOptions& o) {
  ParallelConfig serial;
  const Layout full = Layout::build(o.model, serial, 0, 0);
  std::map<std::string, const ParamSpec*> where;
  for (const Unit& u : full.units())
    for (const ParamSpec& s : u.params) where[s.name] = &s;
  std::vector<float> out(full.numel(), 0.0f);
  const RankCoord c = mesh.coord();
  for (const Unit& u : state.layout().units()) {
    if (u.name == "head.word") continue;
    state.gather(u);
    for (const ParamSpec& s : u.params) {
      if (c.dp != 0 || (s.tp_replicated() && c.tp != 0)) continue;
      const ParamSpec& f = *where.at(s.name);
      const T* w = state.weights(u) + (s.offset - u.offset);
      for (int64_t i = 0; i < s.numel(); ++i) {
        const int64_t gi = s.row_offset + i / s.local_cols, gj = s.col_offset + i % s.local_cols;
        out[f.offset + gi * f.cols + gj] = to_f32(w[i]);
      }
    }
    state.release(u);
  }
  mesh.world().all_reduce(out.data(), static_cast<int64_t>(out.size()));
  return out;
}

// Continues the prompt with the trained model and prints the text.
void sample_text(const TrainOptions& o, const std::vector<float>& weights) {
  const std::string tk = !o.tokenizer.empty() ? o.tokenizer
                         : o.mock_data      ? std::string()
                                            : data::resolve_data_path(o.data_path).tokenizer;
  std::unique_ptr<data::Tokenizer> tok;
  if (!tk.empty()) tok = data::load_tokenizer(tk);
  std::vector<int32_t> prompt = tok && !o.sample_prompt.empty() ? tok->encode(o.sample_prompt) : std::vector<int32_t>{};
  prompt.insert(prompt.begin(), tok ? tok->eot() : 0);
  SamplingOptions so;
  so.new_tokens = o.sample_tokens;
  so.seed = o.seed;
  const std::vector<int32_t> out = generate(o.model, weights, prompt, so);
  if (tok)
    fmt::print("\nsample:\n{}{}\n", o.sample_prompt, tok->decode(std::span<const int32_t>(out).subspan(prompt.size())));
  else
    fmt::print("\nsample (token ids): {}\n", fmt::join(out, " "));
}

// MESHTRAIN_KILL_RANK_AT="R:I" makes rank R kill itself at iteration I: the
// failure tests use it to check that the others exit instead of hanging.
struct FaultInjection {
  int rank = -1, iteration = -1;
};
FaultInjection fault_injection() {
  FaultInjection f;
  if (const char* e = std::getenv("MESHTRAIN_KILL_RANK_AT")) std::sscanf(e, "%d:%d", &f.rank, &f.iteration);
  return f;
}

template <class T>
TrainResult train_impl(const TrainOptions& o, ProcessMesh& mesh) {
  const ParallelConfig& p = o.parallel;
  const ModelConfig& m = o.model;
  const bool rank0 = mesh.rank() == 0;
  const bool tty = rank0 && !o.quiet && live_output_enabled(o.progress);
  BatchSource data(o);  // opens and validates the data before the big allocations

  PipelineEngine<T> engine(m, p, mesh, o.seed);
  const int mbs = p.num_micro_batches();
  const int64_t N = int64_t{p.micro_batch_size} * m.seq_length;
  Buffer tokens(MemCategory::activations, mbs * N * sizeof(int32_t));
  Buffer targets(MemCategory::activations, mbs * N * sizeof(int32_t));
  const StepBatch batch{tokens.as<int32_t>(), targets.as<int32_t>(), mbs};
  const double tokens_per_step = double(p.global_batch_size) * m.seq_length;
  const float dloss = static_cast<float>(1.0 / tokens_per_step);
  const StepFlops flops = step_flops(m, p, tokens_per_step);

  TrainResult r;
  r.tokens_per_step = tokens_per_step;

  // Measurement (measure/run_report.h, measure/trace.h): per-step records,
  // the training steps' communication (evaluation excluded), and the trace.
  std::unique_ptr<TraceWriter> trace;
  if (!o.trace_path.empty())
    trace = std::make_unique<TraceWriter>(mesh.rank(), mesh.coord().pp, synchronized_origin_s(mesh.world()));
  if (trace) mesh.set_tracer(trace.get());
  std::vector<StepRecord> records;
  std::vector<double> consumed;  // tokens of each step, summed over the world
  CommStats train_comm;
  mesh.reset_stats();

  auto evaluate = [&](int it) {
    train_comm.merge(mesh.stats());
    const double te0 = now_s();
    double sums[2] = {0, 0};
    for (int64_t b = 0; b < data.eval_batches(); ++b) {
      data.fill(b, true, mesh.coord().dp, tokens.as<int32_t>(), targets.as<int32_t>());
      const StepStats s = engine.eval_step(batch);
      sums[0] += s.loss_sum;
      sums[1] += double(s.loss_tokens);
    }
    mesh.world().all_reduce(sums, 2);
    const double loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
    r.val_losses.emplace_back(it, loss);
    if (trace) trace->complete("evaluate", "eval", te0, now_s(), {{"iteration", it}});
    mesh.reset_stats();
    if (rank0 && !o.quiet) fmt::print("{}validation | iter {} | loss {:.4f} | ppl {:.2f}\n", tty ? "\r\033[K" : "", it, loss, std::exp(loss));
    std::fflush(stdout);
  };

  const double t_start = now_s();
  const FaultInjection fault = fault_injection();
  for (int it = 0; it < o.train_iters; ++it) {
    if (fault.rank == mesh.rank() && fault.iteration == it) std::raise(SIGKILL);
    const double t0 = now_s();
    data.fill(it, false, mesh.coord().dp, tokens.as<int32_t>(), targets.as<int32_t>());
    const kernels::KernelTotals mm0 = kernels::kernel_totals(kernels::KernelKind::matmul);
    const kernels::KernelTotals at0 = kernels::kernel_totals(kernels::KernelKind::attention);
    const double tp0 = now_s();
    const StepStats s = engine.train_step(batch, dloss);
    const double tp1 = now_s();
    const kernels::KernelTotals mm = kernels::kernel_totals(kernels::KernelKind::matmul) - mm0;
    const kernels::KernelTotals at = kernels::kernel_totals(kernels::KernelKind::attention) - at0;
    double red[3] = {s.loss_sum, double(s.loss_tokens), engine.state().grad_sq_norm_local()};
    mesh.world().all_reduce(red, 3);
    const double loss = red[0] / red[1];
    const double norm = std::sqrt(red[2]);
    const float scale = (o.clip_grad > 0 && norm > o.clip_grad) ? static_cast<float>(o.clip_grad / norm) : 1.0f;
    const float lr = o.lr.at(it);
    const double to0 = now_s();
    engine.state().step(lr, scale, it + 1, o.adam);
    const double to1 = now_s();
    const double dt = to1 - t0;
    records.push_back(StepRecord{dt, tp1 - tp0, s.forward_s, s.backward_s, s.compute_s, s.idle_s, to1 - to0,
                                 s.loss_tokens, static_cast<int64_t>(red[1]), mm.seconds, mm.flops, at.seconds,
                                 at.flops});
    consumed.push_back(red[1]);
    if (trace) {
      trace->complete("step", "train", t0, to1, {{"iteration", it + 1}});
      trace->complete("train_step", "train", tp0, tp1,
                      {{"forward_s", s.forward_s}, {"backward_s", s.backward_s}, {"idle_s", s.idle_s}});
      for (const ComputeSpan& c : compute_spans(s.actions))
        trace->complete(c.name, "compute", c.start_s, c.end_s, c.args);
      trace->complete("optimizer", "train", to0, to1);
    }
    r.losses.push_back(loss);
    r.step_times_s.push_back(dt);
    r.grad_norms.push_back(norm);
    r.lrs.push_back(lr);
    if (rank0 && !o.quiet && (it % o.log_interval == 0 || it + 1 == o.train_iters)) {
      const double peak = double(MemoryTracker::global().snapshot().peak_total);
      fmt::print("{}iter {:>5}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.0f} tokens/s | {:.1f} GFLOP/s | peak mem {}\n",
                 tty ? "\r\033[K" : "", it + 1, o.train_iters, loss, lr, norm, red[1] / dt,
                 flops.model / dt / 1e9 / mesh.world_size(), human_bytes(peak));
    }
    if (tty) {
      const double elapsed = now_s() - t_start, frac = double(it + 1) / o.train_iters;
      const int w = 30, fill = static_cast<int>(frac * w);
      fmt::print("[{}{}] {:3.0f}% ETA {}", std::string(fill, '#'), std::string(w - fill, ' '), 100 * frac,
                 human_time(elapsed / frac - elapsed));
    }
    std::fflush(stdout);
    // The report's communication covers the steady iterations: the first one
    // (first-touch allocation, connection set-up) is left out when there are more.
    if (it == 0 && o.train_iters > 1) mesh.reset_stats();
    if (data.has_eval() && o.eval_interval > 0 && (it + 1) % o.eval_interval == 0 && it + 1 < o.train_iters)
      evaluate(it + 1);
  }
  if (tty) fmt::print("\r\033[K");
  train_comm.merge(mesh.stats());
  mesh.reset_stats();  // evaluate() adds what the groups hold: nothing left to add twice
  if (data.has_eval()) evaluate(o.train_iters);
  std::vector<double> later(r.step_times_s.begin() + (r.step_times_s.size() > 1 ? 1 : 0), r.step_times_s.end());
  // Throughput from the tokens each step consumed (never the configured batch).
  std::vector<double> later_tps;
  for (size_t i = r.step_times_s.size() > 1 ? 1 : 0; i < r.step_times_s.size(); ++i)
    later_tps.push_back(consumed[i] / r.step_times_s[i]);
  r.tokens_per_s = median(later_tps);
  if (!consumed.empty()) r.tokens_per_step = median(consumed);

  if (!o.dump_weights_path.empty() || o.sample_tokens > 0) {
    const std::vector<float> w = gather_serial_weights(engine.state(), mesh, o);
    if (rank0 && !o.dump_weights_path.empty())
      write_file_atomically(o.dump_weights_path,
                            std::string_view(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)));
    if (rank0 && o.sample_tokens > 0) sample_text(o, w);
  }

  // Memory: the most loaded rank's peak per category.
  const MemorySnapshot ms = MemoryTracker::global().snapshot();
  double peaks[kNumMemCategories + 2];
  for (int i = 0; i < kNumMemCategories; ++i) peaks[i] = double(ms.peak[i]);
  peaks[kNumMemCategories] = double(ms.peak_total);
  peaks[kNumMemCategories + 1] = double(process_peak_rss_bytes());
  mesh.world().all_reduce(peaks, kNumMemCategories + 2, ReduceOp::max);

  // Every rank's record, gathered on rank 0 (raw MPI: not counted, not traced).
  nlohmann::json measurements;
  if (!o.report_path.empty() || !o.quiet) {
    RankRecord rec;
    rec.rank = mesh.rank();
    rec.coord = mesh.coord();
    rec.steps = records;
    rec.comm = train_comm;
    rec.comm_steps = std::max(1, o.train_iters - 1);
    rec.memory = ms;
    rec.peak_rss_bytes = process_peak_rss_bytes();
    rec.flops = rank_step_flops(m, p, mesh.coord().pp, r.tokens_per_step);
    const std::vector<std::string> all = gather_strings(mesh.world(), rank_record_json(rec).dump());
    if (rank0) {
      std::vector<nlohmann::json> ranks;
      for (const std::string& s : all) ranks.push_back(nlohmann::json::parse(s));
      measurements = aggregate_measurements(ranks, ReportContext{m, p, mesh.world_size(), o.peak_tflops});
    }
  }
  if (trace) {
    mesh.set_tracer(nullptr);
    trace->gather_and_write(mesh.world(), o.trace_path);
  }

  if (rank0 && !o.report_path.empty()) {
    nlohmann::json j;
    j["config"] = o;
    j["meshtrain_commit"] = build_commit();
    j["world_size"] = mesh.world_size();
    j["losses"] = r.losses;
    j["step_times_s"] = r.step_times_s;
    j["grad_norms"] = r.grad_norms;
    j["lrs"] = r.lrs;
    j["val_losses"] = nlohmann::json::array();
    for (auto [i, l] : r.val_losses) j["val_losses"].push_back({{"iteration", i}, {"loss", l}});
    j["tokens_per_step"] = r.tokens_per_step;
    j["configured_tokens_per_step"] = tokens_per_step;
    j["tokens_per_s"] = r.tokens_per_s;
    const StepFlops consumed_flops = step_flops(m, p, r.tokens_per_step);
    j["model_flops_per_step"] = consumed_flops.model;
    j["hardware_flops_per_step"] = consumed_flops.hardware;
    const double step = median(later);
    j["model_tflops_per_rank"] = consumed_flops.model / step / 1e12 / mesh.world_size();
    j["hardware_tflops_per_rank"] = consumed_flops.hardware / step / 1e12 / mesh.world_size();
    if (o.peak_tflops > 0) {
      j["mfu"] = j["model_tflops_per_rank"].get<double>() / o.peak_tflops;
      j["hfu"] = j["hardware_tflops_per_rank"].get<double>() / o.peak_tflops;
    }
    nlohmann::json mem;
    for (int i = 0; i < kNumMemCategories; ++i) mem[std::string(mem_category_name(MemCategory(i)))] = int64_t(peaks[i]);
    mem["total"] = int64_t(peaks[kNumMemCategories]);
    j["memory_peak_bytes"] = mem;
    j["process_peak_rss_bytes"] = int64_t(peaks[kNumMemCategories + 1]);
    j["measurements"] = measurements;
    write_file_atomically(o.report_path, j.dump(2));
  }
  if (rank0 && !o.quiet) {
    fmt::print("\nsummary | {} iterations | final loss {:.4f} | {:.0f} tokens/s (median) | {:.2f} TFLOP/s per rank (model) | peak memory {} (params {}, grads {}, optimizer {}, activations {})\n",
               o.train_iters, r.losses.empty() ? 0.0 : r.losses.back(), r.tokens_per_s,
               flops.model / median(later) / 1e12 / mesh.world_size(), human_bytes(peaks[kNumMemCategories]),
               human_bytes(peaks[0]), human_bytes(peaks[1]), human_bytes(peaks[2]), human_bytes(peaks[3]));
    if (!measurements.is_null()) fmt::print("{}", summary_table(measurements));
    std::fflush(stdout);
  }
  return r;
}

}  // namespace

void check_options(const TrainOptions& o, int world_size) {
  ParallelConfig p = o.parallel;
  validate(o.model, p, world_size);
  check(o.train_iters >= 0, "train-iters must not be negative (got {})", o.train_iters);
  check(o.lr.lr >= 0, "lr must not be negative (got {})", o.lr.lr);
  check(o.clip_grad >= 0, "clip-grad must not be negative (got {})", o.clip_grad);
  check(o.eval_iters >= 0 && o.eval_interval >= 0, "eval-iters and eval-interval must not be negative");
  if (!o.mock_data) {
    check(!o.data_path.empty(), "no --data-path given (or use --mock-data)");
    const data::DataPaths paths = data::resolve_data_path(o.data_path);
    const data::TokenDataset t(paths.train);  // validates headers and sizes
    check(t.size() >= int64_t{o.model.seq_length} + 1, "token data {} holds {} tokens, fewer than seq-length + 1 = {}",
          paths.train, t.size(), o.model.seq_length + 1);
    t.validate_vocab(o.model.vocab_size);
    if (!paths.val.empty() && o.eval_iters > 0) {
      const data::TokenDataset val(paths.val);
      check(val.size() >= int64_t{o.model.seq_length} * o.parallel.global_batch_size + 1,
            "validation data {} holds {} tokens, fewer than one global batch", paths.val, val.size());
      val.validate_vocab(o.model.vocab_size);
    }
  }
}

TrainResult train(const TrainOptions& o, ProcessMesh& mesh) {
  if (o.parallel.bf16) return train_impl<bf16>(o, mesh);
  return train_impl<float>(o, mesh);
}

}  // namespace meshtrain
