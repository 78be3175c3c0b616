#include "meshtrain/kernels/swiglu.h"

#include <cmath>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

namespace {
// sigmoid(a) = 1 / (1 + exp(-a)), the exponent capped so it stays finite.
inline float sigmoid(float a) { return 1.0f / (1.0f + std::exp(std::fmin(-a, 80.0f))); }
}  // namespace

template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* gate = inp + static_cast<size_t>(n) * 2 * F;
    const T* up = gate + F;
    T* o = out + static_cast<size_t>(n) * F;
    for (int f = 0; f < F; ++f) {
      const float a = ld(gate[f]);
      o[f] = st<T>(a * sigmoid(a) * ld(up[f]));
    }
  }
}

template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* gate = inp + static_cast<size_t>(n) * 2 * F;
    const T* up = gate + F;
    const T* g = dout + static_cast<size_t>(n) * F;
    T* dgate = dinp + static_cast<size_t>(n) * 2 * F;
    T* dup = dgate + F;
    for (int f = 0; f < F; ++f) {
      const float a = ld(gate[f]), s = sigmoid(a), d = ld(g[f]);
      dgate[f] = st<T>(d * ld(up[f]) * s * (1.0f + a * (1.0f - s)));
      dup[f] = st<T>(d * a * s);
    }
  }
}

#define MT_INSTANTIATE(T)                                          \
  template void swiglu_forward<T>(T*, const T*, int, int);        \
  template void swiglu_backward<T>(T*, const T*, const T*, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
