#include "meshtrain/kernels/swiglu.h"

#include <algorithm>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::kVL;
using cpu::vbroadcast;
using cpu::vfloat;

namespace {

// sigmoid(a) = 1 / (1 + exp(-a)), the exponent capped at 80 so it stays a
// normal float. Vectorised with cpu::vexp as GELU is: a scalar libm exp here
// made this activation several times slower than GELU per byte.
inline vfloat sigmoid(vfloat a) {
  vfloat e = -a;
  const vfloat cap = vbroadcast(80.0f);
  e = e < cap ? e : cap;
  return 1.0f / (1.0f + cpu::vexp(e));
}

// Loads/stores lanes [f, f + width) of a row; width < kVL only at its tail.
template <class T>
inline vfloat load(const T* p, int width) {
  return width == kVL ? cpu::vload(p) : cpu::vload_partial(p, width, 0.0f);
}
template <class T>
inline void store(T* p, vfloat v, int width) {
  if (width == kVL)
    cpu::vstore(p, v);
  else
    cpu::vstore_partial(p, v, width);
}

}  // namespace

// out[n, f] = silu(gate[n, f]) * up[n, f],  inp row n = [gate (F) | up (F)]
// inp [N, 2F] -> out [N, F]
template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* gate = inp + static_cast<size_t>(n) * 2 * F;
    const T* up = gate + F;
    T* o = out + static_cast<size_t>(n) * F;
    for (int f = 0; f < F; f += kVL) {
      const int w = std::min(kVL, F - f);
      const vfloat a = load(gate + f, w);
      store(o + f, a * sigmoid(a) * load(up + f, w), w);
    }
  }
}

// dgate = d * up * s * (1 + a (1 - s)),  dup = d * a * s,  s = sigmoid(a)
// inp [N, 2F], dout [N, F] -> dinp [N, 2F]
template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* gate = inp + static_cast<size_t>(n) * 2 * F;
    const T* up = gate + F;
    const T* g = dout + static_cast<size_t>(n) * F;
    T* dgate = dinp + static_cast<size_t>(n) * 2 * F;
    T* dup = dgate + F;
    for (int f = 0; f < F; f += kVL) {
      const int w = std::min(kVL, F - f);
      const vfloat a = load(gate + f, w), s = sigmoid(a), d = load(g + f, w);
      store(dgate + f, d * load(up + f, w) * s * (1.0f + a * (1.0f - s)), w);
      store(dup + f, d * a * s, w);
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
