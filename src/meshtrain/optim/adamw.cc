#include "meshtrain/optim/adamw.h"

#include <cmath>

namespace meshtrain {

void adamw_update(float* w, float* m, float* v, const float* grad, size_t n, float lr, float grad_scale, int t,
                  bool decay, const AdamWConfig& c) {
  const float bc1 = 1.0f - std::pow(c.beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(c.beta2, static_cast<float>(t));
  const float wd = decay ? c.weight_decay : 0.0f;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    const float mi = c.beta1 * m[i] + (1.0f - c.beta1) * g;
    const float vi = c.beta2 * v[i] + (1.0f - c.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * ((mi / bc1) / (std::sqrt(vi / bc2) + c.eps) + wd * w[i]);
  }
}

}  // namespace meshtrain
