#include "meshtrain/kernels/rope.h"

#include <cmath>
#include <vector>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

namespace {

// Rotates the queries and keys of every token by sign * theta.
template <class T>
void rotate(T* qkv, int B, int S, int G, int R, int hd, float base, float sign) {
  const int half = hd / 2;
  std::vector<float> cs(static_cast<size_t>(S) * hd);  // [S][cos (half) | sin (half)]
  for (int t = 0; t < S; ++t)
    for (int i = 0; i < half; ++i) {
      const double theta = t * std::pow(static_cast<double>(base), -2.0 * i / hd);
      cs[static_cast<size_t>(t) * hd + i] = static_cast<float>(std::cos(theta));
      cs[static_cast<size_t>(t) * hd + half + i] = static_cast<float>(sign * std::sin(theta));
    }
  const int64_t tokens = int64_t{B} * S;
  const size_t stride = static_cast<size_t>(G) * (R + 2) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < tokens; ++n) {
    const float* c = cs.data() + static_cast<size_t>(n % S) * hd;
    const float* s = c + half;
    for (int g = 0; g < G; ++g)
      for (int v = 0; v <= R; ++v) {  // R queries and the key
        T* x = qkv + static_cast<size_t>(n) * stride + (static_cast<size_t>(g) * (R + 2) + v) * hd;
#pragma omp simd
        for (int i = 0; i < half; ++i) {
          const float x1 = ld(x[i]), x2 = ld(x[i + half]);
          x[i] = st<T>(x1 * c[i] - x2 * s[i]);
          x[i + half] = st<T>(x2 * c[i] + x1 * s[i]);
        }
      }
  }
}

}  // namespace

template <class T>
void rope_forward(T* qkv, int B, int S, int G, int R, int hd, float base) {
  rotate(qkv, B, S, G, R, hd, base, 1.0f);
}

template <class T>
void rope_backward(T* dqkv, int B, int S, int G, int R, int hd, float base) {
  rotate(dqkv, B, S, G, R, hd, base, -1.0f);
}

#define MT_INSTANTIATE(T)                                             \
  template void rope_forward<T>(T*, int, int, int, int, int, float); \
  template void rope_backward<T>(T*, int, int, int, int, int, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
