// The GPU kernels: the same functions, shapes and contracts as the CPU
// kernels of src/meshtrain/kernels/*.h, on device pointers, in namespace
// meshtrain::gpu. Each call is queued on the backend's stream
// (runtime_api.h) and returns at once, except squared_norm, which returns
// its value. T is float or meshtrain::bf16 (fp32 arithmetic throughout).
//
// Differences from the CPU kernels, all in rounding only:
//   - matmuls run on cuBLASLt: fp32 with fp32 compute (no TF32); bf16 inputs
//     with fp32 accumulation; the forward bias is the BIAS epilogue; the
//     weight gradient accumulates into fp32 through beta = 1; the bias
//     gradient is a column sum in row order (deterministic);
//   - attention: one thread per query (forward, dQ) or key (dK, dV), key and
//     query tiles staged in shared memory, online softmax, the LSE saved as
//     the CPU kernel saves it; head size up to 128; no atomics, so results
//     are deterministic; scratch [B, H, T] fp32 for rowsum(dO * O);
//   - layernorm and embedding parameter gradients are summed in a fixed
//     order (deterministic); squared_norm adds in a fixed tree order.
// Scratch is allocated as tracked workspace on the device (core/memory.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "meshtrain/core/dtype.h"
#include "meshtrain/kernels/adamw.h"

namespace meshtrain::gpu {

// kernels/matmul.h
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K, int N);
template <class T>
void matmul_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int M,
                     int K, int N, bool accumulate_dinp);

// kernels/attention.h (head size hd <= 128)
inline constexpr int kMaxAttentionHeadSize = 128;
template <class T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int H, int hd);
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int H,
                        int hd);

// kernels/layernorm.h
template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C);
template <class T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, bool accumulate_dinp);

// kernels/gelu.h, kernels/residual.h
template <class T> void gelu_forward(T* out, const T* inp, size_t n);
template <class T> void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);
template <class T> void residual_forward(T* out, const T* a, const T* b, size_t n);
template <class T> void add_inplace(T* acc, const T* x, size_t n);

// kernels/embedding.h
template <class T>
void token_embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_start,
                             int V_local);
template <class T>
void token_embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C, int vocab_start,
                              int V_local);
template <class T>
void position_embedding_forward(T* out, const T* wpe, int N, int T_local, int pos_offset, int C);
template <class T>
void position_embedding_backward(float* dwpe, const T* dout, int N, int T_local, int pos_offset, int C);

// kernels/crossentropy.h
template <class T>
void crossentropy_row_max(float* row_max, const T* logits, int N, int V_local, int n_valid);
template <class T>
void crossentropy_sumexp(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                         const int32_t* targets, int N, int V_local, int vocab_start, int n_valid);
void crossentropy_loss(float* loss, const float* row_max, const float* sumexp, const float* target_logit, int N);
template <class T>
void crossentropy_backward(T* dlogits, const T* logits, const float* row_max, const float* sumexp,
                           const int32_t* targets, float scale, int N, int V_local, int vocab_start, int n_valid);

// kernels/tensor_ops.h
void accumulate(float* dst, const float* src, size_t n);
template <class U, class T> void convert(U* out, const T* inp, size_t n);
double squared_norm(const float* x, size_t n);
template <class T>
void bias_residual_add(T* out, const T* bias, const T* residual, int64_t rows, int64_t n);

// kernels/adamw.h; `tensors` is a host array describing device tensors.
void adamw_multi_tensor(const kernels::AdamWTensor* tensors, int count, const kernels::AdamWStep& s);

}  // namespace meshtrain::gpu
