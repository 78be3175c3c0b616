// Memory model: bytes per category on the most loaded rank of a config.
//
// It counts what the engine allocates (parallel/pipeline_engine.cc,
// parallel/sharded_state.cc, train/trainer.cc) from the same descriptions;
// tests/parallel holds every configuration of the parallelism test matrix
// against the engine's measured per-rank peaks (tests/parallel/README.md).
//
// Per pipeline stage s (tensor- and data-parallel ranks of a stage hold the
// same):
//   parameters, gradients, optimizer: Layout::build(model, config, 0, s)
//     (its blocks those of stage s: stage_layers.h)
//     .state_bytes(zero stage, bf16) -- flat buffers, padding included.
//     Equal to the engine's bytes.
//   activations: the peak over the Schedule's walk of stage s of the stashes
//     of the (micro-batch, chunk) pairs in flight (forward done, backward not
//     yet), each chunk stashing block_stash() per block of its own count
//     (chunks may differ, and hold none: stage_layers.h) plus head_stash()
//     where it holds the head, and a chunk of the head alone its received
//     input (activations.h); plus the token ids and targets
//     of every micro-batch of the step (embedding_stash() x micro-batches);
//     plus, counted once, rank_working_set(). Each list is counted as
//     allocated: allocated_bytes(), every tensor 64-byte aligned. With
//     sequence parallelism the LayerNorm outputs are stashed as this rank's
//     sequence shard ([N/tp, h]) and gathered again in backward, as the
//     engine and Megatron-LM do. Without flash
//     attention (cost model only; the engine's attention is always tiled)
//     each stashed block also keeps its softmax probabilities (b x heads/tp
//     x s^2 elements; dropped by selective recompute), and a block's
//     backward holds the probabilities and their gradient.
//   comm_buffers: peak_comm_buffer_bytes(): the engine's buffers walked over
//     stage s's actions.
//   workspace: the system's reserved bytes (runtime, library workspaces,
//     communicators) + its fragmentation fraction of activations and buffers
//     (the engine allocates nothing in this category: with a system of no
//     reserve and no fragmentation both are 0).
// The stage with the largest total is reported; a config fits when that
// total is at most the device's memory. With an even split only stage 0
// (embedding, deepest warm-up) and stage pp-1 (head) are computed: every
// middle stage holds what stage 0 holds minus the embedding and has fewer
// micro-batches in flight. With uneven stages (stage_layers.h) stage 1 is
// computed too: the middle stages run more or fewer layers than the first,
// and stage 1 has the most micro-batches in flight of them.
#pragma once

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/perf_cache.h"
#include "meshtrain/perf/perf_options.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::perf {

struct MemoryBytes {
  double parameters = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double comm_buffers = 0;
  double workspace = 0;
  double fragmentation = 0;  // the part of workspace the caching allocator holds beyond its live blocks
  double total() const { return parameters + gradients + optimizer + activations + comm_buffers + workspace; }
  // What must be allocated at once where a caching allocator frees its
  // cached blocks and retries before it reports out of memory.
  double required() const { return total() - fragmentation; }
};

// How far above the published peak this model's memory prediction has
// been at most: `validate` on the published runs that report their peak
// (docs/PERFORMANCE-MODEL.md, "Peak memory": every such row between -17.6%
// and +2.9% of the published figure; `Validate.MemoryOverPredictionIsBounded`
// keeps the bound true). A layout predicted above the capacity by less than
// this is within the model's error: it may fit.
constexpr double kMemoryOverPrediction = 0.03;
// The median of the same errors: the model is 12.8% under the published
// peak (the allocator's cache and workspaces it does not name). A layout
// whose memory, as published figures would show it, still fits leaves
// this headroom: needed <= capacity x (1 - kMemoryUnderPrediction).
constexpr double kMemoryUnderPrediction = 0.128;

struct MemoryEstimate {
  MemoryBytes worst;     // the most loaded stage
  int worst_stage = 0;
  double capacity = 0;   // the device's memory
  bool allocator_retries = false;  // PerfOptions::allocator_retries
  // What must fit: the total, or what is live where the allocator retries.
  double needed() const { return allocator_retries ? worst.required() : worst.total(); }
  bool fits() const { return needed() <= capacity; }
  // Over the capacity by less than the model's over-prediction: a run may
  // still fit. The planner keeps to fits(); `validate` does not count a
  // published run that is tight as one the model says does not fit.
  bool tight() const { return !fits() && needed() <= capacity * (1 + kMemoryOverPrediction); }
  // Fits with the model's median under-prediction to spare; `plan` warns
  // when its best layout does not. (Planning published runs' blank knobs
  // to it instead of to the fastest layout that fits was tried and dropped:
  // docs/PERFORMANCE-MODEL.md, "Peak memory where published".)
  bool headroom() const { return needed() <= capacity * (1 - kMemoryUnderPrediction); }
};

// A CP layout (p.cp > 1) is priced through its cost view
// (context_parallel.h): per-token memory is one CP rank's share, ZeRO state
// is sharded over DP x CP, and each block adds the K and V chunks its ring
// attention receives.
//
// Memory of stage s alone.
// `o` describes the framework (perf_options.h): its ZeRO runtime and, with
// o.op_level_selective, what selective recompute keeps (op_level_stash());
// the default is the engine's.
MemoryBytes stage_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, int stage,
                         PerfCache& cache, const PerfOptions& o = {});

// The config must be valid (validate(m, p)).
MemoryEstimate estimate_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s,
                               PerfCache& cache, const PerfOptions& o = {});

// What one block stashes under op-level selective activation checkpointing
// (PerfOptions::op_level_selective), in bytes as allocated: its input, the
// outputs of the 1st, 3rd, ... of its matmuls in execution order (q, k, v,
// output projection, then w1, w3, w2 gated or fc1, fc2 plain: q, v, w1 and
// w2 gated; q, v, fc1 plain), and attention's output and log-sum-exp.
double op_level_stash_bytes(const ModelConfig& m, const ParallelConfig& p);

// Most bytes of stashed activations stage s holds at once when the stash of
// one micro-batch through chunk c takes chunk_bytes[c]: a walk of the
// schedule. For long schedules the walk covers enough micro-batches to reach
// the steady state, which repeats the same pattern.
double peak_stash_bytes(ScheduleKind kind, int pp, int vpp, int num_micro_batches, int stage,
                        const std::vector<double>& chunk_bytes, PerfCache& cache);

// Most bytes of communication buffers stage `stage` holds at once during a
// training step, walking its action list as the engine runs it:
//   pipeline (pp > 1): a forward's output (b x s/tp-if-SP x h elements) from
//     the start of its forward (before the embedding's gathered weights)
//     until its send; a received output gradient from its
//     receive until its backward's send (or the end of the backward on the
//     first virtual stage); the head's input gradient, copied out of the
//     stash, for its send;
//   ZeRO-3: each unit's gathered weights during its forward and backward
//     (the embedding's word and position units together; the head's final
//     LayerNorm and word matrix together), and those of the unit the pass
//     uses next, gathered ahead (the engine prefetches one: the next unit
//     of the forward, the previous block in the backward);
//   ZeRO-2/3: each unit's full fp32 gradient from the start of its backward;
//     then its reduce-scatter, holding that gradient and the fp32 shard it
//     receives, in flight until two newer ones are posted (the engine bounds
//     the reductions in flight to two) or the step ends.
// Every send is taken to complete when it is posted. MPI decides when a
// non-blocking send completes and the engine frees its buffer at the next
// completion test, so with pp > 1 the engine holds at least this, more by
// the buffers of sends still in flight; with pp = 1 exactly this.
// full_walk: walk every micro-batch of the step (tests), not only enough to
// reach the steady state. A framework's ZeRO runtime `z` other than the
// engine's caps the gathered weights at z.gather_elements (and gathers
// z.prefetch_units units ahead), each gradient held and
// reduced at z.reduce_bucket_elements, in the model dtype where it says so.
// A CP layout must be passed as its cost view (stage_memory does so).
double peak_comm_buffer_bytes(const ModelConfig& m, const ParallelConfig& p, int stage, PerfCache& cache,
                              bool full_walk = false, const ZeroRuntime& z = {});

}  // namespace meshtrain::perf
