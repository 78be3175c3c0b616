#include "meshtrain/kernels/embedding.h"

#include <omp.h>

#include <cstring>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

template <class T>
void token_embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_start,
                             int V_local) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    T* o = out + static_cast<size_t>(n) * C;
    const int64_t row = static_cast<int64_t>(tokens[n]) - vocab_start;
    if (row >= 0 && row < V_local) {
      std::memcpy(o, wte + row * C, sizeof(T) * C);
    } else {
      std::memset(static_cast<void*>(o), 0, sizeof(T) * C);
    }
  }
}

template <class T>
void token_embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C, int vocab_start,
                              int V_local) {
  // Threads own disjoint column slices (multiples of 16 floats) and walk all
  // rows in order: no races, a fixed summation order per element.
  constexpr int kAlign = 16;
  const int nslices_max = cpu::ceil_div(C, kAlign);
#pragma omp parallel
  {
    const int nt = omp_get_num_threads();
    const int tid = omp_get_thread_num();
    const int nslices = nt < nslices_max ? nt : nslices_max;
    if (tid < nslices) {
      const int per = cpu::ceil_div(nslices_max, nslices) * kAlign;
      const int c0 = tid * per;
      const int c1 = c0 + per < C ? c0 + per : C;
      for (int n = 0; n < N && c0 < c1; ++n) {
        const int64_t row = static_cast<int64_t>(tokens[n]) - vocab_start;
        if (row < 0 || row >= V_local) continue;
        float* d = dwte + row * C;
        const T* g = dout + static_cast<size_t>(n) * C;
#pragma omp simd
        for (int c = c0; c < c1; ++c) d[c] += ld(g[c]);
      }
    }
  }
}

template <class T>
void position_embedding_forward(T* out, const T* wpe, int N, int T_local, int pos_offset, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    T* o = out + static_cast<size_t>(n) * C;
    const T* w = wpe + static_cast<size_t>(pos_offset + n % T_local) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = st<T>(ld(o[c]) + ld(w[c]));
  }
}

template <class T>
void position_embedding_backward(float* dwpe, const T* dout, int N, int T_local, int pos_offset, int C) {
  // One position per iteration: rows t, t + T_local, ... summed in order.
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T_local; ++t) {
    float* d = dwpe + static_cast<size_t>(pos_offset + t) * C;
    for (int n = t; n < N; n += T_local) {
      const T* g = dout + static_cast<size_t>(n) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) d[c] += ld(g[c]);
    }
  }
}

#define MT_INSTANTIATE(T)                                                                                   \
  template void token_embedding_forward<T>(T*, const int32_t*, const T*, int, int, int, int);             \
  template void token_embedding_backward<T>(float*, const T*, const int32_t*, int, int, int, int);        \
  template void position_embedding_forward<T>(T*, const T*, int, int, int, int);                          \
  template void position_embedding_backward<T>(float*, const T*, int, int, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
