// Memory model: bytes per category on the most loaded rank of a config.
//
// Per pipeline stage s (tensor-parallel ranks of a stage hold the same):
//   parameters, gradients, optimizer: Layout::build(model, config, 0, s)
//     .state_bytes(zero stage, bf16) -- flat buffers, padding included.
//   activations: the peak over the Schedule's walk of stage s of the stashes
//     of the (micro-batch, chunk) pairs in flight (forward done, backward not
//     yet), each chunk stashing block_stash() per block plus head_stash()
//     where it holds the head (activations.h); plus the token ids and targets
//     of every micro-batch of the step (embedding_stash() x micro-batches);
//     plus, counted once, rank_working_set(). Without flash attention each
//     stashed block also keeps its softmax probabilities (b x heads/tp x s^2
//     elements; dropped by selective recompute), and a block's backward
//     holds the probabilities and their gradient.
//   comm_buffers: with PP, receive and send buffers for one boundary
//     activation in each direction (4 x micro-batch x seq/tp-if-SP x hidden);
//     ZeRO-2/3 the full-precision gradient of the largest unit before it is
//     reduce-scattered; ZeRO-3 the gathered largest unit and its prefetch.
//   workspace: the system's reserved bytes (runtime, library workspaces,
//     communicators) + its fragmentation fraction of activations and buffers.
// The stage with the largest total is reported; a config fits when that
// total is at most the device's memory. Only stage 0 (embedding, deepest
// warm-up) and stage pp-1 (head) are computed: every middle stage holds what
// stage 0 holds minus the embedding and has fewer micro-batches in flight.
#pragma once

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/perf_cache.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::perf {

struct MemoryBytes {
  double parameters = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double comm_buffers = 0;
  double workspace = 0;
  double total() const { return parameters + gradients + optimizer + activations + comm_buffers + workspace; }
};

struct MemoryEstimate {
  MemoryBytes worst;     // the most loaded stage
  int worst_stage = 0;
  double capacity = 0;   // the device's memory
  bool fits() const { return worst.total() <= capacity; }
};

// Memory of stage s alone.
MemoryBytes stage_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, int stage,
                         PerfCache& cache);

// The config must be valid (validate(m, p)).
MemoryEstimate estimate_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s,
                               PerfCache& cache);

// Most bytes of stashed activations stage s holds at once when the stash of
// one micro-batch through chunk c takes chunk_bytes[c]: a walk of the
// schedule. For long schedules the walk covers enough micro-batches to reach
// the steady state, which repeats the same pattern.
double peak_stash_bytes(ScheduleKind kind, int pp, int vpp, int num_micro_batches, int stage,
                        const std::vector<double>& chunk_bytes, PerfCache& cache);

}  // namespace meshtrain::perf
