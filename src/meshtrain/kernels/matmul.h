// Dense layer / matrix multiplication on oneDNN (row-major throughout).
//
//   inp  [M, K]  (T)      weight [N, K] (T, PyTorch's Linear layout)
//   out  [M, N]  (T)      bias   [N]    (T, optional)
//
//   matmul_forward:   out = inp . weight^T (+ bias if bias != nullptr)
//   matmul_backward:  dinp  [M, K] (T)  = dout . weight   (+= when accumulate_dinp;
//                                                          skipped if dinp == nullptr)
//                     dweight [N, K] (fp32) += dout^T . inp
//                     dbias [N] (fp32) += sum over rows of dout  (skipped if nullptr)
//
// T = float: fp32 matmuls. T = bf16: bf16 inputs, fp32 accumulation, output
// in T; the weight gradient is a bf16 x bf16 -> fp32 matmul that adds into
// dweight through oneDNN's sum post-op (no separate pass), as does the
// accumulating dinp. The weight gradient runs in blocks of 8192 rows of
// dweight (the logits' vocabulary is ~50k wide), each row computed alone. The bias gradient is a separate deterministic column sum
// of dout (fixed row blocks, added in block order).
//
// State: one CPU dnnl::engine and stream, and a cache of matmul primitives
// keyed by (M, K, N, dtype, variant), created on first use and kept for the
// life of the process, so repeated calls at the same shapes create no
// primitive descriptors. The cache is guarded by a mutex; calls are meant to
// come from one thread per process outside OpenMP parallel regions (oneDNN
// itself runs on the OpenMP threads). matmul_cache_size() reports the number
// of cached primitives.
#pragma once

#include <cstddef>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K, int N);

template <class T>
void matmul_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int M,
                     int K, int N, bool accumulate_dinp);

size_t matmul_cache_size();

}  // namespace meshtrain::kernels
