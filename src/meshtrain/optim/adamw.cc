#include "meshtrain/optim/adamw.h"

#include <cmath>

namespace meshtrain {

kernels::AdamWStep adamw_step(float lr, float grad_scale, int t, const AdamWConfig& c) {
  kernels::AdamWStep s;
  s.lr = lr;
  s.beta1 = c.beta1;
  s.beta2 = c.beta2;
  s.eps = c.eps;
  s.grad_scale = grad_scale;
  s.bc1 = 1.0f - std::pow(c.beta1, static_cast<float>(t));
  s.bc2 = 1.0f - std::pow(c.beta2, static_cast<float>(t));
  return s;
}

}  // namespace meshtrain
