// One pre-norm transformer block, GPT-2 or Llama style, tensor- and
// sequence-parallel:
//
//   mid = input + proj(attention(rope(qkv(norm1(input)))))   proj: row-parallel
//   out = mid + fc2(act(fc(norm2(mid))))                     fc: column, fc2: row-parallel
//
// norm is LayerNorm or RMSNorm; rope (rotary positions of q and k, in place
// on qkv) is applied only with rotary positions; act is GELU, or SwiGLU on
// fc's [gate | up] output (gate and up rows both column-parallel, as
// Megatron's linear_fc1). Attention has heads_local query heads in
// groups_local key/value groups (grouped-query attention; whole groups per
// TP rank). Biases are absent (nullptr) with --disable-bias-linear.
//
// Shapes on one rank, N = B*S tokens, Ns = N/tp with sequence parallelism
// else N, hl = heads*hd/tp, fl = ffn/tp, Hl = heads/tp, Gl = groups/tp,
// ql = (Hl + 2 Gl) hd, fcl = fl (GELU) or 2 fl (SwiGLU):
//   input, mid, out        [Ns, h]
//   ln1.out, ln2.out       [Ns, h]   (stashed as this rank's sequence shard;
//                                     with SP all-gathered to [N, h] into the
//                                     scratch's `full` before each use by a
//                                     column-parallel matmul: once forward,
//                                     once more in the backward, as Megatron)
//   ln*.mean, ln*.rstd     [Ns]      (RMSNorm: rstd only)
//   qkv                    [N, Gl, Hl/Gl + 2, hd]  (rotated q and k with rope)
//   attn.out               [N, hl];  attn.lse [B, Hl, S]
//   fc.out [N, fcl], act.out [N, fl]
// Parameter gradients accumulate (+=); the activation gradient flows in place
// through `dx`: d(out) on entry, d(input) on return.
#pragma once

#include <cstdint>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/model/activations.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/model/tensor_parallel.h"

namespace meshtrain {

struct BlockDims {
  int B = 0, S = 0, h = 0, heads_local = 0, hd = 0, ffn_local = 0, tp = 1;
  bool sp = false;
  int groups_local = 0;  // key/value heads on this rank
  bool rmsnorm = false, swiglu = false, rope = false;
  float norm_eps = 1e-5f;  // the model's norm_epsilon
  // Rotary cos/sin table [S, hd] (rope_cos_sin_table: the model's base and
  // scaling), built once by block_dims and shared by every copy.
  std::shared_ptr<const std::vector<float>> rope_cos_sin = nullptr;
  int64_t N() const { return int64_t{B} * S; }
  int64_t Ns() const { return sp ? N() / tp : N(); }
  int hl() const { return heads_local * hd; }
  int qkv_local() const { return (heads_local + 2 * groups_local) * hd; }
  int fc_local() const { return swiglu ? 2 * ffn_local : ffn_local; }
};
BlockDims block_dims(const ModelConfig& m, const ParallelConfig& p);

template <class T>
struct BlockWeights {
  const T *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
};
struct BlockGrads {
  float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
};
// Views of a block unit's parameters (base = the unit's first element);
// nullptr for a parameter the model does not have (Unit::find_param).
template <class T>
BlockWeights<T> block_weights(const Unit& u, const T* base);
BlockGrads block_grads(const Unit& u, float* base);

template <class T>
struct BlockActs {
  T* input = nullptr;
  float *ln1_mean = nullptr, *ln1_rstd = nullptr;
  T *ln1_out = nullptr, *qkv = nullptr, *attn_out = nullptr;
  float* attn_lse = nullptr;
  T* mid = nullptr;
  float *ln2_mean = nullptr, *ln2_rstd = nullptr;
  T *ln2_out = nullptr, *fc_out = nullptr, *act_out = nullptr;
};

// Pointers, indexed by Act, into one allocation laid out from a TensorSpec
// list, each tensor at a kTensorAlignment boundary: the allocation takes
// allocated_bytes(specs).
class TensorMap {
 public:
  TensorMap() = default;
  TensorMap(const std::vector<TensorSpec>& specs, void* base);
  // The tensor; throws std::logic_error if the list had none.
  template <class P> P* get(Act id) const {
    void* p = find(id);
    if (p == nullptr) missing(id);
    return static_cast<P*>(p);
  }
  // nullptr if the list had no such tensor.
  void* find(Act id) const { return ptrs_[static_cast<size_t>(id)]; }

 private:
  [[noreturn]] static void missing(Act id);
  std::array<void*, static_cast<size_t>(Act::count)> ptrs_{};
};
// Points the fields of `a` whose tensors `m` holds at them (others unchanged).
template <class T>
void bind_acts(BlockActs<T>& a, const TensorMap& m);
// Throws std::logic_error naming the first tensor of `specs` (a block's
// stash, as block_stash lists it without recompute) that `a` has no pointer
// for.
template <class T>
void require_bound(const BlockActs<T>& a, const std::vector<TensorSpec>& specs);

// Gradient and sequence-parallel scratch of one block, shared by all blocks.
template <class T>
struct BlockScratch {
  T* row_out = nullptr;    // [N, h] (SP) row-parallel output before reduce-scatter,
                           // and the gathered LayerNorm output a column-parallel
                           // matmul reads (never both at once)
  T* gathered = nullptr;   // [N, h] all-gathered output gradient (SP)
  T* d_ln_out = nullptr;   // [N, h]
  T* d_wide = nullptr;     // [N, max(ql, fcl)]
  T* d_attn = nullptr;     // [N, hl]
  T* d_act = nullptr;      // [N, fl] gradient of the SwiGLU output (SwiGLU only)
};

// Runs the block; stores into `a` what backward needs, writes out [Ns, h].
template <class T>
void block_forward(const BlockWeights<T>& w, const BlockActs<T>& a, T* out, const BlockScratch<T>& s,
                   const BlockDims& d, const TpContext& tp);

// `a` holds the forward's tensors (recomputed by the caller if needed).
template <class T>
void block_backward(const BlockWeights<T>& w, const BlockGrads& g, const BlockActs<T>& a, T* dx,
                    const BlockScratch<T>& s, const BlockDims& d, const TpContext& tp);

// Recomputes attn.out and attn.lse from qkv (selective recompute).
template <class T>
void block_recompute_attention(const BlockActs<T>& a, const BlockDims& d);

}  // namespace meshtrain
