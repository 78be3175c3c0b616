// The arithmetic loops of the training step that are not layers: gradient
// accumulation, precision casts, squared norms, bias and residual adds.
// Each has this CPU implementation (kernels/cpu/tensor_ops.cc) and a GPU one
// with the same contract (kernels/gpu/kernels.h).
//
//   accumulate        dst[i] += src[i]                         fp32, n elements
//   convert           out[i] = (U) inp[i]   float <-> bf16 (round to nearest even)
//   squared_norm      sum of x[i]^2, accumulated in double, i in [0, n)
//   bias_residual_add out[r, j] += bias[j] (if bias) + residual[r, j] (if residual)
//                     for rows r < rows, j < n; out is T, arithmetic in fp32,
//                     one rounding to T at the end of each element
//
// squared_norm on the CPU adds in index order, so its result does not depend
// on the thread count; the GPU adds in a fixed tree order (deterministic,
// not the same rounding as the CPU's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

void accumulate(float* dst, const float* src, size_t n);

template <class U, class T>
void convert(U* out, const T* inp, size_t n);

double squared_norm(const float* x, size_t n);

template <class T>
void bias_residual_add(T* out, const T* bias, const T* residual, int64_t rows, int64_t n);

}  // namespace meshtrain::kernels
