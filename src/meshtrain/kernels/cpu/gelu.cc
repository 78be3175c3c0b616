#include "meshtrain/kernels/gelu.h"

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::exp_approx;
using cpu::ld;
using cpu::st;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// exp(-2u) is evaluated at most at exp(80): s = 1 / (1 + e) then stays a
// normal float (no denormal arithmetic for very negative x).
inline float neg_two_u(float x, float x2) {
  const float a = -2.0f * kSqrt2OverPi * x * (1.0f + kCubic * x2);
  return a < 80.0f ? a : 80.0f;
}
}  // namespace

// gelu(x) = x * s, s = sigmoid(2u) = 1 / (1 + exp(-2u)).
template <class T>
void gelu_forward(T* out, const T* inp, size_t n) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float x = ld(inp[i]);
    const float e = exp_approx(neg_two_u(x, x * x));
    out[i] = st<T>(x / (1.0f + e));
  }
}

// gelu'(x) = s + 2 x s (1 - s) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float x = ld(inp[i]);
    const float x2 = x * x;
    const float e = exp_approx(neg_two_u(x, x2));
    const float s = 1.0f / (1.0f + e);
    const float grad = s + 2.0f * kSqrt2OverPi * x * s * (1.0f - s) * (1.0f + 3.0f * kCubic * x2);
    dinp[i] = st<T>(grad * ld(dout[i]));
  }
}

template void gelu_forward<float>(float*, const float*, size_t);
template void gelu_forward<bf16>(bf16*, const bf16*, size_t);
template void gelu_backward<float>(float*, const float*, const float*, size_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, size_t);

}  // namespace meshtrain::kernels
