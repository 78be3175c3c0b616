// Multi-tensor AdamW: up to kTensorsPerLaunch tensors per launch, passed by
// value in the kernel's parameters (no host-to-device copy of the list).
// Block (x, y) updates tensor y in a grid-stride loop over its elements.
#include <algorithm>

#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr int kTensorsPerLaunch = 32;
constexpr int kThreads = 256;

struct TensorList {
  kernels::AdamWTensor t[kTensorsPerLaunch];
};

__global__ void adamw_kernel(TensorList list, kernels::AdamWStep s) {
  const kernels::AdamWTensor x = list.t[blockIdx.y];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < x.n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = x.grad[i] * s.grad_scale;
    const float mi = s.beta1 * x.m[i] + (1.0f - s.beta1) * g;
    const float vi = s.beta2 * x.v[i] + (1.0f - s.beta2) * g * g;
    x.m[i] = mi;
    x.v[i] = vi;
    const float w = x.w[i] - s.lr * ((mi / s.bc1) / (sqrtf(vi / s.bc2) + s.eps) + x.weight_decay * x.w[i]);
    x.w[i] = w;
    if (x.lowp) x.lowp[i] = st<bf16>(w);
  }
}

}  // namespace

void adamw_multi_tensor(const kernels::AdamWTensor* tensors, int count, const kernels::AdamWStep& s) {
  static_assert(sizeof(TensorList) <= 4000, "kernel parameters are limited to 4 KB");
  for (int first = 0; first < count; first += kTensorsPerLaunch) {
    const int k = std::min(kTensorsPerLaunch, count - first);
    TensorList list{};
    int64_t largest = 0;
    for (int j = 0; j < k; ++j) {
      list.t[j] = tensors[first + j];
      largest = std::max(largest, list.t[j].n);
    }
    if (largest == 0) continue;
    const dim3 grid(std::min<unsigned>(blocks_for(largest, kThreads), 1024), k);
    adamw_kernel<<<grid, kThreads, 0, stream()>>>(list, s);
    GPU_CHECK_LAUNCH();
  }
}

}  // namespace meshtrain::gpu
