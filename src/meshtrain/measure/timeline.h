// Forward and backward spans of a training step for the trace, recovered
// without instrumenting the engine.
//
// The engine walks its stage's Schedule action list in order, and every
// recv/send action is one point-to-point call on the pp group, which the
// communicator reports (start, end) to its tracer. So the compute actions
// lying between two consecutive p2p actions ran between the end of the
// first call (a blocking receive) or its posting (a non-blocking send) and
// the start of the next. Compute actions with no p2p action between them
// (the last stage's forward and backward of one micro-batch, every action
// of a single-stage pipeline) cannot be told apart this way and come out as
// one span named after all of them ("forward+backward"). The span after the
// stage's last p2p action ends when train_step returns, so it also holds
// the wait for the data-parallel gradient reductions.
//
// An exact record needs a hook in the engine (a callback per executed
// action with its start and end); docs/MEASUREMENT.md describes it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/comm_tracer.h"
#include "meshtrain/parallel/schedule.h"

namespace meshtrain {

class TraceWriter;

struct TimedCall {
  double start_s = 0, end_s = 0;
  bool blocking = true;  // a receive: the caller waited until end_s
};

struct ComputeSpan {
  std::string name;     // "forward", "backward" or "forward+backward" ...
  double start_s = 0, end_s = 0;
  nlohmann::json args;  // {"actions": "F0.0 B0.0", "micro_batch": 0, "chunk": 0}
};

// The compute spans of one step of `actions` (this stage's list), given its
// p2p calls in the order they were made and the step's [t0, t1]. If the
// calls do not match the list's p2p actions one for one, a single span
// covers [t0, t1].
std::vector<ComputeSpan> compute_spans(const std::vector<Action>& actions, const std::vector<TimedCall>& p2p,
                                       double t0, double t1);

// A CommTracer that forwards every call to a TraceWriter (if any) and keeps
// the pp group's point-to-point calls of the current step for compute_spans.
class StepTracer : public CommTracer {
 public:
  explicit StepTracer(TraceWriter* writer) : writer_(writer) {}
  void on_comm(const CommEvent& e) override;
  // The pp calls recorded since the last take, in the order they were made.
  std::vector<TimedCall> take_p2p();

 private:
  TraceWriter* writer_;
  std::vector<TimedCall> p2p_;
};

}  // namespace meshtrain
