// Time sharing: the step of ranks that outnumber their node's CPU cores
// (SystemSpec::cores_per_node < ranks per node, e.g. 8 ranks on 2 cores).
//
// Each rank's compute (kernels priced at one core's rates by the time
// model, and the optimizer) is CPU work, and the node's cores run the work
// of all its ranks: the operating system hands a core to whichever rank is
// runnable, so a rank idle in a pipeline bubble gives its core to another
// stage instead of wasting it. Communication is not hidden behind compute
// here: no core is free to run it, and MPI's non-blocking collectives and
// sends advance only inside MPI calls (there is no progress thread), so a
// collective started under compute completes at the next wait. Its time is
// what `bench comm` measured with every rank of the node communicating at
// once, which already includes the time-sharing of the copies.
//
//   step = max(pipeline step with a core per rank,
//              ranks_per_node / cores x mean over stages of a rank's compute
//              + the most any stage's rank spends communicating)
//
// Only the second term is new: it replaces the pipeline simulation's
// bubble (idle ranks lend their core) and overlap (none) where the cores,
// not the critical path, bound the step.
#pragma once

#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/perf/time_model.h"

namespace meshtrain::perf {

struct TimeShared {
  double step_s = 0;
  double compute_s = 0, optimizer_s = 0;           // the cores' share of the ranks' work
  double tp_s = 0, pp_s = 0, dp_s = 0;             // the most communicating stage's
};

// Ranks of `num_gpus` that share one node (the node is full before the next).
int ranks_per_node(const SystemSpec& s, int num_gpus);

// The time-shared step of `costs` (zero when the node is not oversubscribed).
TimeShared time_shared_step(const StepCosts& costs, const ParallelConfig& p, const SystemSpec& s, int num_gpus);

}  // namespace meshtrain::perf
