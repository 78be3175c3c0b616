// Vocabulary-parallel softmax + cross-entropy on the GPU, the passes of
// kernels/crossentropy.h: one block per row, block-wide max and sum in a
// fixed tree order (deterministic).
#include <cmath>

#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr int kThreads = 256;

__device__ inline int64_t local_target(const int32_t* targets, int n, int vocab_start) {
  return static_cast<int64_t>(targets[n]) - vocab_start;
}

template <class T>
__global__ void row_max_kernel(float* row_max, const T* logits, int V_local, int n_valid) {
  __shared__ float scratch[kWarpSize];
  const T* x = logits + int64_t{blockIdx.x} * V_local;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n_valid; j += blockDim.x) m = fmaxf(m, ld(x[j]));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <class T>
__global__ void sumexp_kernel(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                              const int32_t* targets, int V_local, int vocab_start, int n_valid) {
  __shared__ float scratch[kWarpSize];
  const int n = blockIdx.x;
  const T* x = logits + int64_t{n} * V_local;
  const float m = row_max[n];
  float s = 0;
  for (int j = threadIdx.x; j < n_valid; j += blockDim.x) s += expf(ld(x[j]) - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const int64_t t = local_target(targets, n, vocab_start);
    sumexp[n] = s;
    target_logit[n] = (t >= 0 && t < n_valid) ? ld(x[t]) : 0.0f;
  }
}

__global__ void loss_kernel(float* loss, const float* row_max, const float* sumexp, const float* target_logit,
                            int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) loss[n] = logf(sumexp[n]) + row_max[n] - target_logit[n];
}

// Each element is read and written by the same thread: dlogits may alias logits.
template <class T>
__global__ void backward_kernel(T* dlogits, const T* logits, const float* row_max, const float* sumexp,
                                const int32_t* targets, float scale, int V_local, int vocab_start, int n_valid) {
  const int n = blockIdx.x;
  const T* x = logits + int64_t{n} * V_local;
  T* d = dlogits + int64_t{n} * V_local;
  const float m = row_max[n], k = scale / sumexp[n];
  const int64_t t = local_target(targets, n, vocab_start);
  for (int j = threadIdx.x; j < V_local; j += blockDim.x) {
    float g = 0;
    if (j < n_valid) g = expf(ld(x[j]) - m) * k - (j == t ? scale : 0.0f);
    d[j] = st<T>(g);
  }
}

}  // namespace

template <class T>
void crossentropy_row_max(float* row_max, const T* logits, int N, int V_local, int n_valid) {
  if (N <= 0) return;
  row_max_kernel<<<N, kThreads, 0, stream()>>>(row_max, logits, V_local, n_valid);
  GPU_CHECK_LAUNCH();
}

template <class T>
void crossentropy_sumexp(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                         const int32_t* targets, int N, int V_local, int vocab_start, int n_valid) {
  if (N <= 0) return;
  sumexp_kernel<<<N, kThreads, 0, stream()>>>(sumexp, target_logit, logits, row_max, targets, V_local,
                                              vocab_start, n_valid);
  GPU_CHECK_LAUNCH();
}

void crossentropy_loss(float* loss, const float* row_max, const float* sumexp, const float* target_logit, int N) {
  if (N <= 0) return;
  loss_kernel<<<(N + kThreads - 1) / kThreads, kThreads, 0, stream()>>>(loss, row_max, sumexp, target_logit, N);
  GPU_CHECK_LAUNCH();
}

template <class T>
void crossentropy_backward(T* dlogits, const T* logits, const float* row_max, const float* sumexp,
                           const int32_t* targets, float scale, int N, int V_local, int vocab_start, int n_valid) {
  if (N <= 0) return;
  backward_kernel<<<N, kThreads, 0, stream()>>>(dlogits, logits, row_max, sumexp, targets, scale, V_local,
                                                vocab_start, n_valid);
  GPU_CHECK_LAUNCH();
}

#define MT_INSTANTIATE(T)                                                                                      \
  template void crossentropy_row_max<T>(float*, const T*, int, int, int);                                    \
  template void crossentropy_sumexp<T>(float*, float*, const T*, const float*, const int32_t*, int, int, int, \
                                       int);                                                                 \
  template void crossentropy_backward<T>(T*, const T*, const float*, const float*, const int32_t*, float, int, \
                                         int, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::gpu
