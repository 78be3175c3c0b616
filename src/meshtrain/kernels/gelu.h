// GELU, tanh approximation:
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// evaluated as x * sigmoid(2u), which is the same function without the
// cancellation of 1 + tanh(u) for negative x.
//
//   gelu_forward   out[n] = gelu(inp[n])                       (out may alias inp)
//   gelu_backward  dinp[n] = gelu'(inp[n]) * dout[n]   (overwrite; dinp may alias dout)
//
// Elementwise over n elements, split over threads; fp32 arithmetic.
#pragma once

#include <cstddef>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void gelu_forward(T* out, const T* inp, size_t n);
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

}  // namespace meshtrain::kernels
