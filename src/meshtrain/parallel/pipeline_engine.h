// PipelineEngine: runs one training (or evaluation) step of this rank's
// model chunks by walking the Schedule's action list for its pipeline stage.
// Everything it allocates comes from the Layout (weights, gradients,
// optimizer state, via ShardedState) and from activations.h (stashes and
// working sets), so the performance model counts what the engine holds.
//
// Activations move between stages with MPI point-to-point calls: sends are
// non-blocking (their buffers live until completion), receives block.
// Each chunk runs its own number of blocks (Layout::chunk_layers, which may
// be 0: a chunk of the embedding alone writes its output straight into the
// send buffer, a chunk of the head alone keeps its received input in its
// stash for the head).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/model/activations.h"
#include "meshtrain/model/block.h"
#include "meshtrain/model/embedding_layer.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/model/lm_head.h"
#include "meshtrain/parallel/schedule.h"
#include "meshtrain/parallel/sharded_state.h"

namespace meshtrain {

// The tokens of one step on this rank: micro-batch i's inputs and targets
// are [N] each at tokens + i*N, targets + i*N (N = micro_batch x seq).
struct StepBatch {
  const int32_t* tokens = nullptr;
  const int32_t* targets = nullptr;
  int num_micro_batches = 0;
};

// Timings and counts of one step, as this rank saw them.
struct StepStats {
  double loss_sum = 0;        // sum of per-token losses (last stage, TP rank 0; else 0)
  int64_t loss_tokens = 0;    // tokens those losses cover
  double compute_s = 0;       // forward + backward (incl. TP collectives)
  double idle_s = 0;          // blocked in pipeline receives
  double forward_s = 0, backward_s = 0;
  // Every action of the stage's list this step executed, in order, with its
  // start and end (now_s clock): forward/backward span the chunk's compute;
  // a receive spans the blocking wait; a send spans posting it (the
  // transfer itself completes later, in the background).
  std::vector<ActionTime> actions;
};

template <class T>
class PipelineEngine {
 public:
  // prefetch: ZeRO-3 gathers one unit ahead (gather_ahead).
  PipelineEngine(const ModelConfig& m, const ParallelConfig& p, ProcessMesh& mesh, uint64_t seed, bool prefetch = true);
  ~PipelineEngine();

  // Forward and backward of every micro-batch; gradients accumulate in the
  // sharded state and are fully reduced on return (finish_reductions).
  StepStats train_step(const StepBatch& batch, float dloss);
  // Forward only (no gradients); returns the loss sum as train_step does.
  StepStats eval_step(const StepBatch& batch);

  ShardedState<T>& state() { return *state_; }
  const Layout& layout() const { return layout_; }
  const Schedule& schedule() const { return schedule_; }

 private:
  struct ChunkStash;
  void forward(int mb, int c, const StepBatch& batch, bool train, StepStats& st);
  // The head of micro-batch mb on input x ([Ns, h]): loss, and in training
  // its gradients and the input gradient (cs.dx), in one pass.
  void head_forward(ChunkStash& cs, const T* x, int mb, const StepBatch& batch, bool train, StepStats& st);
  void backward(int mb, int c, const StepBatch& batch, StepStats& st);
  // ZeRO-3: gathers unit k of chunk c's gather order and posts the gather of
  // the unit the pass uses next (the next one forward; the previous block in
  // the backward, which runs the blocks in reverse), so that it arrives while
  // unit k computes.
  void gather_ahead(int c, size_t k, bool backward);
  void run(const StepBatch& batch, bool train, float dloss, StepStats& st);
  void begin_step(float dloss);
  void execute(const Action& a, const StepBatch& batch, bool train, StepStats& st);
  void recv_forward(const Action& a, StepStats& st);
  void send_forward(const Action& a, bool train);
  void recv_backward(const Action& a, StepStats& st);
  void send_backward(const Action& a);
  // Elements of one pipeline-boundary activation or gradient ([Ns, h]).
  int64_t boundary_count() const { return bd_.Ns() * bd_.h; }
  ChunkStash& stash(int mb, int c);
  int peer_rank(int c, bool next) const;  // world rank of the neighbouring virtual stage
  int tag(int mb, int c, bool grad) const;
  void complete_sends(bool all);

  ModelConfig m_;
  ParallelConfig p_;
  ProcessMesh& mesh_;
  Layout layout_;
  Schedule schedule_;
  std::unique_ptr<ShardedState<T>> state_;
  TpContext tp_;
  BlockDims bd_;
  EmbeddingDims ed_;
  HeadDims hd_;
  Buffer work_;      // working set (activations.h: rank_working_set)
  TensorMap work_map_;
  std::vector<TensorSpec> block_tensors_;  // a block's stash without recompute: what must be bound
  BlockScratch<T> scratch_;
  HeadScratch<T> head_scratch_;
  T* discard_ = nullptr;  // [Ns, h] outputs nobody reads (recompute, head input)
  std::vector<std::unique_ptr<ChunkStash>> stashes_;  // [mb * vpp + c]
  struct Send {
    Request req;
    Buffer buf;
  };
  std::vector<Send> sends_;
  // Per chunk: the units its forward gathers, in order (embedding, blocks,
  // head), and the position of its first block in that order.
  std::vector<std::vector<const Unit*>> gather_order_;
  std::vector<size_t> first_block_;
  bool prefetch_ = true;
  std::vector<int> backward_count_;  // per unit: backward contributions so far this step
  std::vector<int> expected_;        // per unit: contributions per step
  float dloss_ = 0;
};

}  // namespace meshtrain
