// The run report (--report FILE, JSON): the resolved configuration, every
// iteration's loss, step time, gradient norm and learning rate, throughput,
// FLOPs, the most loaded rank's memory peaks and every rank's measurements
// (measure/run_report.h), the pipeline actions of a few iterations per stage
// (measurements.ranks[].timeline) and the memory model's prediction of the
// most loaded rank ("prediction"). Written atomically by rank 0 at each checkpoint
// and at exit; a resumed run's report has `resumed_from_iteration` and lists
// the iterations it ran (`first_iteration` onwards).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/train/train_options.h"

namespace meshtrain {

struct TrainResult {
  std::vector<double> losses;      // training loss per iteration this run ran
  std::vector<double> step_times_s;
  std::vector<double> grad_norms;
  std::vector<double> lrs;
  std::vector<std::pair<int, double>> val_losses;  // (iteration, loss)
  double tokens_per_s = 0;         // median over iterations after the first
  double tokens_per_step = 0;      // consumed, counted from the batches
  int first_iteration = 0;         // iterations before it came from --load
  int resumed_from_iteration = -1; // -1: not resumed
  int skipped_steps = 0;           // non-finite steps skipped (counted over the whole run, resumes included)
  std::string stop_reason = "finished";
  std::vector<nlohmann::json> checkpoints;  // one record per save
  nlohmann::json load;                      // --load: path, iteration, verify_s, load_s
};

// What the measurements cover: this rank's per-step records and the
// training steps' communication.
struct RunMeasurements {
  std::vector<StepRecord> records;
  std::vector<double> consumed;  // tokens of each step, summed over the world
  CommStats train_comm;
  // The pipeline actions of the first kTimelineIterations steady iterations
  // (timeline_iteration_json); recorded on the TP and DP rank 0 of a stage.
  std::vector<nlohmann::json> timeline;
};

// Throughput and consumed tokens per step of `r` from its records.
void summarize_throughput(TrainResult& r, const RunMeasurements& m);

// Collective over the world: gathers every rank's measurements and memory
// peaks; rank 0 returns the report (other ranks: null). The summary line and
// table are printed on rank 0 when `print`.
nlohmann::json build_run_report(const TrainOptions& o, const TrainResult& r, const RunMeasurements& m,
                                ProcessMesh& mesh, bool print);

}  // namespace meshtrain
