// The normalisation of a block or the head, LayerNorm or RMSNorm by the
// model's choice (ModelConfig::rmsnorm), with the kernels' shapes:
//   inp, out, dout, dinp [N, C];  weight [C];  bias [C] (LayerNorm only;
//   nullptr with RMSNorm);  mean [N] (LayerNorm only), rstd [N] fp32;
//   dweight, dbias [C] fp32, accumulated (+=); eps the model's
//   (ModelConfig::norm_epsilon), read by the forward only (the backward uses
//   the saved rstd).
#pragma once

namespace meshtrain {

template <class T>
void norm_forward(bool rmsnorm, T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                  int C, float eps);

template <class T>
void norm_backward(bool rmsnorm, T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                   const float* mean, const float* rstd, int N, int C, bool accumulate_dinp);

}  // namespace meshtrain
