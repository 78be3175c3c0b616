// Pipeline simulation: walks a Schedule's action lists with a duration per
// action and returns when each stage finishes and where its time went. A
// forward or backward of (micro-batch, chunk) on a stage takes the given
// duration; a send's data arrives `transfer` seconds later, and the sender
// either goes on at once (non-blocking, the engine's semantics) or, with
// `blocking_sends`, waits for the transfer to complete (synchronous
// point-to-point as Megatron-LM runs it without --overlap-p2p-comm); a
// receive waits for the arrival. So the
// bubble, uneven first and last stages and interleaving all come out of the
// walk rather than from a formula.
#pragma once

#include <vector>

#include "meshtrain/parallel/schedule.h"

namespace meshtrain::perf {

struct PipelineCosts {
  int pp = 1;
  int vpp = 1;
  std::vector<double> forward_s;   // [stage * vpp + chunk], one micro-batch
  std::vector<double> backward_s;  // [stage * vpp + chunk], one micro-batch
  std::vector<double> transfer_s;  // [stage]: stage -> (stage + 1) % pp, either direction
  bool blocking_sends = false;

  double forward(int stage, int chunk) const { return forward_s[stage * vpp + chunk]; }
  double backward(int stage, int chunk) const { return backward_s[stage * vpp + chunk]; }
};

struct StageTimeline {
  double finish_s = 0;         // end of the stage's last action
  double busy_s = 0;           // sum of its forward and backward durations
  double transfer_wait_s = 0;  // waiting for data in transit, or for a blocking send
  double bubble_s = 0;         // waiting for work upstream or downstream
  std::vector<double> last_backward_start_s;  // per chunk
  std::vector<double> last_backward_end_s;    // per chunk
};

struct PipelineTimeline {
  std::vector<StageTimeline> stages;
  double makespan_s = 0;
};

// Throws std::logic_error if the schedule deadlocks (a bug, not bad input).
PipelineTimeline simulate(const Schedule& schedule, const PipelineCosts& costs);

// a + (b - a) * t, field by field (the timelines must have the same shape).
PipelineTimeline extrapolate(const PipelineTimeline& a, const PipelineTimeline& b, double t);

}  // namespace meshtrain::perf
