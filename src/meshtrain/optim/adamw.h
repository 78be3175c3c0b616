// AdamW (Loshchilov & Hutter 2019): Adam with bias correction and decoupled
// weight decay, on fp32 master weights and fp32 moments.
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   w -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * w )
// The update itself is the multi-tensor kernel of kernels/adamw.h (CPU and
// GPU); this header holds the hyper-parameters and a step's constants.
#pragma once

#include "meshtrain/kernels/adamw.h"

namespace meshtrain {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// The step's constants for the multi-tensor kernel (kernels/adamw.h): the
// bias corrections 1 - beta^t computed once, in fp32.
kernels::AdamWStep adamw_step(float lr, float grad_scale, int t, const AdamWConfig& c);

}  // namespace meshtrain
