// RMS normalisation over the last dimension (Zhang & Sennrich 2019), as the
// Llama models use it, eps given (kLayerNormEps = 1e-5 by default).
//
//   inp, out, dout, dinp  [N, C]   (T)
//   weight                [C]      (T)
//   rstd                  [N]      fp32, saved by the forward for the
//                                  backward (nullptr in the forward when not
//                                  needed)
//   dweight               [C]      fp32, accumulated (+=)
//
//   forward:  out = inp * rstd * weight,  rstd = 1 / sqrt(mean_c(inp^2) + eps)
//   backward: with xhat = inp * rstd and g = dout * weight,
//             dinp (= or += when accumulate_dinp) = rstd * (g - xhat * mean_c(g * xhat))
//             dweight += sum_n dout * xhat
//
// Rows are independent and split over threads; fp32 arithmetic. The weight
// gradient is summed per fixed block of rows and the block partials added
// in block order: deterministic and independent of the thread count.
#pragma once

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps);

template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, bool accumulate_dinp);

}  // namespace meshtrain::kernels
