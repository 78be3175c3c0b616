#include "meshtrain/kernels/residual.h"

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::ld;
using cpu::st;

template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) out[i] = st<T>(ld(a[i]) + ld(b[i]));
}

template <class T>
void add_inplace(T* acc, const T* x, size_t n) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) acc[i] = st<T>(ld(acc[i]) + ld(x[i]));
}

template void residual_forward<float>(float*, const float*, const float*, size_t);
template void residual_forward<bf16>(bf16*, const bf16*, const bf16*, size_t);
template void add_inplace<float>(float*, const float*, size_t);
template void add_inplace<bf16>(bf16*, const bf16*, size_t);

}  // namespace meshtrain::kernels
