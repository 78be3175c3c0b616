// Multi-tensor AdamW (Loshchilov & Hutter 2019), the update of optim/adamw.h
// applied to a list of tensors in one call (one launch per 32 tensors on a
// GPU, as apex and PyTorch's fused AdamW batch them):
//   g = grad * grad_scale
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   w -= lr * ( (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * w )
// with bc1 = 1 - b1^t, bc2 = 1 - b2^t computed once by the caller (so the
// CPU and GPU use the same values). When `lowp` is set, the updated fp32
// master weight is also stored rounded to bf16 there (mixed precision's
// working copy). Pointers are host memory for the CPU implementation
// (kernels/cpu/adamw.cc) and device memory for the GPU one (kernels/gpu).
#pragma once

#include <cstdint>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

struct AdamWTensor {
  float* w = nullptr;  // fp32 weights (the master copy)
  float* m = nullptr;
  float* v = nullptr;
  const float* grad = nullptr;
  bf16* lowp = nullptr;  // optional bf16 copy of w, written after the update
  int64_t n = 0;
  float weight_decay = 0;  // 0 for tensors without decay
};

struct AdamWStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, grad_scale = 1;
  float bc1 = 1, bc2 = 1;  // 1 - beta1^t, 1 - beta2^t
};

void adamw_multi_tensor(const AdamWTensor* tensors, int count, const AdamWStep& s);

}  // namespace meshtrain::kernels
