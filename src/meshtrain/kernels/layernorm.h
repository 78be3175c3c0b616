// Layer normalisation over the last dimension, eps given (kLayerNormEps,
// 1e-5, unless the model says otherwise: ModelConfig::norm_epsilon).
//
//   inp, out, dout, dinp  [N, C]   (T)
//   weight, bias          [C]      (T)
//   mean, rstd            [N]      fp32, per-row statistics saved by the
//                                  forward for the backward (either may be
//                                  nullptr in the forward when not needed)
//   dweight, dbias        [C]      fp32, accumulated (+=)
//
//   forward:  out = (inp - mean) * rstd * weight + bias,
//             rstd = 1 / sqrt(var + eps), var the biased variance.
//   backward: with xhat = (inp - mean) * rstd and g = dout * weight,
//             dinp  (= or += when accumulate_dinp)
//                   = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
//             dweight += sum_n dout * xhat,  dbias += sum_n dout.
//
// Rows are independent and split over threads. The weight and bias gradients
// are summed per fixed block of rows into per-block partials, which are then
// added in block order: deterministic and independent of the thread count.
// Scratch: ceil(N / 32) * 2C floats, allocated per call.
#pragma once

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

// The default epsilon of both norms (GPT-2's and Llama 2/3's).
inline constexpr float kLayerNormEps = 1e-5f;

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C, float eps);

template <class T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, bool accumulate_dinp);

}  // namespace meshtrain::kernels
