#include "meshtrain/model/norm.h"

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/kernels/layernorm.h"
#include "meshtrain/kernels/rmsnorm.h"

namespace meshtrain {

template <class T>
void norm_forward(bool rmsnorm, T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                  int C, float eps) {
  if (rmsnorm) {
    kernels::rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  } else {
    MT_ASSERT(bias != nullptr);
    kernels::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps);
  }
}

template <class T>
void norm_backward(bool rmsnorm, T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                   const float* mean, const float* rstd, int N, int C, bool accumulate_dinp) {
  if (rmsnorm)
    kernels::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C, accumulate_dinp);
  else
    kernels::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, accumulate_dinp);
}

#define INSTANTIATE(T)                                                                                         \
  template void norm_forward<T>(bool, T*, float*, float*, const T*, const T*, const T*, int, int, float);          \
  template void norm_backward<T>(bool, T*, float*, float*, const T*, const T*, const T*, const float*,         \
                                 const float*, int, int, bool);
INSTANTIATE(float)
INSTANTIATE(bf16)
#undef INSTANTIATE

}  // namespace meshtrain
