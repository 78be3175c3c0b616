// squared_norm: fixed-shape two-pass reduction in double. Pass 1: kBlocks
// blocks each sum a grid-stride slice and reduce it in a fixed tree; pass 2:
// one block sums the kBlocks partials the same way. The order of additions
// depends only on n, so the result is reproducible run to run.
#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr int kThreads = 512;
constexpr int kBlocks = 264;  // two waves of 132 SMs; any value works

__global__ void sq_partials_kernel(double* partial, const float* x, int64_t n) {
  __shared__ double scratch[kWarpSize];
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    s += double(x[i]) * double(x[i]);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double* out, const double* partial, int count) {
  __shared__ double scratch[kWarpSize];
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) out[0] = s;
}

}  // namespace

double squared_norm(const float* x, size_t n) {
  if (n == 0) return 0;
  Buffer partial(MemCategory::workspace, (kBlocks + 1) * sizeof(double), false, Device::cuda);
  double* p = partial.as<double>();
  sq_partials_kernel<<<kBlocks, kThreads, 0, stream()>>>(p, x, int64_t(n));
  GPU_CHECK_LAUNCH();
  sum_partials_kernel<<<1, kThreads, 0, stream()>>>(p + kBlocks, p, kBlocks);
  GPU_CHECK_LAUNCH();
  double result = 0;
  GPU_CHECK(gpuMemcpyAsync(&result, p + kBlocks, sizeof(double), gpuMemcpyDefault, stream()));
  GPU_CHECK(gpuStreamSynchronize(stream()));
  return result;
}

}  // namespace meshtrain::gpu
