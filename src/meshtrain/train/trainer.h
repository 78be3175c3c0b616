// Trainer: the training loop. Each step fills the batch (data depends on the
// iteration alone), runs the pipeline engine, all-reduces the loss, the
// gradient norm and the stop requests in one reduction, clips, and applies
// AdamW with warmup + cosine (the learning rate depends on the iteration
// alone); evaluation, checkpoints (checkpoint/), the log and the run report
// hang off the loop at their intervals; an asynchronous save is committed
// at the first step after which every rank has written it (the step's
// reduction carries that), and a failed one ends the run there. Everything here is collective over
// the mesh's world: every rank calls every public function.
//
// Ending a run: after train_iters, after --exit-interval, after
// --exit-duration-in-mins or on SIGTERM with --exit-signal-handler (each
// saves first with --save, exit status 0); a non-finite loss or gradient
// norm throws AgreedError (comm/agreed_error.h) naming the iteration, rank and tensor, saving nothing
// (--skip-nonfinite N skips up to N such steps without an update).
#pragma once

#include <cstdio>
#include <memory>
#include <vector>

#include "meshtrain/checkpoint/checkpoint.h"
#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/measure/trace.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/parallel/pipeline_engine.h"
#include "meshtrain/train/batch_source.h"
#include "meshtrain/train/run_control.h"
#include "meshtrain/train/train_log.h"
#include "meshtrain/train/train_options.h"
#include "meshtrain/train/train_report.h"

namespace meshtrain {

// Checks the options (configuration, data files) on every rank before any
// large allocation; throws Error naming the first problem.
void check_options(const TrainOptions& o, int world_size);

// The outcome of one step, the same on every rank.
struct StepOutcome {
  double loss = 0, grad_norm = 0;
  bool skipped = false;             // non-finite, skipped under --skip-nonfinite
  StopReason stop = StopReason::none;  // agreed stop request (signal, duration)
  bool save_written = false;        // every rank ended its part of the background save's phase: advance it
};

template <class T>
class Trainer {
 public:
  // Opens the data and, with --load, verifies the checkpoint before the
  // engine allocates the model.
  Trainer(const TrainOptions& o, ProcessMesh& mesh);
  ~Trainer();

  // Loads --load into the state; returns the iteration to continue from.
  int load();
  StepOutcome step(int it);
  void evaluate(int it);
  void save(int iteration);
  // The run report: written (rank 0, atomically) with --report; printed
  // with the summary when `final`.
  void report(bool final);
  // load, steps, evaluations, saves, report; the result of the steps run.
  TrainResult run();

 private:
  void record_step(int it, const StepStats& s, double t0, double tp0, double tp1, double to0, double to1,
                   double step_tokens);
  void log_step(int it, const StepOutcome& out, double dt, double step_tokens);
  [[noreturn]] void stop_nonfinite(int it, double loss, double norm);
  StopReason stop_after(int it, const StepOutcome& out) const;
  void finish();
  void commit_save(bool finish);
  void record_checkpoints();

  const TrainOptions& o_;
  ProcessMesh& mesh_;
  BatchSource data_;
  std::unique_ptr<PipelineEngine<T>> engine_;
  Buffer tokens_, targets_;
  StepBatch batch_;
  StepFlops flops_;
  float dloss_ = 0;
  TrainLog log_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<CheckpointWriter> writer_;
  FaultInjection fault_;
  RunMeasurements meas_;
  TrainResult r_;
  double t_start_ = 0;
  double verify_s_ = 0;  // checking the --load checkpoint (rank's own share of the checksums)
  int last_saved_ = -1;
};

TrainResult train(const TrainOptions& o, ProcessMesh& mesh);

}  // namespace meshtrain
