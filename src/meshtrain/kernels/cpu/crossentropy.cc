#include "meshtrain/kernels/crossentropy.h"

#include <cmath>
#include <limits>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::exp_approx;
using cpu::ld;
using cpu::st;

namespace {
// Sums over a row are formed per chunk of columns (vector partial sums inside
// a chunk), then over chunks, which keeps the fp32 rounding error small for
// rows of tens of thousands of columns.
constexpr int kSumChunk = 1024;
}  // namespace

template <class T>
void crossentropy_row_max(float* row_max, const T* logits, int N, int V_local, int n_valid) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<size_t>(n) * V_local;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int j = 0; j < n_valid; ++j) {
      const float v = ld(x[j]);
      m = v > m ? v : m;
    }
    row_max[n] = m;
  }
}

template <class T>
void crossentropy_sumexp(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                         const int32_t* targets, int N, int V_local, int vocab_start, int n_valid) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<size_t>(n) * V_local;
    const float m = row_max[n];
    float total = 0.0f;
    for (int j0 = 0; j0 < n_valid; j0 += kSumChunk) {
      const int j1 = j0 + kSumChunk < n_valid ? j0 + kSumChunk : n_valid;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int j = j0; j < j1; ++j) s += exp_approx(ld(x[j]) - m);
      total += s;
    }
    sumexp[n] = total;
    const int64_t t = static_cast<int64_t>(targets[n]) - vocab_start;
    target_logit[n] = (t >= 0 && t < n_valid) ? ld(x[t]) : 0.0f;
  }
}

void crossentropy_loss(float* loss, const float* row_max, const float* sumexp, const float* target_logit, int N) {
  for (int n = 0; n < N; ++n) loss[n] = std::log(sumexp[n]) + row_max[n] - target_logit[n];
}

template <class T>
void crossentropy_backward(T* dlogits, const T* logits, const float* row_max, const float* sumexp,
                           const int32_t* targets, float scale, int N, int V_local, int vocab_start, int n_valid) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<size_t>(n) * V_local;
    T* d = dlogits + static_cast<size_t>(n) * V_local;
    const float m = row_max[n];
    const float k = scale / sumexp[n];
    // Read the target logit before the row is overwritten (in place).
    const int64_t t = static_cast<int64_t>(targets[n]) - vocab_start;
    const bool local = t >= 0 && t < n_valid;
    const float xt = local ? ld(x[t]) : 0.0f;
#pragma omp simd
    for (int j = 0; j < n_valid; ++j) d[j] = st<T>(exp_approx(ld(x[j]) - m) * k);
    for (int j = n_valid; j < V_local; ++j) d[j] = st<T>(0.0f);
    if (local) d[t] = st<T>(exp_approx(xt - m) * k - scale);
  }
}

#define MT_INSTANTIATE(T)                                                                                      \
  template void crossentropy_row_max<T>(float*, const T*, int, int, int);                                    \
  template void crossentropy_sumexp<T>(float*, float*, const T*, const float*, const int32_t*, int, int, int, \
                                       int);                                                                 \
  template void crossentropy_backward<T>(T*, const T*, const float*, const float*, const int32_t*, float, int, \
                                         int, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
