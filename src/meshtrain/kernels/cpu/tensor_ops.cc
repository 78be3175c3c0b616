#include "meshtrain/kernels/tensor_ops.h"

namespace meshtrain::kernels {

void accumulate(float* dst, const float* src, size_t n) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) dst[i] += src[i];
}

template <class U, class T>
void convert(U* out, const T* inp, size_t n) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) out[i] = from_f32<U>(to_f32(inp[i]));
}

double squared_norm(const float* x, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  return sum;
}

template <class T>
void bias_residual_add(T* out, const T* bias, const T* residual, int64_t rows, int64_t n) {
  if (!bias && !residual) return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out + r * n;
    const T* res = residual ? residual + r * n : nullptr;
    for (int64_t j = 0; j < n; ++j) {
      float v = to_f32(o[j]);
      if (bias) v += to_f32(bias[j]);
      if (res) v += to_f32(res[j]);
      o[j] = from_f32<T>(v);
    }
  }
}

template void convert<bf16, float>(bf16*, const float*, size_t);
template void convert<float, bf16>(float*, const bf16*, size_t);
template void bias_residual_add<float>(float*, const float*, const float*, int64_t, int64_t);
template void bias_residual_add<bf16>(bf16*, const bf16*, const bf16*, int64_t, int64_t);

}  // namespace meshtrain::kernels
