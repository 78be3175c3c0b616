// The run report's measurements (docs/MEASUREMENT.md defines every figure).
//
// Each rank records what it saw during the training steps (RankRecord: per
// step timings, its communication statistics, its memory peaks, its share of
// the step's FLOPs). At the end of the run every rank serialises its record
// (rank_record_json), rank 0 gathers them (gather_strings) and aggregates
// them (aggregate_measurements):
//   "ranks":     one object per rank with its derived figures;
//   "aggregate": each figure over ranks as {min, median, max, min_rank,
//                max_rank}; communication per (group, op) likewise;
//   "theory":    the closed forms the measurements are held against
//                (pipeline bubble).
// summary_table() renders the aggregate for people.
//
// Steady state: per-step figures are medians over the iterations after the
// first (the first one pays for first-touch allocation and primitive
// creation), or over the only one; communication counts those iterations.
// The pipeline bubble of a rank in an iteration is 1 - compute / span, span
// being the longest train_step of any rank in that iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/comm_stats.h"
#include "meshtrain/core/format.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

// One training iteration as one rank saw it.
struct StepRecord {
  double time_s = 0;      // the whole iteration: data, pipeline step, norm all-reduce, optimizer
  double pipeline_s = 0;  // the engine's train_step (forward, backward, gradient reductions)
  double forward_s = 0, backward_s = 0, compute_s = 0;  // StepStats
  double idle_s = 0;      // StepStats.idle_s: blocked in pipeline receives
  double optimizer_s = 0; // AdamW and the ZeRO weight all-gathers
  int64_t loss_tokens = 0;   // this rank's StepStats.loss_tokens
  int64_t step_tokens = 0;   // loss_tokens summed over the world: the step's tokens
  // Kernel time and FLOPs inside the engine's train_step (kernels/kernel_clock.h).
  double matmul_s = 0, matmul_flops = 0;
  double attention_s = 0, attention_flops = 0;
};

struct RankRecord {
  int rank = 0;
  RankCoord coord;
  std::vector<StepRecord> steps;
  CommStats comm;              // the steady iterations' communication (evaluation excluded)
  int comm_steps = 1;          // iterations `comm` covers
  MemorySnapshot memory;       // MemoryTracker at the end of the run
  int64_t peak_rss_bytes = 0;  // process peak resident set
  StepFlops flops;             // this rank's share of one step's FLOPs (rank_step_flops)
  // The pipeline actions of up to kTimelineIterations iterations (timeline.h),
  // recorded by the TP and DP rank 0 of each stage: {"stage", "iterations":
  // [timeline_iteration_json, ...]}; null elsewhere.
  nlohmann::json timeline;
};

nlohmann::json rank_record_json(const RankRecord& r);

// This rank's share of a step of `step_tokens` tokens, by the convention of
// model/flops.h: its blocks (parallel/stage_layers.h, each / tp) and, on the
// last stage, the logits (/ tp), over the step's tokens / dp. The shares of
// all ranks add up to step_flops().
StepFlops rank_step_flops(const ModelConfig& m, const ParallelConfig& p, int pp_rank, double step_tokens);

// Pipeline bubble of the schedule on balanced stages: (p-1)/(m+p-1), divided
// by v for the interleaved schedule; 0 with one stage.
double theoretical_bubble_fraction(const ParallelConfig& p);

struct ReportContext {
  ModelConfig model;
  ParallelConfig parallel;
  int world_size = 1;
  double peak_tflops = 0;  // per rank; 0: MFU and HFU not reported
};

// Rank 0: the "measurements" object from every rank's rank_record_json.
nlohmann::json aggregate_measurements(const std::vector<nlohmann::json>& ranks, const ReportContext& ctx);

// The aggregate for people (rank 0 prints it at the end of `meshtrain train`).
std::string summary_table(const nlohmann::json& measurements);

// {min, median, max, min_rank, max_rank} of values[i] (rank i).
nlohmann::json spread(const std::vector<double>& values, const std::vector<int>& ranks);

}  // namespace meshtrain
