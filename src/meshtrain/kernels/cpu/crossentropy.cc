#include "meshtrain/kernels/crossentropy.h"

#include <cmath>
#include <limits>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::exp_approx;
using cpu::kVL;
using cpu::ld;
using cpu::st;
using cpu::vbroadcast;
using cpu::vexp;
using cpu::vfloat;
using cpu::vload;
using cpu::vload_partial;

namespace {
// Row sums are formed per chunk of columns in vector lanes, the chunk sums
// added into a second vector: the fp32 rounding error stays small for rows
// of tens of thousands of columns.
constexpr int kSumChunk = 1024;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

template <class T>
void crossentropy_row_max(float* row_max, const T* logits, int N, int V_local, int n_valid) {
  const int nv = n_valid / kVL * kVL;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<size_t>(n) * V_local;
    vfloat m = vbroadcast(kNegInf);
    for (int j = 0; j < nv; j += kVL) m = cpu::vmax(m, vload(x + j));
    if (nv < n_valid) m = cpu::vmax(m, vload_partial(x + nv, n_valid - nv, kNegInf));
    row_max[n] = cpu::hmax(m);
  }
}

template <class T>
void crossentropy_sumexp(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                         const int32_t* targets, int N, int V_local, int vocab_start, int n_valid) {
  const int nv = n_valid / kVL * kVL;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = logits + static_cast<size_t>(n) * V_local;
    const vfloat m = vbroadcast(row_max[n]);
    vfloat total = vbroadcast(0.0f);
    for (int j0 = 0; j0 < nv; j0 += kSumChunk) {
      const int j1 = j0 + kSumChunk < nv ? j0 + kSumChunk : nv;
      vfloat s = vbroadcast(0.0f);
      for (int j = j0; j < j1; j += kVL) s += vexp(vload(x + j) - m);
      total += s;
    }
    if (nv < n_valid) total += vexp(vload_partial(x + nv, n_valid - nv, kNegInf) - m);
    sumexp[n] = cpu::hsum(total);
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
  const int nv = n_valid / kVL * kVL;
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
    const vfloat vm = vbroadcast(m), vk = vbroadcast(k);
    for (int j = 0; j < nv; j += kVL) cpu::vstore(d + j, vexp(vload(x + j) - vm) * vk);
    if (nv < n_valid)
      cpu::vstore_partial(d + nv, vexp(vload_partial(x + nv, n_valid - nv, kNegInf) - vm) * vk, n_valid - nv);
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
