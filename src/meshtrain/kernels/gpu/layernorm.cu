// LayerNorm on the GPU (contract: kernels/layernorm.h).
// Forward and the input gradient: one warp per row, two passes over the row
// (mean, then the centred variance) held in fp32.
// Parameter gradients: block (column tile, row chunk) sums its kRowChunk
// rows in order into partials [chunks, 2C]; a second kernel adds the chunks
// in order into dweight and dbias. Deterministic.
#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"
#include "meshtrain/kernels/layernorm.h"

namespace meshtrain::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kRowChunk = 64;

template <class T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                         const T* bias, int N, int C) {
  const int rows_per_block = blockDim.x / kWarpSize;
  const int n = blockIdx.x * rows_per_block + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (n >= N) return;  // whole warps leave together
  const T* x = inp + int64_t{n} * C;
  float s = 0;
  for (int c = lane; c < C; c += kWarpSize) s += ld(x[c]);
  const float m = warp_sum(s) / C;
  float sq = 0;
  for (int c = lane; c < C; c += kWarpSize) {
    const float d = ld(x[c]) - m;
    sq += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(sq) / C + kernels::kLayerNormEps);
  T* o = out + int64_t{n} * C;
  for (int c = lane; c < C; c += kWarpSize) o[c] = st<T>((ld(x[c]) - m) * r * ld(weight[c]) + ld(bias[c]));
  if (lane == 0) {
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = r;
  }
}

template <class T>
__global__ void layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                                      const float* rstd, int N, int C, bool accumulate) {
  const int rows_per_block = blockDim.x / kWarpSize;
  const int n = blockIdx.x * rows_per_block + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (n >= N) return;
  const int64_t row = int64_t{n} * C;
  const float m = mean[n], r = rstd[n];
  float sg = 0, sgx = 0;
  for (int c = lane; c < C; c += kWarpSize) {
    const float g = ld(dout[row + c]) * ld(weight[c]);
    sg += g;
    sgx += g * (ld(inp[row + c]) - m) * r;
  }
  const float mg = warp_sum(sg) / C, mgx = warp_sum(sgx) / C;
  for (int c = lane; c < C; c += kWarpSize) {
    const float g = ld(dout[row + c]) * ld(weight[c]);
    const float xhat = (ld(inp[row + c]) - m) * r;
    float d = r * (g - mg - xhat * mgx);
    if (accumulate) d += ld(dinp[row + c]);
    dinp[row + c] = st<T>(d);
  }
}

template <class T>
__global__ void layernorm_param_partials_kernel(float* partial, const T* dout, const T* inp, const float* mean,
                                                const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowChunk, r1 = min(N, r0 + kRowChunk);
  float dw = 0, db = 0;
  for (int n = r0; n < r1; ++n) {
    const float d = ld(dout[int64_t{n} * C + c]);
    dw += d * (ld(inp[int64_t{n} * C + c]) - mean[n]) * rstd[n];
    db += d;
  }
  float* p = partial + int64_t{blockIdx.y} * 2 * C;
  p[c] = dw;
  p[C + c] = db;
}

__global__ void layernorm_param_reduce_kernel(float* dweight, float* dbias, const float* partial, int chunks,
                                              int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0, db = 0;
  for (int k = 0; k < chunks; ++k) {
    dw += partial[int64_t{k} * 2 * C + c];
    db += partial[int64_t{k} * 2 * C + C + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

}  // namespace

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C) {
  if (N <= 0) return;
  const int rows_per_block = kThreads / kWarpSize;
  layernorm_forward_kernel<<<(N + rows_per_block - 1) / rows_per_block, kThreads, 0, stream()>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  GPU_CHECK_LAUNCH();
}

template <class T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, bool accumulate_dinp) {
  if (N <= 0) return;
  const int rows_per_block = kThreads / kWarpSize;
  layernorm_dinp_kernel<<<(N + rows_per_block - 1) / rows_per_block, kThreads, 0, stream()>>>(
      dinp, dout, inp, weight, mean, rstd, N, C, accumulate_dinp);
  GPU_CHECK_LAUNCH();
  const int chunks = (N + kRowChunk - 1) / kRowChunk;
  Buffer partial(MemCategory::workspace, sizeof(float) * 2 * size_t(C) * chunks, false, Device::cuda);
  const unsigned col_blocks = (C + kThreads - 1) / kThreads;
  layernorm_param_partials_kernel<<<dim3(col_blocks, chunks), kThreads, 0, stream()>>>(
      partial.as<float>(), dout, inp, mean, rstd, N, C);
  GPU_CHECK_LAUNCH();
  layernorm_param_reduce_kernel<<<col_blocks, kThreads, 0, stream()>>>(dweight, dbias, partial.as<float>(),
                                                                        chunks, C);
  GPU_CHECK_LAUNCH();
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int, int);
template void layernorm_forward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, int, int);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, int, int, bool);
template void layernorm_backward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, const float*,
                                       const float*, int, int, bool);

}  // namespace meshtrain::gpu
