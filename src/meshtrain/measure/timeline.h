// A training step's pipeline actions for the trace and the run report.
//
// The engine records every action of its stage's Schedule list it executes
// with its start and end (StepStats::actions). compute_spans keeps the
// compute actions (forward, backward) as one span each, named after the
// action, with the micro-batch and model chunk as arguments; the
// point-to-point actions appear in the trace as communication calls.
// timeline_iteration_json lists every action of one iteration for the run
// report (its pipeline timeline), at most kTimelineIterations iterations per
// stage.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/parallel/schedule.h"

namespace meshtrain {

struct ComputeSpan {
  std::string name;     // "forward" or "backward"
  double start_s = 0, end_s = 0;
  nlohmann::json args;  // {"action": "F0.1", "micro_batch": 0, "chunk": 1}
};

// The forward and backward actions of `actions`, in order.
std::vector<ComputeSpan> compute_spans(const std::vector<ActionTime>& actions);

inline constexpr int kTimelineIterations = 4;

// {"iteration": iteration, "actions": [{"kind": action_kind_name, "micro_batch",
// "chunk", "start_s", "end_s"}, ...]} in execution order, times in seconds
// after origin_s (the rank's train_step start).
nlohmann::json timeline_iteration_json(int iteration, double origin_s, const std::vector<ActionTime>& actions);

}  // namespace meshtrain
