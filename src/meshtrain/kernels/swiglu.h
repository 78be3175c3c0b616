// SwiGLU (Shazeer 2020), the gated MLP activation of the Llama models:
//
//   inp   [N, 2F]  (T)  each row [gate (F) | up (F)], the output of one
//                       column-parallel matmul whose rows on this rank are
//                       the gate rows then the up rows (Megatron's fused
//                       linear_fc1 with --swiglu)
//   out   [N, F]   (T)  out = silu(gate) * up,  silu(a) = a * sigmoid(a)
//   dout  [N, F],  dinp [N, 2F] (overwritten; must not alias dout):
//     dgate = dout * up * sigmoid(a) * (1 + a * (1 - sigmoid(a)))
//     dup   = dout * silu(a)
//
// Rows split over threads; fp32 arithmetic.
#pragma once

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F);
template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F);

}  // namespace meshtrain::kernels
