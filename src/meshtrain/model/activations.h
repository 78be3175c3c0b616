// Activations: what a model chunk stashes between its forward and backward
// pass of one micro-batch on one rank. Like Layout, a pure function of the
// configuration read by both the engine (which allocates its stash from
// these lists) and the memory model (which sums them over the micro-batches
// a schedule keeps in flight).
//
// Shapes per micro-batch: N = micro_batch x seq tokens; Ns = N / tp with
// sequence parallelism (LayerNorm and residual regions sharded along the
// sequence), else N; tensor-parallel widths h/tp, ffn/tp, heads/tp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

// A list of tensors lives in one allocation, each tensor starting on a
// kTensorAlignment-byte boundary (TensorMap in block.h lays them out).
constexpr int64_t kTensorAlignment = 64;

// Every tensor a stash or working set can hold, by identity: the engine binds
// them by index (TensorMap), never by a name looked up at run time.
enum class Act : uint8_t {
  input, ln1_mean, ln1_rstd, ln1_out, qkv, attn_out, attn_lse, mid, ln2_mean, ln2_rstd, ln2_out,
  fc_out,   // pre-activation MLP input [N, ffn/tp] ([N, 2 ffn/tp] gate|up with SwiGLU)
  act_out,  // GELU or SwiGLU output [N, ffn/tp]
  d_ln_out, d_wide, d_attn_out,
  d_act_out,  // gradient of the SwiGLU output [N, ffn/tp] (SwiGLU only)
  row_out, gathered, discard,
  logits, row_stats, lnf_out, lnf_stats, d_lnf_out,
  tokens, targets, d_input,
  count
};
// "ln1.out", "d.wide": for messages and tables.
const char* act_name(Act a);

struct TensorSpec {
  Act id = Act::input;
  int64_t numel = 0;
  int elem_bytes = 4;
  int64_t bytes() const { return numel * elem_bytes; }
  // bytes() rounded up to kTensorAlignment: its room in the allocation.
  int64_t allocated_bytes() const { return (bytes() + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment; }
};

// Sum of bytes(): the data alone.
int64_t total_bytes(const std::vector<TensorSpec>& v);
// Sum of allocated_bytes(): the size of the one allocation that holds the
// list, which is what the engine allocates and the memory model counts.
int64_t allocated_bytes(const std::vector<TensorSpec>& v);

// Stashed by one transformer block for one micro-batch, by recompute mode:
//   none:      input, ln1 stats, ln1.out, qkv, attn.out, attn.lse, mid,
//              ln2 stats, ln2.out, fc.out (pre-activation), act.out
//              (RMSNorm stashes rstd only, no mean)
//   selective: as none without attn.out and attn.lse (the attention core is
//              recomputed from qkv in backward)
//   full:      input only (the block is recomputed in backward)
// With sequence parallelism input, mid and the LayerNorm outputs and stats
// are this rank's sequence shard [Ns, h] (Megatron: the LayerNorm outputs
// are all-gathered again in backward rather than stashed whole).
// `recompute_this_block` says whether full recompute applies to this block
// (--recompute-method/--recompute-num-layers decide which blocks do).
std::vector<TensorSpec> block_stash(const ModelConfig& m, const ParallelConfig& p, bool recompute_this_block);

// The working set of a rank: buffers allocated once and reused by every
// block and micro-batch (not per micro-batch in flight):
//   recompute:  full: one block's full stash but its input; selective:
//               attn.out and attn.lse (rebuilt in forward and backward)
//   gradients:  d.ln.out [N,h], d.wide [N, max(qkv, fc)/tp] (qkv = (heads +
//               2 kv heads) x head_dim, fc = ffn, 2 ffn with SwiGLU),
//               d.attn.out [N,h/tp], d.act.out [N, ffn/tp] (SwiGLU only)
//   sequence parallel: row.out [N,h] (pre-reduce-scatter output, and the
//               gathered LayerNorm output a column-parallel matmul reads),
//               gathered [N,h] (all-gathered gradient)
//   discard:    [Ns,h] outputs that nothing reads (recomputed block output,
//               the head's input)
//   head (last stage only): head_working_set
std::vector<TensorSpec> rank_working_set(const ModelConfig& m, const ParallelConfig& p, bool has_head);

// The token ids and targets of one micro-batch ([N] int32 each); the engine
// holds them for every micro-batch of the step.
std::vector<TensorSpec> embedding_stash(const ModelConfig& m, const ParallelConfig& p);
// Stashed by the head for one micro-batch: the gradient of its input (the
// head runs its backward right after its forward, its loss gradient being
// known then).
std::vector<TensorSpec> head_stash(const ModelConfig& m, const ParallelConfig& p);

// Rows of logits the head computes at once, and its working set: the logits
// of those rows for this rank's vocabulary shard plus per-row statistics.
int64_t head_logits_rows(const ModelConfig& m, const ParallelConfig& p);
std::vector<TensorSpec> head_working_set(const ModelConfig& m, const ParallelConfig& p);

// Whether full recompute applies to the i-th block (0-based) of a chunk of
// `layers_in_chunk` blocks (uniform: every block; block: the first
// recompute_num_layers blocks of each chunk, as Megatron's "block" method).
bool block_is_recomputed(const ParallelConfig& p, int index_in_chunk, int layers_in_chunk);

}  // namespace meshtrain
