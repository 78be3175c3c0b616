// One pre-LayerNorm GPT transformer block, tensor- and sequence-parallel:
//
//   mid = input + proj(attention(ln1(input)))      proj: row-parallel
//   out = mid + fc2(gelu(fc(ln2(mid))))             fc: column, fc2: row-parallel
//
// qkv and fc are column-parallel (this rank's heads / FFN columns), proj and
// fc2 row-parallel. Shapes on one rank, N = B*S tokens, Ns = N/tp with
// sequence parallelism else N, hl = h/tp, fl = ffn/tp, Hl = heads/tp:
//   input, mid, out        [Ns, h]
//   ln1.out, ln2.out       [Ns, h]   (stashed as this rank's sequence shard;
//                                     with SP all-gathered to [N, h] into the
//                                     scratch's `full` before each use by a
//                                     column-parallel matmul: once forward,
//                                     once more in the backward, as Megatron)
//   qkv                    [N, Hl, 3, hd]
//   attn.out               [N, hl];  attn.lse [B, Hl, S]
//   fc.out, gelu.out       [N, fl]
// Parameter gradients accumulate (+=); the activation gradient flows in place
// through `dx`: d(out) on entry, d(input) on return.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meshtrain/model/activations.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/model/tensor_parallel.h"

namespace meshtrain {

struct BlockDims {
  int B = 0, S = 0, h = 0, heads_local = 0, hd = 0, ffn_local = 0, tp = 1;
  bool sp = false;
  int64_t N() const { return int64_t{B} * S; }
  int64_t Ns() const { return sp ? N() / tp : N(); }
  int hl() const { return heads_local * hd; }
};
BlockDims block_dims(const ModelConfig& m, const ParallelConfig& p);

template <class T>
struct BlockWeights {
  const T *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
};
struct BlockGrads {
  float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
};
// Views of a block unit's parameters (base = the unit's first element).
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
  T *ln2_out = nullptr, *fc_out = nullptr, *gelu_out = nullptr;
};

// Named pointers into one allocation laid out from a TensorSpec list, each
// tensor at a kTensorAlignment boundary: the allocation takes
// allocated_bytes(specs).
class TensorMap {
 public:
  TensorMap() = default;
  TensorMap(const std::vector<TensorSpec>& specs, void* base);
  template <class P> P* get(const std::string& name) const {
    auto it = ptrs_.find(name);
    return it == ptrs_.end() ? nullptr : static_cast<P*>(it->second);
  }

 private:
  std::map<std::string, void*> ptrs_;
};
// Points the fields of `a` named in `m` at their tensors (others unchanged).
template <class T>
void bind_acts(BlockActs<T>& a, const TensorMap& m);

// Gradient and sequence-parallel scratch of one block, shared by all blocks.
template <class T>
struct BlockScratch {
  T* row_out = nullptr;    // [N, h] (SP) row-parallel output before reduce-scatter,
                           // and the gathered LayerNorm output a column-parallel
                           // matmul reads (never both at once)
  T* gathered = nullptr;   // [N, h] all-gathered output gradient (SP)
  T* d_ln_out = nullptr;   // [N, h]
  T* d_wide = nullptr;     // [N, max(3hl, fl)]
  T* d_attn = nullptr;     // [N, hl]
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
