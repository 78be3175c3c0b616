#include "meshtrain/model/lm_head.h"

#include <algorithm>
#include <cmath>

#include "meshtrain/core/dtype.h"
#include "meshtrain/kernels/crossentropy.h"
#include "meshtrain/kernels/matmul.h"
#include "meshtrain/model/norm.h"

namespace meshtrain {

template <class T>
double head_forward_backward(T* dx, const HeadGrads& g, const T* x, const T* lnf_w, const T* lnf_b, const T* wte,
                             const int32_t* targets, float dloss, const HeadScratch<T>& s, const HeadDims& d,
                             const TpContext& tp) {
  const int64_t N = d.N(), Ns = d.Ns();
  const int h = d.h, V = d.vocab_local;
  const int n_valid = std::clamp(d.vocab_size - d.vocab_start, 0, V);
  T* mine = s.lnf_out + (d.sp ? tp.rank() * Ns * h : 0);
  norm_forward(d.rmsnorm, mine, s.lnf_mean, s.lnf_rstd, x, lnf_w, lnf_b, static_cast<int>(Ns), h, d.norm_eps);
  gather_sequence(s.lnf_out, N, h, tp);

  double loss_sum = 0;
  for (int64_t r0 = 0; r0 < N; r0 += d.rows) {
    const int R = static_cast<int>(std::min<int64_t>(d.rows, N - r0));
    float* row_max = s.row_stats;
    float* sumexp = s.row_stats + d.rows;  // sumexp and target logit contiguous:
    float* target = sumexp + R;            // one all-reduce for both
    const T* in = s.lnf_out + r0 * h;
    const int32_t* tg = targets + r0;
    kernels::matmul_forward<T>(s.logits, in, wte, nullptr, R, h, V);
    kernels::crossentropy_row_max(row_max, s.logits, R, V, n_valid);
    if (tp.size() > 1) tp.comm->all_reduce(row_max, R, ReduceOp::max);
    kernels::crossentropy_sumexp(sumexp, target, s.logits, row_max, tg, R, V, d.vocab_start, n_valid);
    if (tp.size() > 1) tp.comm->all_reduce(sumexp, 2 * int64_t{R});
    kernels::crossentropy_loss(target, row_max, sumexp, target, R);  // per-row losses, in place
    for (int i = 0; i < R; ++i) loss_sum += target[i];
    if (!dx) continue;
    kernels::crossentropy_backward(s.logits, s.logits, row_max, sumexp, tg, dloss, R, V, d.vocab_start, n_valid);
    kernels::matmul_backward<T>(s.d_lnf_out + r0 * h, g.wte, nullptr, s.logits, in, wte, R, h, V,
                                /*accumulate_dinp=*/false);
  }
  if (!dx) return loss_sum;
  // The logits are column-parallel over the vocabulary: reduce the input gradient.
  // In place: with SP the reduce-scattered shard lands at the front.
  if (tp.size() > 1 && d.sp)
    tp.comm->reduce_scatter(Communicator::kInPlace, s.d_lnf_out, Ns * h);
  else if (tp.size() > 1)
    tp.comm->all_reduce(s.d_lnf_out, N * h);
  norm_backward(d.rmsnorm, dx, g.lnf_w, g.lnf_b, s.d_lnf_out, x, lnf_w, s.lnf_mean, s.lnf_rstd,
                static_cast<int>(Ns), h, /*accumulate_dinp=*/false);
  return loss_sum;
}

template double head_forward_backward<float>(float*, const HeadGrads&, const float*, const float*, const float*,
                                             const float*, const int32_t*, float, const HeadScratch<float>&,
                                             const HeadDims&, const TpContext&);
template double head_forward_backward<bf16>(bf16*, const HeadGrads&, const bf16*, const bf16*, const bf16*,
                                            const bf16*, const int32_t*, float, const HeadScratch<bf16>&,
                                            const HeadDims&, const TpContext&);

}  // namespace meshtrain
