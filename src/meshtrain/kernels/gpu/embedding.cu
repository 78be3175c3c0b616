// Token and position embeddings on the GPU (contract: kernels/embedding.h).
// Forward passes: one thread per element. Backward passes are deterministic
// without atomics: the token gradient gives each thread one column c and
// walks the rows n in increasing order (as the CPU kernel does); the position
// gradient gives each thread one (position, column) and adds the rows of
// that position in increasing order.
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void token_forward_kernel(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_start,
                                     int V_local) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < int64_t{N} * C;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    const int64_t row = static_cast<int64_t>(tokens[n]) - vocab_start;
    out[i] = (row >= 0 && row < V_local) ? wte[row * C + c] : st<T>(0.0f);
  }
}

template <class T>
__global__ void token_backward_kernel(float* dwte, const T* dout, const int32_t* tokens, int N, int C,
                                      int vocab_start, int V_local) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(tokens[n]) - vocab_start;
    if (row >= 0 && row < V_local) dwte[row * C + c] += ld(dout[int64_t{n} * C + c]);
  }
}

template <class T>
__global__ void position_forward_kernel(T* out, const T* wpe, int N, int T_local, int pos_offset, int C) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < int64_t{N} * C;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    const int64_t p = pos_offset + n % T_local;
    out[i] = st<T>(ld(out[i]) + ld(wpe[p * C + c]));
  }
}

// Thread (t, c): rows n = t, t + T_local, ... hold position pos_offset + t.
template <class T>
__global__ void position_backward_kernel(float* dwpe, const T* dout, int N, int T_local, int pos_offset, int C) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= int64_t{T_local} * C) return;
  const int64_t t = i / C, c = i % C;
  float s = 0;
  for (int64_t n = t; n < N; n += T_local) s += ld(dout[n * C + c]);
  dwpe[(pos_offset + t) * C + c] += s;
}

}  // namespace

template <class T>
void token_embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_start,
                             int V_local) {
  if (int64_t{N} * C <= 0) return;
  token_forward_kernel<<<blocks_for(int64_t{N} * C, kThreads), kThreads, 0, stream()>>>(out, tokens, wte, N, C,
                                                                                       vocab_start, V_local);
  GPU_CHECK_LAUNCH();
}

template <class T>
void token_embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C, int vocab_start,
                              int V_local) {
  if (int64_t{N} * C <= 0) return;
  token_backward_kernel<<<(C + kThreads - 1) / kThreads, kThreads, 0, stream()>>>(dwte, dout, tokens, N, C,
                                                                                 vocab_start, V_local);
  GPU_CHECK_LAUNCH();
}

template <class T>
void position_embedding_forward(T* out, const T* wpe, int N, int T_local, int pos_offset, int C) {
  if (int64_t{N} * C <= 0) return;
  position_forward_kernel<<<blocks_for(int64_t{N} * C, kThreads), kThreads, 0, stream()>>>(out, wpe, N, T_local,
                                                                                          pos_offset, C);
  GPU_CHECK_LAUNCH();
}

template <class T>
void position_embedding_backward(float* dwpe, const T* dout, int N, int T_local, int pos_offset, int C) {
  if (int64_t{N} * C <= 0) return;
  position_backward_kernel<<<blocks_for(int64_t{T_local} * C, kThreads), kThreads, 0, stream()>>>(
      dwpe, dout, N, T_local, pos_offset, C);
  GPU_CHECK_LAUNCH();
}

#define MT_INSTANTIATE(T)                                                                                  \
  template void token_embedding_forward<T>(T*, const int32_t*, const T*, int, int, int, int);            \
  template void token_embedding_backward<T>(float*, const T*, const int32_t*, int, int, int, int);       \
  template void position_embedding_forward<T>(T*, const T*, int, int, int, int);                         \
  template void position_embedding_backward<T>(float*, const T*, int, int, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::gpu
