#include "meshtrain/model/block.h"

#include <cstring>

#include "meshtrain/core/dtype.h"
#include "meshtrain/kernels/attention.h"
#include "meshtrain/kernels/gelu.h"
#include "meshtrain/kernels/layernorm.h"

namespace meshtrain {

BlockDims block_dims(const ModelConfig& m, const ParallelConfig& p) {
  return BlockDims{p.micro_batch_size, m.seq_length,           m.hidden_size, m.num_attention_heads / p.tp,
                   m.head_dim(),       m.ffn() / p.tp,         p.tp,          p.sequence_parallel && p.tp > 1};
}

template <class T>
BlockWeights<T> block_weights(const Unit& u, const T* base) {
  auto at = [&](const char* n) { return base + (u.param(n).offset - u.offset); };
  return {at("ln1.weight"), at("ln1.bias"), at("qkv.weight"), at("qkv.bias"), at("proj.weight"), at("proj.bias"),
          at("ln2.weight"), at("ln2.bias"), at("fc.weight"),  at("fc.bias"),  at("fc2.weight"),  at("fc2.bias")};
}

BlockGrads block_grads(const Unit& u, float* base) {
  auto at = [&](const char* n) { return base + (u.param(n).offset - u.offset); };
  return {at("ln1.weight"), at("ln1.bias"), at("qkv.weight"), at("qkv.bias"), at("proj.weight"), at("proj.bias"),
          at("ln2.weight"), at("ln2.bias"), at("fc.weight"),  at("fc.bias"),  at("fc2.weight"),  at("fc2.bias")};
}

TensorMap::TensorMap(const std::vector<TensorSpec>& specs, void* base) {
  char* p = static_cast<char*>(base);
  for (const auto& t : specs) {
    ptrs_[t.name] = p;
    p += t.allocated_bytes();
  }
}

template <class T>
void bind_acts(BlockActs<T>& a, const TensorMap& m) {
  auto set = [&](auto*& field, const char* name) {
    using P = std::remove_pointer_t<std::remove_reference_t<decltype(field)>>;
    if (P* p = m.get<P>(name)) field = p;
  };
  set(a.input, "input");
  set(a.ln1_mean, "ln1.mean");
  set(a.ln1_rstd, "ln1.rstd");
  set(a.ln1_out, "ln1.out");
  set(a.qkv, "qkv");
  set(a.attn_out, "attn.out");
  set(a.attn_lse, "attn.lse");
  set(a.mid, "mid");
  set(a.ln2_mean, "ln2.mean");
  set(a.ln2_rstd, "ln2.rstd");
  set(a.ln2_out, "ln2.out");
  set(a.fc_out, "fc.out");
  set(a.gelu_out, "gelu.out");
}

// The input of a column-parallel matmul: the stashed LayerNorm output
// [Ns, h], all-gathered along the sequence into `full` [N, h] with SP, else
// the stash itself.
template <class T>
static const T* ln_input(const T* ln_out, T* full, const BlockDims& d, const TpContext& tp) {
  if (!d.sp) return ln_out;
  gather_sequence(full, ln_out, d.N(), d.h, tp);
  return full;
}

template <class T>
void block_forward(const BlockWeights<T>& w, const BlockActs<T>& a, T* out, const BlockScratch<T>& s,
                   const BlockDims& d, const TpContext& tp) {
  const int N = static_cast<int>(d.N()), Ns = static_cast<int>(d.Ns()), h = d.h, hl = d.hl(),
            fl = d.ffn_local;
  kernels::layernorm_forward(a.ln1_out, a.ln1_mean, a.ln1_rstd, a.input, w.ln1_w, w.ln1_b, Ns, h);
  column_parallel_linear_forward(a.qkv, ln_input(a.ln1_out, s.row_out, d, tp), w.qkv_w, w.qkv_b, N, h, 3 * hl);
  kernels::attention_forward(a.attn_out, a.attn_lse, a.qkv, d.B, d.S, d.heads_local, d.hd);
  row_parallel_linear_forward(a.mid, s.row_out, a.attn_out, w.proj_w, w.proj_b, a.input, N, hl, h, tp);
  kernels::layernorm_forward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.mid, w.ln2_w, w.ln2_b, Ns, h);
  column_parallel_linear_forward(a.fc_out, ln_input(a.ln2_out, s.row_out, d, tp), w.fc_w, w.fc_b, N, h, fl);
  kernels::gelu_forward(a.gelu_out, a.fc_out, static_cast<size_t>(N) * fl);
  row_parallel_linear_forward(out, s.row_out, a.gelu_out, w.fc2_w, w.fc2_b, a.mid, N, fl, h, tp);
}

template <class T>
void block_recompute_attention(const BlockActs<T>& a, const BlockDims& d) {
  kernels::attention_forward(a.attn_out, a.attn_lse, a.qkv, d.B, d.S, d.heads_local, d.hd);
}

template <class T>
void block_backward(const BlockWeights<T>& w, const BlockGrads& g, const BlockActs<T>& a, T* dx,
                    const BlockScratch<T>& s, const BlockDims& d, const TpContext& tp) {
  const int N = static_cast<int>(d.N()), Ns = static_cast<int>(d.Ns()), h = d.h, hl = d.hl(), fl = d.ffn_local;
  // The sequence-shard of a reduced LayerNorm-output gradient: reduce-scatter
  // target with SP; without SP the all-reduced full gradient itself.
  T* d_ln_shard = d.sp ? s.gathered : s.d_ln_out;
  // MLP half: out = mid + fc2(gelu(fc(ln2(mid)))).
  row_parallel_linear_backward(s.d_wide, s.gathered, g.fc2_w, g.fc2_b, dx, a.gelu_out, w.fc2_w, N, fl, h, tp);
  kernels::gelu_backward(s.d_wide, a.fc_out, s.d_wide, static_cast<size_t>(N) * fl);
  column_parallel_linear_backward(s.d_ln_out, d_ln_shard, g.fc_w, g.fc_b, s.d_wide,
                                  ln_input(a.ln2_out, s.row_out, d, tp), w.fc_w, N, h, fl, tp);
  kernels::layernorm_backward(dx, g.ln2_w, g.ln2_b, d_ln_shard, a.mid, w.ln2_w, a.ln2_mean, a.ln2_rstd, Ns, h,
                              /*accumulate_dinp=*/true);
  // Attention half: mid = input + proj(attention(ln1(input))).
  row_parallel_linear_backward(s.d_attn, s.gathered, g.proj_w, g.proj_b, dx, a.attn_out, w.proj_w, N, hl, h, tp);
  kernels::attention_backward(s.d_wide, s.d_attn, a.qkv, a.attn_out, a.attn_lse, d.B, d.S, d.heads_local, d.hd);
  column_parallel_linear_backward(s.d_ln_out, d_ln_shard, g.qkv_w, g.qkv_b, s.d_wide,
                                  ln_input(a.ln1_out, s.row_out, d, tp), w.qkv_w, N, h, 3 * hl, tp);
  kernels::layernorm_backward(dx, g.ln1_w, g.ln1_b, d_ln_shard, a.input, w.ln1_w, a.ln1_mean, a.ln1_rstd, Ns, h,
                              /*accumulate_dinp=*/true);
}

#define INSTANTIATE(T)                                                                                       \
  template BlockWeights<T> block_weights<T>(const Unit&, const T*);                                          \
  template void bind_acts<T>(BlockActs<T>&, const TensorMap&);                                               \
  template void block_forward<T>(const BlockWeights<T>&, const BlockActs<T>&, T*, const BlockScratch<T>&,    \
                                 const BlockDims&, const TpContext&);                                        \
  template void block_backward<T>(const BlockWeights<T>&, const BlockGrads&, const BlockActs<T>&, T*,        \
                                  const BlockScratch<T>&, const BlockDims&, const TpContext&);               \
  template void block_recompute_attention<T>(const BlockActs<T>&, const BlockDims&);
INSTANTIATE(float)
INSTANTIATE(bf16)

}  // namespace meshtrain
