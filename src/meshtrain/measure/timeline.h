// Forward and backward spans of a training step for the trace.
//
// The engine records every action of its stage's Schedule list it executes
// with its start and end (StepStats::actions). compute_spans keeps the
// compute actions (forward, backward) as one span each, named after the
// action, with the micro-batch and model chunk as arguments; the
// point-to-point actions appear in the trace as communication calls.
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

}  // namespace meshtrain
