#include "meshtrain/kernels/rmsnorm.h"

#include <cmath>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<size_t>(n) * C;
    T* o = out + static_cast<size_t>(n) * C;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) sq += ld(x[c]) * ld(x[c]);
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = st<T>(ld(x[c]) * s * ld(weight[c]));
    if (rstd != nullptr) rstd[n] = s;
  }
}

template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, bool accumulate_dinp) {
  const int nblocks = cpu::ceil_div(N, cpu::kReduceRows);
  cpu::Scratch partials = cpu::make_scratch(static_cast<size_t>(nblocks) * C);  // [nblocks, C] of dweight
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nblocks; ++b) {
    float* pw = partials.get() + static_cast<size_t>(b) * C;
    for (int c = 0; c < C; ++c) pw[c] = 0.0f;
    const int n1 = (b + 1) * cpu::kReduceRows < N ? (b + 1) * cpu::kReduceRows : N;
    for (int n = b * cpu::kReduceRows; n < n1; ++n) {
      const T* x = inp + static_cast<size_t>(n) * C;
      const T* g = dout + static_cast<size_t>(n) * C;
      T* dx = dinp + static_cast<size_t>(n) * C;
      const float s = rstd[n];
      float sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_gx)
      for (int c = 0; c < C; ++c) {
        const float xhat = ld(x[c]) * s;
        sum_gx += ld(g[c]) * ld(weight[c]) * xhat;
        pw[c] += ld(g[c]) * xhat;
      }
      const float mean_gx = sum_gx / static_cast<float>(C);
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float v = s * (ld(g[c]) * ld(weight[c]) - ld(x[c]) * s * mean_gx);
        dx[c] = st<T>(accumulate_dinp ? ld(dx[c]) + v : v);
      }
    }
  }
  cpu::reduce_partials_into(dweight, partials.get(), nblocks, C);
}

#define MT_INSTANTIATE(T)                                                                              \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int, int, float);                       \
  template void rmsnorm_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int, bool);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
