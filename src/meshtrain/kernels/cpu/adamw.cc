#include "meshtrain/kernels/adamw.h"

#include <cmath>

namespace meshtrain::kernels {

namespace {
void adamw_tensor(const AdamWTensor& x, const AdamWStep& s) {
  const float wd = x.weight_decay;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < x.n; ++i) {
    const float g = x.grad[i] * s.grad_scale;
    const float mi = s.beta1 * x.m[i] + (1.0f - s.beta1) * g;
    const float vi = s.beta2 * x.v[i] + (1.0f - s.beta2) * g * g;
    x.m[i] = mi;
    x.v[i] = vi;
    x.w[i] -= s.lr * ((mi / s.bc1) / (std::sqrt(vi / s.bc2) + s.eps) + wd * x.w[i]);
  }
  if (x.lowp) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < x.n; ++i) x.lowp[i] = bf16(x.w[i]);
  }
}
}  // namespace

void adamw_multi_tensor(const AdamWTensor* tensors, int count, const AdamWStep& s) {
  for (int t = 0; t < count; ++t) adamw_tensor(tensors[t], s);
}

}  // namespace meshtrain::kernels
