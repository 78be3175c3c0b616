// Elementwise kernels: GELU, residual adds, gradient accumulation, casts,
// bias + residual rows. Grid-stride loops over int64 indices, 256 threads.
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// s = sigmoid(2u) with the exponent capped at 80, as kernels/cpu/gelu.cc.
__device__ inline float sigmoid_2u(float x, float x2) {
  const float a = fminf((-2.0f * kSqrt2OverPi) * x * (1.0f + kCubic * x2), 80.0f);
  return 1.0f / (1.0f + expf(a));
}

template <class T> __global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
  GRID_STRIDE(i, n) {
    const float x = ld(inp[i]);
    out[i] = st<T>(x * sigmoid_2u(x, x * x));
  }
}

template <class T> __global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n) {
  GRID_STRIDE(i, n) {
    const float x = ld(inp[i]), x2 = x * x;
    const float s = sigmoid_2u(x, x2);
    const float g = s + (2.0f * kSqrt2OverPi) * x * s * (1.0f - s) * (1.0f + (3.0f * kCubic) * x2);
    dinp[i] = st<T>(g * ld(dout[i]));
  }
}

template <class T> __global__ void add_kernel(T* out, const T* a, const T* b, int64_t n) {
  GRID_STRIDE(i, n) out[i] = st<T>(ld(a[i]) + ld(b[i]));
}

template <class U, class T> __global__ void convert_kernel(U* out, const T* inp, int64_t n) {
  GRID_STRIDE(i, n) out[i] = st<U>(ld(inp[i]));
}

template <class T>
__global__ void bias_residual_kernel(T* out, const T* bias, const T* residual, int64_t rows, int64_t n) {
  GRID_STRIDE(i, rows * n) {
    float v = ld(out[i]);
    if (bias) v += ld(bias[i % n]);
    if (residual) v += ld(residual[i]);
    out[i] = st<T>(v);
  }
}

template <class F> void launch(int64_t n, F&& kernel_launch) {
  if (n <= 0) return;
  kernel_launch(blocks_for(n, kThreads), kThreads);
  GPU_CHECK_LAUNCH();
}

}  // namespace

template <class T> void gelu_forward(T* out, const T* inp, size_t n) {
  launch(n, [&](unsigned g, int b) { gelu_forward_kernel<<<g, b, 0, stream()>>>(out, inp, int64_t(n)); });
}
template <class T> void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  launch(n, [&](unsigned g, int b) { gelu_backward_kernel<<<g, b, 0, stream()>>>(dinp, inp, dout, int64_t(n)); });
}
template <class T> void residual_forward(T* out, const T* a, const T* b, size_t n) {
  launch(n, [&](unsigned g, int t) { add_kernel<<<g, t, 0, stream()>>>(out, a, b, int64_t(n)); });
}
template <class T> void add_inplace(T* acc, const T* x, size_t n) { residual_forward(acc, acc, x, n); }
void accumulate(float* dst, const float* src, size_t n) { residual_forward(dst, dst, src, n); }
template <class U, class T> void convert(U* out, const T* inp, size_t n) {
  launch(n, [&](unsigned g, int b) { convert_kernel<<<g, b, 0, stream()>>>(out, inp, int64_t(n)); });
}
template <class T> void bias_residual_add(T* out, const T* bias, const T* residual, int64_t rows, int64_t n) {
  if (!bias && !residual) return;
  launch(rows * n,
         [&](unsigned g, int b) { bias_residual_kernel<<<g, b, 0, stream()>>>(out, bias, residual, rows, n); });
}

template void gelu_forward<float>(float*, const float*, size_t);
template void gelu_forward<bf16>(bf16*, const bf16*, size_t);
template void gelu_backward<float>(float*, const float*, const float*, size_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, size_t);
template void residual_forward<float>(float*, const float*, const float*, size_t);
template void residual_forward<bf16>(bf16*, const bf16*, const bf16*, size_t);
template void add_inplace<float>(float*, const float*, size_t);
template void add_inplace<bf16>(bf16*, const bf16*, size_t);
template void convert<bf16, float>(bf16*, const float*, size_t);
template void convert<float, bf16>(float*, const bf16*, size_t);
template void bias_residual_add<float>(float*, const float*, const float*, int64_t, int64_t);
template void bias_residual_add<bf16>(bf16*, const bf16*, const bf16*, int64_t, int64_t);

}  // namespace meshtrain::gpu
