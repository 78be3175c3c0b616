#include "meshtrain/kernels/gelu.h"

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::kVL;
using cpu::vbroadcast;
using cpu::vfloat;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// s = sigmoid(2u) = 1 / (1 + exp(-2u)). The exponent is capped at 80 so s
// stays a normal float (no denormal arithmetic for very negative x).
inline vfloat sigmoid_2u(vfloat x, vfloat x2) {
  vfloat a = (-2.0f * kSqrt2OverPi) * x * (1.0f + kCubic * x2);
  const vfloat cap = vbroadcast(80.0f);
  a = a < cap ? a : cap;
  return 1.0f / (1.0f + cpu::vexp(a));
}

// gelu(x) = x * s
inline vfloat gelu(vfloat x) { return x * sigmoid_2u(x, x * x); }

// gelu'(x) = s + 2 x s (1 - s) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
inline vfloat gelu_grad(vfloat x) {
  const vfloat x2 = x * x;
  const vfloat s = sigmoid_2u(x, x2);
  return s + (2.0f * kSqrt2OverPi) * x * s * (1.0f - s) * (1.0f + (3.0f * kCubic) * x2);
}

// Elementwise over [0, n) in blocks of kVL, split over threads.
template <class T, class F>
void elementwise(size_t n, F&& f) {
  const int64_t nv = static_cast<int64_t>(n / kVL);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nv; ++i) f(static_cast<size_t>(i) * kVL, kVL);
  if (n % kVL) f(n / kVL * kVL, static_cast<int>(n % kVL));
}

}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, size_t n) {
  elementwise<T>(n, [&](size_t i, int width) {
    if (width == kVL) {
      cpu::vstore(out + i, gelu(cpu::vload(inp + i)));
    } else {
      cpu::vstore_partial(out + i, gelu(cpu::vload_partial(inp + i, width, 0.0f)), width);
    }
  });
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  elementwise<T>(n, [&](size_t i, int width) {
    if (width == kVL) {
      cpu::vstore(dinp + i, gelu_grad(cpu::vload(inp + i)) * cpu::vload(dout + i));
    } else {
      cpu::vstore_partial(dinp + i,
                          gelu_grad(cpu::vload_partial(inp + i, width, 0.0f)) *
                              cpu::vload_partial(dout + i, width, 0.0f),
                          width);
    }
  });
}

template void gelu_forward<float>(float*, const float*, size_t);
template void gelu_forward<bf16>(bf16*, const bf16*, size_t);
template void gelu_backward<float>(float*, const float*, const float*, size_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, size_t);

}  // namespace meshtrain::kernels
