// predict: what one config costs on one system, without running it. Memory
// from the memory model, per-action durations from the time model, the
// step from simulating the config's Schedule with those durations, then the
// step-end work (gradient reduction, optimizer, parameter gather) per stage.
// The step ends when the slowest stage ends, or, where a node's ranks
// outnumber its cores, when the cores have done every rank's work
// (time_sharing.h) if that is later; its time is split into the categories
// of `time_s`, which add up to `step_time_s`.
//
// Serializes to the `meshtrain predict --json` contract (docs/ARCHITECTURE.md).
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/perf_cache.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/perf/time_model.h"

namespace meshtrain::perf {

struct TimeBreakdown {
  double compute = 0;    // forward, backward and recompute kernels
  double tp_comm = 0;    // exposed tensor-parallel collectives
  double pp_comm = 0;    // waiting on pipeline transfers in transit, tied-embedding sync
  double dp_comm = 0;    // exposed data-parallel / ZeRO collectives
  double bubble = 0;     // pipeline idle
  double optimizer = 0;  // the optimizer step
  double cp_comm = 0;    // exposed context-parallel K/V exchange
  double total() const { return compute + tp_comm + pp_comm + dp_comm + bubble + optimizer + cp_comm; }
};

struct CommBytes {
  double tp = 0, pp = 0, dp = 0, cp = 0;  // bytes one rank sends per step (most loaded stage per dimension)
};

struct Prediction {
  bool fits = false;
  bool tight = false;          // does not fit by less than the model's error (MemoryEstimate::tight)
  bool headroom = false;       // fits with the model's median under-prediction to spare (MemoryEstimate::headroom)
  MemoryBytes memory;          // most loaded rank
  int memory_stage = 0;        // its pipeline stage
  double memory_capacity = 0;  // device bytes
  double step_time_s = 0;
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double bubble_fraction = 0;  // pipeline idle / pipeline time, on the critical stage
  int critical_stage = 0;      // the stage that ends the step
  TimeBreakdown time;
  CommBytes comm_bytes;
};

// Throws Error when the config is invalid for `num_gpus` ranks (the message
// names the failed constraint). `cache` may be null.
Prediction predict(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, int num_gpus,
                   const PerfOptions& o = {}, PerfCache* cache = nullptr);

// The step's pipeline timeline: the simulation of p.schedule with these
// costs. Schedules of at most `max_exact_steps` chunk-micro-batches per
// stage x stages are walked in full. Longer ones are walked at four shorter
// lengths past the warm-up (m1, m1 + k, m1 + 2k, m1 + 3k; k = pp when
// interleaved, else 1) and at 2 m1; when the step time grows by the same
// amount per k micro-batches at all of them (the steady state), every field
// is extrapolated linearly to m, otherwise m1 doubles, up to the full walk.
// Finish times are then exact; how waiting splits between transfers and
// bubble may differ from the full walk by a small fraction of the step.
PipelineTimeline pipeline_timeline(ScheduleKind kind, int num_micro_batches, const PipelineCosts& costs,
                                   PerfCache& cache, int64_t max_exact_steps = 1 << 16);

void to_json(nlohmann::json& j, const Prediction& p);
void to_json(nlohmann::json& j, const MemoryBytes& b);

}  // namespace meshtrain::perf
