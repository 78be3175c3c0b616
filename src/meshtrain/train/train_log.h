// What a run tells people while it trains (rank 0 only): one console line
// per logged iteration (with a progress bar and ETA on a terminal), the
// validation lines, and --log-file: the same metrics appended as JSON lines,
// flushed at every logged iteration so that a killed run keeps them. A
// resumed run appends to the same file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "meshtrain/train/train_options.h"

namespace meshtrain {

struct IterationMetrics {
  int iteration = 0;  // 1-based: the number of completed steps
  double loss = 0, lr = 0, grad_norm = 0;
  double step_time_s = 0, tokens_per_s = 0, gflops_per_rank = 0;
  double peak_bytes = 0;
  int skipped_steps = 0;  // non-finite steps skipped so far
  bool skipped = false;   // this step was skipped
};

class TrainLog {
 public:
  TrainLog(const TrainOptions& o, bool rank0);  // opens --log-file for appending
  ~TrainLog();
  TrainLog(const TrainLog&) = delete;
  TrainLog& operator=(const TrainLog&) = delete;

  void iteration(const IterationMetrics& m);
  void progress(int done, double elapsed_s, int first);  // the terminal's bar
  void validation(int iteration, double loss);
  void event(const std::string& line);  // a line of its own (checkpoint, stop)
  void end_progress();

 private:
  const TrainOptions& o_;
  bool rank0_, tty_;
  std::FILE* file_ = nullptr;
};

}  // namespace meshtrain
