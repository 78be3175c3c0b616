// Where a tune's trials come from.
//   LaunchedTrials  runs each trial as its own job: the launcher command
//                   ("mpirun ... -np {ranks}", "srun", or any template; {ranks}
//                   is replaced) followed by `meshtrain train` with the layout's
//                   flags, `--train-iters N --quiet --report FILE` and the extra
//                   flags. The job runs in its own process group with a
//                   time-out; its report gives tokens/s (the median over the
//                   iterations after the first, which is warm-up) and the
//                   tracked peak memory. A job that says "out of memory" (or
//                   bad_alloc) is "oom"; any other non-zero exit or a missing
//                   report is "failed" with the exit code and the log's last
//                   error line; a killed one "timeout".
//                   SIGTERM, SIGINT or SIGHUP to the tune ends the job's
//                   process group (measure/child_group.h) and throws
//                   TrialsStopped: nothing is recorded for the trial in
//                   flight, and `meshtrain tune` exits 128 + the signal.
//   ReplayTrials    answers from measurements recorded earlier (results files
//                   of `tune`, or sweep.json of `sweep`), for comparing
//                   strategies without the machine time: a layout measured k
//                   times answers with one of its k figures, drawn with the
//                   seed, so repeats see the recorded noise. The truth of a
//                   layout is the median of its figures.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "meshtrain/tune/trial.h"
#include "meshtrain/tune/tune_space.h"

namespace meshtrain::tune {

struct TrialsStopped {
  int signal = 0;
};

class TrialSource {
 public:
  virtual ~TrialSource() = default;
  // config, key, status, reason and the figures; the tuner adds the rest.
  virtual Trial run(const TunePoint& p) = 0;
};

struct LaunchSpecForTrials {
  std::string model;                 // --model as given
  int num_layers = 0;                // for --num-layers-per-virtual-pipeline-stage
  int ranks = 1;
  int trial_iters = 4;
  std::string launcher = "mpirun --oversubscribe --allow-run-as-root -np {ranks}";
  std::string exe;                   // the meshtrain binary
  std::vector<std::string> extra;    // further train flags
  double timeout_s = 600;
  std::string dir;                   // reports and logs: DIR/<n>.json, DIR/<n>.log
};

class LaunchedTrials : public TrialSource {
 public:
  explicit LaunchedTrials(LaunchSpecForTrials s);
  ~LaunchedTrials() override;
  Trial run(const TunePoint& p) override;
  std::string command(const TunePoint& p, const std::string& report) const;

 private:
  LaunchSpecForTrials s_;
  int n_ = 0;
};

class ReplayTrials : public TrialSource {
 public:
  // Throws Error when a file is neither format.
  ReplayTrials(const std::vector<std::string>& files, uint64_t seed, int global_batch_size);
  Trial run(const TunePoint& p) override;
  // The median recorded tokens/s of a layout; 0 when it never ran ok.
  double truth(const std::string& key) const;
  bool has(const std::string& key) const { return recorded_.count(key) > 0; }
  // Every recorded trial, by layout key.
  std::vector<Trial> all() const;
  // The spread of a layout's figures: (max - min) / median.
  double spread(const std::string& key) const;

 private:
  std::map<std::string, std::vector<Trial>> recorded_;
  std::mt19937_64 rng_;
};

}  // namespace meshtrain::tune
