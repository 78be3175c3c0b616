// AdamW (Loshchilov & Hutter 2019): Adam with bias correction and decoupled
// weight decay, on fp32 master weights and fp32 moments.
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   w -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * w )
#pragma once

#include <cstddef>

namespace meshtrain {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// One update of n elements at step t (1-based). `grad_scale` multiplies the
// gradient first (global-norm clipping). decay: whether weight decay applies.
void adamw_update(float* w, float* m, float* v, const float* grad, size_t n, float lr, float grad_scale, int t,
                  bool decay, const AdamWConfig& c);

}  // namespace meshtrain
