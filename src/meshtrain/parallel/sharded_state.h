// ShardedState: a rank's parameters, gradients and optimizer state, sharded
// over the data-parallel group as the ZeRO stage says (Rajbhandari et al.
// 2020), on the flat buffers that Layout describes. With hybrid sharding
// (ParallelConfig::zero_shard, stages 1-3) the group is a block of
// consecutive DP ranks (ProcessMesh::zero_shard_group()) and every reduced
// shard is then all-reduced over its replicas in the other blocks
// (zero_replica_group(); stages 2, 3: non-blocking, two in flight, beside
// the reduce-scatters); the first replica counts it in the gradient norm
// and writes it to checkpoints.
//
//   stage  weights (T)   grads (fp32)        master + Adam m, v (fp32)
//   0      full          full, all-reduced   full (every DP rank updates all)
//   1      full          full, reduce-scat.  own shard; updated weights all-gathered
//   2      full          own shard only      own shard; updated weights all-gathered
//   3      own shard     own shard only      own shard; each unit's weights
//                                            all-gathered before its forward and
//                                            backward, freed after
//
// Stage 3 can gather a unit ahead of its use (prefetch(): a non-blocking
// all-gather into the unit's buffer, which gather() then waits for), so that
// the next unit's weights arrive while the current one computes, as FSDP's
// forward and backward prefetch do.
//
// A unit (Layout) is the bucket: its gradient reduction is posted, non-blocking,
// as soon as its backward of the step's last micro-batch is done (stages 0, 1)
// or of every micro-batch (stages 2, 3, whose full-size gradient exists only
// while the unit's backward runs), so it overlaps the remaining backward.
//
// Before the reduction over DP, the gradients of TP-replicated parameters fed
// by sequence shards are all-reduced over TP; after it, the two copies of the
// tied word embedding (first and last stage) are all-reduced over the
// embedding group. fp32 mode keeps no separate master copy: the weights are
// the master.
#pragma once

#include <cstdint>
#include <vector>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/optim/adamw.h"

namespace meshtrain {

template <class T>
class ShardedState {
 public:
  ShardedState(const Layout& layout, const ParallelConfig& p, ProcessMesh& mesh, uint64_t seed);

  // Weights of unit u for compute. Stage 3: valid between gather(u) and
  // release(u); other stages: always.
  const T* weights(const Unit& u) const;
  void gather(const Unit& u);
  // Stage 3: posts unit u's all-gather without waiting (nothing if it is
  // gathered or posted already); gather(u) completes it.
  void prefetch(const Unit& u);
  void release(const Unit& u);

  // Gradient of unit u to accumulate into during its backward. Stages 2, 3:
  // valid between begin_backward(u) and end_backward(u).
  float* grads(const Unit& u);
  void begin_backward(const Unit& u);
  // After unit u's backward of one micro-batch; `last` = the step's last.
  void end_backward(const Unit& u, bool last);
  // Waits for every posted reduction; the reduced gradients are then ready.
  void finish_reductions();

  // Sum of squares of this rank's share of the reduced gradient (each element
  // of the model counted by exactly one rank in the world).
  double grad_sq_norm_local() const;
  // AdamW on this rank's update range, then the updated weights are
  // propagated (written to T, all-gathered for stages 1 and 2). Zeroes the
  // gradients for the next step.
  void step(float lr, float grad_scale, int t, const AdamWConfig& c);
  // Zeroes the gradients without an update (a skipped non-finite step).
  void discard_gradients();
  // The first parameter whose reduced gradient in this rank's update range
  // holds a non-finite value, or nullptr.
  const ParamSpec* first_nonfinite_grad() const;

  // Checkpoint access (checkpoint/). This rank's update range of one
  // parameter, with its optimizer state. [write_begin, write_begin +
  // write_length) within it: the elements of which this rank writes the one
  // copy a checkpoint stores (its ZeRO shard; under stage 0, where every DP
  // rank updates everything, the d-th 1/dp of the range, so that all ranks
  // write in parallel; TP rank 0 alone for replicated tensors; nothing of
  // the tied copy of the word embedding).
  struct OptimizerShard {
    const ParamSpec* spec;
    int64_t begin, length;  // elements [begin, begin + length) of the local slice
    T* weights;             // the working weights of those elements
    float* master;          // fp32 master (bf16 mode); nullptr: the weights are the master
    float* m;
    float* v;
    int64_t write_begin, write_length;
  };
  std::vector<OptimizerShard> optimizer_shards();
  // The working weights of the whole local slice of `s` (stages 0-2 hold
  // every weight of the layout); nullptr under stage 3.
  T* slice_weights(const ParamSpec& s);

  // The value of parameter `s` at local element i, from the master copy
  // where this rank holds it, else from the weights (tests).
  float weight_value(const ParamSpec& s, int64_t i) const;
  // Initial value of parameter `s` at local element i.
  static float init_value(const ParamSpec& s, int64_t i, uint64_t seed);
  const Layout& layout() const { return layout_; }

 private:
  struct Segment {  // one parameter's intersection with a unit's update range
    int64_t opt_offset, length;  // in the optimizer arrays
    int64_t flat_offset;         // in the flat layout
    bool decay;
    bool counted;                // counted by grad_sq_norm_local
    const ParamSpec* spec;
    int unit;
  };
  int64_t update_begin(const Unit& u) const;  // flat offset of its update range
  int64_t update_size(const Unit& u) const;
  float* reduced_grads(const Unit& u) const;  // this rank's update range
  T* update_weights(const Unit& u) const;     // weights of the update range
  void reduce_sequence_partials(const Unit& u, float* unit_grads);
  void init_weights();

  const Layout& layout_;
  ParallelConfig p_;
  ProcessMesh& mesh_;
  uint64_t seed_;
  int dp_rank_;  // in the ZeRO shard group (the DP group unless sharding is hybrid)
  int shards_;   // ranks the state is sharded over: ParallelConfig::shard_size()
  std::vector<int64_t> opt_offset_;  // per unit: start in optimizer arrays
  std::vector<int64_t> shard_offset_;  // per unit: start in shard arrays
  std::vector<Segment> segments_;
  Buffer weights_, grads_, master_, m_, v_;
  std::vector<Buffer> unit_gather_;  // stage 3, per unit (empty when released)
  std::vector<Request> unit_gathering_;  // stage 3, per unit: its prefetch, until gather() waits for it
  std::vector<Buffer> unit_grads_;   // stages 2, 3, per unit during its backward
  struct Pending {
    Request req;
    int unit;
    Buffer full;   // stages 2, 3: the unit's gradient being reduced
    Buffer shard;  // stages 2, 3: its reduced shard, to add into grads_
  };
  std::vector<Pending> pending_;
  // Stages 2, 3 with hybrid sharding: reduced shards being summed over their
  // replicas (non-blocking all-reduce), at most two in flight.
  std::vector<Pending> replicating_;
  // Stage 3: allocates unit u's gathered weights in g with this rank's shard
  // in its place, for an in-place all-gather.
  T* gather_buffer(const Unit& u, Buffer& g);
  // Waits for a posted reduction and adds its shard (stages 2, 3); with
  // hybrid sharding posts the shard's all-reduce over its replicas instead
  // (moving o to replicating_), which finish_replicated() completes.
  void complete(Pending& o);
  void finish_replicated(Pending& o);
  // Reductions and replica all-reduces in flight at once, each (the memory
  // model's walk holds the same bound).
  static constexpr size_t kReductionsInFlight = 2;
  // Applies done() to the oldest of `queue` until kReductionsInFlight remain.
  void complete_oldest(std::vector<Pending>& queue, void (ShardedState::*done)(Pending&));
  // Adds a reduced shard into this rank's gradient shard (stages 2, 3).
  void add_shard(const Pending& o);
};

}  // namespace meshtrain
