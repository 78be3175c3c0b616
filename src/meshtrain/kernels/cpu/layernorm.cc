#include "meshtrain/kernels/layernorm.h"

#include <cmath>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<size_t>(n) * C;
    T* o = out + static_cast<size_t>(n) * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += ld(x[c]);
    const float m = sum / static_cast<float>(C);
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) {
      const float d = ld(x[c]) - m;
      sq += d * d;
    }
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + kLayerNormEps);
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = st<T>((ld(x[c]) - m) * s * ld(weight[c]) + ld(bias[c]));
    if (mean != nullptr) mean[n] = m;
    if (rstd != nullptr) rstd[n] = s;
  }
}

template <class T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, bool accumulate_dinp) {
  const int nblocks = cpu::ceil_div(N, cpu::kReduceRows);
  // partials[b] = [dweight partial (C) | dbias partial (C)] of row block b.
  cpu::Scratch partials = cpu::make_scratch(static_cast<size_t>(nblocks) * 2 * C);
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nblocks; ++b) {
    float* pw = partials.get() + static_cast<size_t>(b) * 2 * C;
    float* pb = pw + C;
    for (int c = 0; c < C; ++c) pw[c] = pb[c] = 0.0f;
    const int n1 = (b + 1) * cpu::kReduceRows < N ? (b + 1) * cpu::kReduceRows : N;
    for (int n = b * cpu::kReduceRows; n < n1; ++n) {
      const T* x = inp + static_cast<size_t>(n) * C;
      const T* g = dout + static_cast<size_t>(n) * C;
      T* dx = dinp + static_cast<size_t>(n) * C;
      const float m = mean[n];
      const float s = rstd[n];
      // Row means of g = dout * weight and g * xhat; accumulate the
      // parameter-gradient partials in the same pass.
      float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int c = 0; c < C; ++c) {
        const float go = ld(g[c]);
        const float xhat = (ld(x[c]) - m) * s;
        const float gw = go * ld(weight[c]);
        sum_g += gw;
        sum_gx += gw * xhat;
        pb[c] += go;
        pw[c] += go * xhat;
      }
      const float a = sum_g / static_cast<float>(C);
      const float bcoef = sum_gx / static_cast<float>(C);
      if (accumulate_dinp) {
#pragma omp simd
        for (int c = 0; c < C; ++c) {
          const float xhat = (ld(x[c]) - m) * s;
          dx[c] = st<T>(ld(dx[c]) + s * (ld(g[c]) * ld(weight[c]) - a - xhat * bcoef));
        }
      } else {
#pragma omp simd
        for (int c = 0; c < C; ++c) {
          const float xhat = (ld(x[c]) - m) * s;
          dx[c] = st<T>(s * (ld(g[c]) * ld(weight[c]) - a - xhat * bcoef));
        }
      }
    }
  }
  // dweight and dbias are separate arrays: reduce each from its half.
  // Lay the partials out as [nblocks][2C] and reduce into a [2C] staging row.
  cpu::Scratch sums = cpu::make_scratch(2 * static_cast<size_t>(C));
  for (int c = 0; c < 2 * C; ++c) sums[c] = 0.0f;
  cpu::reduce_partials_into(sums.get(), partials.get(), nblocks, 2 * C);
#pragma omp simd
  for (int c = 0; c < C; ++c) {
    dweight[c] += sums[c];
    dbias[c] += sums[C + c];
  }
}

#define MT_INSTANTIATE(T)                                                                                       \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int);              \
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*, const float*,          \
                                      const float*, int, int, bool);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
