// The memory check before allocation: every rank asks the memory model
// (perf/memory_model.h, the engine's own allocations from the same Layout and
// Schedule) for its peak; the ranks of one node add theirs up and compare the
// sum with what the node can give (core/host_memory.h: MemAvailable, or the
// cgroup's limit minus its usage). Too much ends the run before the engine
// allocates anything, with one line naming the need, the limit, the largest
// item and what to change (`train --no-memory-check` skips the check).
#pragma once

#include <cstdint>
#include <string>

#include "meshtrain/core/host_memory.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/train/train_options.h"

namespace meshtrain {

// The engine's peak bytes on global rank `rank`, by category: the memory
// model for the rank's pipeline stage (no reserve, no fragmentation: the
// engine allocates exactly that). The options must be valid (check_options).
perf::MemoryBytes rank_peak_memory(const TrainOptions& o, int rank);

// Empty when `node_need` (the sum over the node's `ranks_on_node` ranks)
// fits in `available`, else the one-line reason: the need, the limit, the
// largest item of `worst_rank` (the most loaded rank on the node) and a hint.
std::string node_memory_verdict(const perf::MemoryBytes& node_need, const perf::MemoryBytes& worst_rank,
                                int ranks_on_node, const AvailableMemory& available, const TrainOptions& o);

// Collective over MPI_COMM_WORLD (after MPI_Init): throws Error with the
// verdict on every rank of a node whose ranks need more than it has.
void check_node_memory(const TrainOptions& o);

}  // namespace meshtrain
