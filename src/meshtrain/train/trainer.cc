#include "meshtrain/train/trainer.h"

#include <csignal>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/comm/agreed_error.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/data/token_dataset.h"
#include "meshtrain/core/clock.h"
#include "meshtrain/core/error.h"
#include "meshtrain/kernels/kernel_clock.h"
#include "meshtrain/measure/timeline.h"
#include "meshtrain/train/generate.h"
#include "meshtrain/train/serial_weights.h"

namespace meshtrain {

namespace {

struct KernelMark {
  kernels::KernelTotals mm, at;
  static KernelMark now() {
    return {kernels::kernel_totals(kernels::KernelKind::matmul), kernels::kernel_totals(kernels::KernelKind::attention)};
  }
};

}  // namespace

template <class T>
Trainer<T>::Trainer(const TrainOptions& o, ProcessMesh& mesh)
    : o_(o), mesh_(mesh), data_(o), log_(o, mesh.rank() == 0), fault_(fault_injection_from_env()) {
  // A bad checkpoint is refused before the model is allocated.
  const double tv = now_s();
  if (!o.load_dir.empty()) verify_checkpoint(o.load_dir, o.model, o.seed, mesh.world());
  verify_s_ = now_s() - tv;
  engine_ = std::make_unique<PipelineEngine<T>>(o.model, o.parallel, mesh, o.seed, o.zero_prefetch);
  const ParallelConfig& p = o.parallel;
  const int mbs = p.num_micro_batches();
  const int64_t N = int64_t{p.micro_batch_size} * o.model.seq_length;
  tokens_ = Buffer(MemCategory::activations, mbs * N * sizeof(int32_t));
  targets_ = Buffer(MemCategory::activations, mbs * N * sizeof(int32_t));
  batch_ = StepBatch{tokens_.as<int32_t>(), targets_.as<int32_t>(), mbs};
  const double tokens_per_step = double(p.global_batch_size) * o.model.seq_length;
  dloss_ = static_cast<float>(1.0 / tokens_per_step);
  flops_ = step_flops(o.model, p, tokens_per_step);
  r_.tokens_per_step = tokens_per_step;
  // Measurement (measure/run_report.h, measure/trace.h): per-step records,
  // the training steps' communication (evaluation excluded), and the trace.
  if (!o.trace_path.empty()) {
    trace_ = std::make_unique<TraceWriter>(mesh.rank(), mesh.coord().pp, synchronized_origin_s(mesh.world()));
    mesh.set_tracer(trace_.get());
  }
  if (!o.save_dir.empty()) {
    writer_ = std::make_unique<CheckpointWriter>(o.save_dir, o.keep_last, o.async_save);
    writer_->prepare(engine_->state(), mesh.rank());
  }
  if (o.exit_signal_handler) install_term_handler();
  mesh.reset_stats();
}

template <class T>
Trainer<T>::~Trainer() {
  if (trace_) mesh_.set_tracer(nullptr);
}

template <class T>
int Trainer<T>::load() {
  if (o_.load_dir.empty()) return 0;
  const double t0 = now_s();
  const CheckpointMeta meta = load_checkpoint(o_.load_dir, o_.model, engine_->state(), mesh_);
  double load_s = now_s() - t0;
  mesh_.world().all_reduce(&load_s, 1, ReduceOp::max);
  double bytes_read = double(meta.bytes_read);
  mesh_.world().all_reduce(&bytes_read, 1);
  r_.load = {{"path", meta.path},
             {"iteration", meta.iteration},
             {"verify_s", verify_s_},
             {"load_s", load_s},
             {"bytes_read", int64_t(bytes_read)}};
  r_.resumed_from_iteration = meta.iteration;
  r_.skipped_steps = meta.skipped_steps;
  last_saved_ = meta.iteration;
  log_.event(fmt::format("loaded checkpoint {} (iteration {}, {} consumed samples)", meta.path, meta.iteration,
                         meta.consumed_samples));
  mesh_.reset_stats();
  return meta.iteration;
}

template <class T>
StepOutcome Trainer<T>::step(int it) {
  if (fault_.kill.at(mesh_.rank(), it)) std::raise(SIGKILL);
  const double t0 = now_s();
  data_.fill(it, false, mesh_.coord().dp, tokens_.as<int32_t>(), targets_.as<int32_t>());
  const KernelMark k0 = KernelMark::now();
  const double tp0 = now_s();
  const StepStats s = engine_->train_step(batch_, dloss_);
  const double tp1 = now_s();
  const KernelMark k1 = KernelMark::now();
  const bool late = o_.exit_duration_mins > 0 && now_s() - t_start_ > 60 * o_.exit_duration_mins;
  // One reduction: loss sum, its tokens, squared gradient norm, stop
  // requests, and the ranks still writing (or failed to write) a background save.
  const auto ws = writer_ ? writer_->write_state() : CheckpointWriter::WriteState::none;
  double red[7] = {s.loss_sum,
                   double(s.loss_tokens),
                   engine_->state().grad_sq_norm_local(),
                   term_requested() ? 1.0 : 0.0,
                   late ? 1.0 : 0.0,
                   ws == CheckpointWriter::WriteState::writing ? 1.0 : 0.0,
                   ws == CheckpointWriter::WriteState::failed ? 1.0 : 0.0};
  if (fault_.nan_loss.at(mesh_.rank(), it)) red[0] = std::numeric_limits<double>::quiet_NaN();
  mesh_.world().all_reduce(red, 7);
  StepOutcome out{red[0] / red[1], std::sqrt(red[2])};
  out.stop = red[3] > 0 ? StopReason::signal : red[4] > 0 ? StopReason::exit_duration : StopReason::none;
  out.save_written = ws != CheckpointWriter::WriteState::none && (red[5] == 0 || red[6] > 0);
  if (!std::isfinite(out.loss) || !std::isfinite(out.grad_norm)) {
    if (r_.skipped_steps >= o_.skip_nonfinite) stop_nonfinite(it, out.loss, out.grad_norm);
    out.skipped = true;
    ++r_.skipped_steps;
  }
  const float lr = o_.lr.at(it);
  const float scale =
      (o_.clip_grad > 0 && out.grad_norm > o_.clip_grad) ? static_cast<float>(o_.clip_grad / out.grad_norm) : 1.0f;
  const double to0 = now_s();
  if (out.skipped)
    engine_->state().discard_gradients();
  else  // Adam's step count: the updates made so far
    engine_->state().step(lr, scale, it + 1 - r_.skipped_steps, o_.adam);
  const double to1 = now_s();
  StepRecord rec{to1 - t0, tp1 - tp0, s.forward_s, s.backward_s, s.compute_s, s.idle_s, to1 - to0,
                 s.loss_tokens, static_cast<int64_t>(red[1]), k1.mm.seconds - k0.mm.seconds,
                 k1.mm.flops - k0.mm.flops, k1.at.seconds - k0.at.seconds, k1.at.flops - k0.at.flops};
  record_step(it, s, t0, tp0, tp1, to0, to1, red[1]);
  meas_.records.push_back(rec);
  r_.losses.push_back(out.loss);
  r_.grad_norms.push_back(out.grad_norm);
  r_.lrs.push_back(lr);
  log_step(it, out, to1 - t0, red[1]);
  // The report's communication covers the steady iterations: the first one
  // (first-touch allocation, connection set-up) is left out when there are more.
  if (it == r_.first_iteration && it + 1 < o_.train_iters) mesh_.reset_stats();
  return out;
}

template <class T>
void Trainer<T>::record_step(int it, const StepStats& s, double t0, double tp0, double tp1, double to0, double to1,
                             double step_tokens) {
  meas_.consumed.push_back(step_tokens);
  r_.step_times_s.push_back(to1 - t0);
  // The report's pipeline timeline: a few steady iterations of one rank per stage.
  const bool steady = it > r_.first_iteration || it + 1 == o_.train_iters;
  if (steady && mesh_.coord().tp == 0 && mesh_.coord().dp == 0 && meas_.timeline.size() < kTimelineIterations)
    meas_.timeline.push_back(timeline_iteration_json(it + 1, tp0, s.actions));
  if (!trace_) return;
  trace_->complete("step", "train", t0, to1, {{"iteration", it + 1}});
  trace_->complete("train_step", "train", tp0, tp1,
                   {{"forward_s", s.forward_s}, {"backward_s", s.backward_s}, {"idle_s", s.idle_s}});
  for (const ComputeSpan& c : compute_spans(s.actions)) trace_->complete(c.name, "compute", c.start_s, c.end_s, c.args);
  trace_->complete("optimizer", "train", to0, to1);
}

template <class T>
void Trainer<T>::log_step(int it, const StepOutcome& out, double dt, double step_tokens) {
  IterationMetrics m;
  m.iteration = it + 1;
  m.loss = out.loss;
  m.lr = r_.lrs.back();
  m.grad_norm = out.grad_norm;
  m.step_time_s = dt;
  m.tokens_per_s = step_tokens / dt;
  m.gflops_per_rank = flops_.model / dt / 1e9 / mesh_.world_size();
  m.peak_bytes = double(MemoryTracker::global().snapshot().peak_total);
  m.skipped = out.skipped;
  m.skipped_steps = r_.skipped_steps;
  log_.iteration(m);
  if (o_.train_iters > r_.first_iteration) log_.progress(it + 1, now_s() - t_start_, r_.first_iteration);
}

// Names the first tensor with a non-finite reduced gradient (lowest rank),
// writes the report and ends every rank with the same message.
template <class T>
void Trainer<T>::stop_nonfinite(int it, double loss, double norm) {
  const ParamSpec* bad = engine_->state().first_nonfinite_grad();
  const std::string where = agree_on_error(
      mesh_.world(), bad ? fmt::format("; first non-finite gradient: rank {}, tensor {}", mesh_.rank(), bad->name) : "");
  r_.stop_reason = "nonfinite";
  r_.losses.push_back(loss);
  r_.grad_norms.push_back(norm);
  r_.lrs.push_back(o_.lr.at(it));
  report(false);
  throw AgreedError(fmt::format("non-finite {} at iteration {} (loss {}, gradient norm {}){}; stopped without saving{}",
                                std::isfinite(loss) ? "gradient norm" : "loss", it + 1, loss, norm, where,
                                o_.skip_nonfinite > 0 ? fmt::format(" ({} such steps skipped before)", r_.skipped_steps)
                                                      : " (--skip-nonfinite N skips such steps)"));
}

template <class T>
void Trainer<T>::evaluate(int it) {
  meas_.train_comm.merge(mesh_.stats());
  const double te0 = now_s();
  double sums[2] = {0, 0};
  for (int64_t b = 0; b < data_.eval_batches(); ++b) {
    data_.fill(b, true, mesh_.coord().dp, tokens_.as<int32_t>(), targets_.as<int32_t>());
    const StepStats s = engine_->eval_step(batch_);
    sums[0] += s.loss_sum;
    sums[1] += double(s.loss_tokens);
  }
  mesh_.world().all_reduce(sums, 2);
  const double loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
  r_.val_losses.emplace_back(it, loss);
  if (trace_) trace_->complete("evaluate", "eval", te0, now_s(), {{"iteration", it}});
  mesh_.reset_stats();
  log_.validation(it, loss);
}

template <class T>
void Trainer<T>::save(int iteration) {
  if (!writer_ || last_saved_ == iteration) return;
  meas_.train_comm.merge(mesh_.stats());
  CheckpointMeta meta;
  meta.iteration = iteration;
  meta.consumed_samples = int64_t{iteration} * o_.parallel.global_batch_size;
  meta.skipped_steps = r_.skipped_steps;
  meta.seed = o_.seed;
  const SaveRecord rec = writer_->save(meta, nlohmann::json(o_), engine_->state(), mesh_,
                                       fault_.kill_during_save.at(mesh_.rank(), iteration));
  last_saved_ = iteration;
  record_checkpoints();
  log_.event(rec.summary());
  report(false);
  mesh_.reset_stats();
}

// Every rank has ended its part of the pending save's phase (or one failed):
// move it on now rather than at the next save (throws AgreedError on
// failure); `finish`: wait for its end.
template <class T>
void Trainer<T>::commit_save(bool finish) {
  const SaveRecord rec = finish ? writer_->wait(mesh_) : writer_->advance(mesh_);
  if (rec.iteration < 0) return;
  record_checkpoints();
  log_.event(rec.summary());
  report(false);
}

template <class T>
void Trainer<T>::record_checkpoints() {
  r_.checkpoints.clear();
  for (const SaveRecord& s : writer_->records()) r_.checkpoints.push_back(s.to_json());
}

template <class T>
void Trainer<T>::report(bool final) {
  summarize_throughput(r_, meas_);
  const nlohmann::json j = build_run_report(o_, r_, meas_, mesh_, final);
  if (mesh_.rank() == 0 && !o_.report_path.empty()) write_output_file(o_.report_path, {j.dump(2)}, "run report");
}

template <class T>
StopReason Trainer<T>::stop_after(int it, const StepOutcome& out) const {
  if (out.stop != StopReason::none) return out.stop;
  if (o_.exit_interval > 0 && (it + 1) % o_.exit_interval == 0 && it + 1 < o_.train_iters)
    return StopReason::exit_interval;
  return StopReason::none;
}

template <class T>
TrainResult Trainer<T>::run() {
  r_.first_iteration = load();
  t_start_ = now_s();
  StopReason stop = StopReason::finished;
  for (int it = r_.first_iteration; it < o_.train_iters; ++it) {
    const StepOutcome out = step(it);
    if (out.save_written) commit_save(false);
    if (data_.has_eval() && o_.eval_interval > 0 && (it + 1) % o_.eval_interval == 0 && it + 1 < o_.train_iters)
      evaluate(it + 1);
    const StopReason s = stop_after(it, out);
    if (s != StopReason::none || it + 1 == o_.train_iters || (o_.save_interval > 0 && (it + 1) % o_.save_interval == 0))
      save(it + 1);
    if (s != StopReason::none) {
      stop = s;
      log_.event(fmt::format("stopping after iteration {} ({})", it + 1, stop_reason_name(s)));
      break;
    }
  }
  r_.stop_reason = stop_reason_name(stop);
  finish();
  report(true);
  return r_;
}

// After the last step: the pending asynchronous save, the final evaluation,
// weights dump and sample, the trace.
template <class T>
void Trainer<T>::finish() {
  log_.end_progress();
  if (writer_ && writer_->write_state() != CheckpointWriter::WriteState::none) commit_save(true);
  meas_.train_comm.merge(mesh_.stats());
  mesh_.reset_stats();  // evaluate() adds what the groups hold: nothing left to add twice
  if (data_.has_eval() && r_.stop_reason == stop_reason_name(StopReason::finished)) evaluate(o_.train_iters);
  if (!o_.dump_weights_path.empty() || o_.sample_tokens > 0) {
    const std::vector<float> w = gather_serial_weights(engine_->state(), mesh_, o_.model);
    if (mesh_.rank() == 0 && !o_.dump_weights_path.empty())
      write_output_file(o_.dump_weights_path,
                        {std::string_view(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float))}, "weights");
    if (mesh_.rank() == 0 && o_.sample_tokens > 0) {
      SamplingOptions so;
      so.new_tokens = o_.sample_tokens;
      so.seed = o_.seed;
      const std::string tk = !o_.tokenizer.empty() ? o_.tokenizer
                             : o_.mock_data      ? std::string()
                                                 : data::resolve_data_path(o_.data_path).tokenizer;
      print_sample(o_.model, w, tk, o_.sample_prompt, so);
    }
  }
  if (trace_) {
    mesh_.set_tracer(nullptr);
    trace_->gather_and_write(mesh_.world(), o_.trace_path);
    trace_.reset();
  }
}

template class Trainer<float>;
template class Trainer<bf16>;

TrainResult train(const TrainOptions& o, ProcessMesh& mesh) {
  if (o.parallel.bf16) return Trainer<bf16>(o, mesh).run();
  return Trainer<float>(o, mesh).run();
}

}  // namespace meshtrain
