#include "meshtrain/model/block.h"

#include <cstring>

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/kernels/attention.h"
#include "meshtrain/kernels/gelu.h"
#include "meshtrain/kernels/rope.h"
#include "meshtrain/kernels/swiglu.h"
#include "meshtrain/model/norm.h"
#include "meshtrain/model/rope_scaling.h"

namespace meshtrain {

BlockDims block_dims(const ModelConfig& m, const ParallelConfig& p) {
  BlockDims d{p.micro_batch_size, m.seq_length,   m.hidden_size, m.num_attention_heads / p.tp,
              m.head_dim(),       m.ffn() / p.tp, p.tp,          p.sequence_parallel && p.tp > 1};
  d.groups_local = m.kv_heads() / p.tp;
  d.rmsnorm = m.rmsnorm;
  d.swiglu = m.gated_mlp;
  d.rope = m.rotary;
  d.norm_eps = static_cast<float>(m.norm_epsilon);
  if (m.rotary)
    d.rope_cos_sin = std::make_shared<const std::vector<float>>(
        rope_cos_sin_table(m.seq_length, m.head_dim(), m.rotary_base, m.rope_scaling));
  return d;
}

namespace {
// Pointer to parameter `b` of unit u inside the unit's buffer at base, or
// nullptr where the model has no such parameter.
template <class P>
P* param_ptr(const Unit& u, P* base, BlockParam b) {
  const ParamSpec* s = u.find_param(b);
  return s ? base + (s->offset - u.offset) : nullptr;
}
}  // namespace

template <class T>
BlockWeights<T> block_weights(const Unit& u, const T* base) {
  MT_ASSERT(u.kind == UnitKind::block);
  auto at = [&](BlockParam b) { return param_ptr(u, base, b); };
  using B = BlockParam;
  return {at(B::ln1_weight), at(B::ln1_bias), at(B::qkv_weight), at(B::qkv_bias), at(B::proj_weight), at(B::proj_bias),
          at(B::ln2_weight), at(B::ln2_bias), at(B::fc_weight),  at(B::fc_bias),  at(B::fc2_weight),  at(B::fc2_bias)};
}

BlockGrads block_grads(const Unit& u, float* base) {
  MT_ASSERT(u.kind == UnitKind::block);
  auto at = [&](BlockParam b) { return param_ptr(u, base, b); };
  using B = BlockParam;
  return {at(B::ln1_weight), at(B::ln1_bias), at(B::qkv_weight), at(B::qkv_bias), at(B::proj_weight), at(B::proj_bias),
          at(B::ln2_weight), at(B::ln2_bias), at(B::fc_weight),  at(B::fc_bias),  at(B::fc2_weight),  at(B::fc2_bias)};
}

TensorMap::TensorMap(const std::vector<TensorSpec>& specs, void* base) {
  char* p = static_cast<char*>(base);
  for (const auto& t : specs) {
    MT_ASSERT(ptrs_[static_cast<size_t>(t.id)] == nullptr);
    ptrs_[static_cast<size_t>(t.id)] = p;
    p += t.allocated_bytes();
  }
}

void TensorMap::missing(Act id) {
  throw std::logic_error(fmt::format("internal error: no tensor {} in this allocation", act_name(id)));
}

// The fields of BlockActs by tensor identity.
template <class T>
static void for_each_field(BlockActs<T>& a, auto&& f) {
  f(a.input, Act::input);
  f(a.ln1_mean, Act::ln1_mean);
  f(a.ln1_rstd, Act::ln1_rstd);
  f(a.ln1_out, Act::ln1_out);
  f(a.qkv, Act::qkv);
  f(a.attn_out, Act::attn_out);
  f(a.attn_lse, Act::attn_lse);
  f(a.mid, Act::mid);
  f(a.ln2_mean, Act::ln2_mean);
  f(a.ln2_rstd, Act::ln2_rstd);
  f(a.ln2_out, Act::ln2_out);
  f(a.fc_out, Act::fc_out);
  f(a.act_out, Act::act_out);
}

template <class T>
void bind_acts(BlockActs<T>& a, const TensorMap& m) {
  for_each_field(a, [&](auto*& field, Act id) {
    using P = std::remove_pointer_t<std::remove_reference_t<decltype(field)>>;
    if (void* p = m.find(id)) field = static_cast<P*>(p);
  });
}

template <class T>
void require_bound(const BlockActs<T>& a, const std::vector<TensorSpec>& specs) {
  std::array<bool, static_cast<size_t>(Act::count)> bound{};
  for_each_field(const_cast<BlockActs<T>&>(a),
                 [&](auto*& field, Act id) { bound[static_cast<size_t>(id)] = field != nullptr; });
  for (const TensorSpec& t : specs)
    if (!bound[static_cast<size_t>(t.id)])
      throw std::logic_error(fmt::format("internal error: block tensor {} is bound to nothing", act_name(t.id)));
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
  const int N = static_cast<int>(d.N()), Ns = static_cast<int>(d.Ns()), h = d.h, hl = d.hl(), fl = d.ffn_local;
  norm_forward(d.rmsnorm, a.ln1_out, a.ln1_mean, a.ln1_rstd, a.input, w.ln1_w, w.ln1_b, Ns, h, d.norm_eps);
  column_parallel_linear_forward(a.qkv, ln_input(a.ln1_out, s.row_out, d, tp), w.qkv_w, w.qkv_b, N, h,
                                 d.qkv_local());
  if (d.rope)
    kernels::rope_forward(a.qkv, d.rope_cos_sin->data(), d.B, d.S, d.groups_local, d.heads_local / d.groups_local,
                          d.hd);
  block_recompute_attention(a, d);
  row_parallel_linear_forward(a.mid, s.row_out, a.attn_out, w.proj_w, w.proj_b, a.input, N, hl, h, tp);
  norm_forward(d.rmsnorm, a.ln2_out, a.ln2_mean, a.ln2_rstd, a.mid, w.ln2_w, w.ln2_b, Ns, h, d.norm_eps);
  column_parallel_linear_forward(a.fc_out, ln_input(a.ln2_out, s.row_out, d, tp), w.fc_w, w.fc_b, N, h,
                                 d.fc_local());
  if (d.swiglu)
    kernels::swiglu_forward(a.act_out, a.fc_out, N, fl);
  else
    kernels::gelu_forward(a.act_out, a.fc_out, static_cast<size_t>(N) * fl);
  row_parallel_linear_forward(out, s.row_out, a.act_out, w.fc2_w, w.fc2_b, a.mid, N, fl, h, tp);
}

template <class T>
void block_recompute_attention(const BlockActs<T>& a, const BlockDims& d) {
  kernels::attention_forward(a.attn_out, a.attn_lse, a.qkv, d.B, d.S, d.heads_local, d.hd, d.groups_local);
}

template <class T>
void block_backward(const BlockWeights<T>& w, const BlockGrads& g, const BlockActs<T>& a, T* dx,
                    const BlockScratch<T>& s, const BlockDims& d, const TpContext& tp) {
  const int N = static_cast<int>(d.N()), Ns = static_cast<int>(d.Ns()), h = d.h, hl = d.hl(), fl = d.ffn_local;
  // The sequence-shard of a reduced norm-output gradient: reduce-scatter
  // target with SP; without SP the all-reduced full gradient itself.
  T* d_ln_shard = d.sp ? s.gathered : s.d_ln_out;
  // MLP half: out = mid + fc2(act(fc(norm2(mid)))).
  T* d_act = d.swiglu ? s.d_act : s.d_wide;
  row_parallel_linear_backward(d_act, s.gathered, g.fc2_w, g.fc2_b, dx, a.act_out, w.fc2_w, N, fl, h, tp);
  if (d.swiglu)
    kernels::swiglu_backward(s.d_wide, a.fc_out, d_act, N, fl);
  else
    kernels::gelu_backward(s.d_wide, a.fc_out, s.d_wide, static_cast<size_t>(N) * fl);
  column_parallel_linear_backward(s.d_ln_out, d_ln_shard, g.fc_w, g.fc_b, s.d_wide,
                                  ln_input(a.ln2_out, s.row_out, d, tp), w.fc_w, N, h, d.fc_local(), tp);
  norm_backward(d.rmsnorm, dx, g.ln2_w, g.ln2_b, d_ln_shard, a.mid, w.ln2_w, a.ln2_mean, a.ln2_rstd, Ns, h,
                /*accumulate_dinp=*/true);
  // Attention half: mid = input + proj(attention(rope(qkv(norm1(input))))).
  row_parallel_linear_backward(s.d_attn, s.gathered, g.proj_w, g.proj_b, dx, a.attn_out, w.proj_w, N, hl, h, tp);
  kernels::attention_backward(s.d_wide, s.d_attn, a.qkv, a.attn_out, a.attn_lse, d.B, d.S, d.heads_local, d.hd,
                              d.groups_local);
  if (d.rope)
    kernels::rope_backward(s.d_wide, d.rope_cos_sin->data(), d.B, d.S, d.groups_local, d.heads_local / d.groups_local,
                           d.hd);
  column_parallel_linear_backward(s.d_ln_out, d_ln_shard, g.qkv_w, g.qkv_b, s.d_wide,
                                  ln_input(a.ln1_out, s.row_out, d, tp), w.qkv_w, N, h, d.qkv_local(), tp);
  norm_backward(d.rmsnorm, dx, g.ln1_w, g.ln1_b, d_ln_shard, a.input, w.ln1_w, a.ln1_mean, a.ln1_rstd, Ns, h,
                /*accumulate_dinp=*/true);
}

#define INSTANTIATE(T)                                                                                       \
  template BlockWeights<T> block_weights<T>(const Unit&, const T*);                                          \
  template void bind_acts<T>(BlockActs<T>&, const TensorMap&);                                               \
  template void require_bound<T>(const BlockActs<T>&, const std::vector<TensorSpec>&);                       \
  template void block_forward<T>(const BlockWeights<T>&, const BlockActs<T>&, T*, const BlockScratch<T>&,    \
                                 const BlockDims&, const TpContext&);                                        \
  template void block_backward<T>(const BlockWeights<T>&, const BlockGrads&, const BlockActs<T>&, T*,        \
                                  const BlockScratch<T>&, const BlockDims&, const TpContext&);               \
  template void block_recompute_attention<T>(const BlockActs<T>&, const BlockDims&);
INSTANTIATE(float)
INSTANTIATE(bf16)

}  // namespace meshtrain
