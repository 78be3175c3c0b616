#include "meshtrain/kernels/rope.h"

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

namespace {

// Rotates the queries and keys of every token by sign * theta.
template <class T>
void rotate(T* qkv, const float* cos_sin, int B, int S, int G, int R, int hd, float sign) {
  const int half = hd / 2;
  const int64_t tokens = int64_t{B} * S;
  const size_t stride = static_cast<size_t>(G) * (R + 2) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < tokens; ++n) {
    const float* c = cos_sin + static_cast<size_t>(n % S) * hd;
    const float* s = c + half;
    for (int g = 0; g < G; ++g)
      for (int v = 0; v <= R; ++v) {  // R queries and the key
        T* x = qkv + static_cast<size_t>(n) * stride + (static_cast<size_t>(g) * (R + 2) + v) * hd;
#pragma omp simd
        for (int i = 0; i < half; ++i) {
          const float x1 = ld(x[i]), x2 = ld(x[i + half]), si = sign * s[i];
          x[i] = st<T>(x1 * c[i] - x2 * si);
          x[i + half] = st<T>(x2 * c[i] + x1 * si);
        }
      }
  }
}

}  // namespace

template <class T>
void rope_forward(T* qkv, const float* cos_sin, int B, int S, int G, int R, int hd) {
  rotate(qkv, cos_sin, B, S, G, R, hd, 1.0f);
}

template <class T>
void rope_backward(T* dqkv, const float* cos_sin, int B, int S, int G, int R, int hd) {
  rotate(dqkv, cos_sin, B, S, G, R, hd, -1.0f);
}

#define MT_INSTANTIATE(T)                                                           \
  template void rope_forward<T>(T*, const float*, int, int, int, int, int); \
  template void rope_backward<T>(T*, const float*, int, int, int, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
