// Rotary position embedding (Su et al. 2021, RoFormer), applied in place to
// the queries and keys of a fused qkv tensor, in the "rotate half" form of
// Megatron-LM and Hugging Face's Llama: for a head vector x of even size hd
// at sequence position t and i < hd/2, with theta_i = t * inv_freq[i]
// (inv_freq[i] = base^(-2i/hd), or its rescaled form: model/rope_scaling.h),
//
//   y[i]        = x[i] cos(theta_i) - x[i + hd/2] sin(theta_i)
//   y[i + hd/2] = x[i + hd/2] cos(theta_i) + x[i] sin(theta_i)
//
//   cos_sin    [S, hd] fp32: cos(theta_i) in the first hd/2 entries of row t,
//              sin(theta_i) in the last hd/2 (rope_cos_sin_table), built
//              once per model by the caller
//   qkv, dqkv  [B, S, G, R + 2, hd]  (attention.h's layout: per group R
//              queries, a key, a value); the R queries and the key of every
//              group are rotated, the value is not
//   rope_forward   rotates qkv by +theta
//   rope_backward  rotates the gradient dqkv by -theta (the transpose of a
//                  rotation), turning the gradient of the rotated q, k into
//                  that of the unrotated ones
//
// Tokens split over threads; fp32 arithmetic.
#pragma once

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void rope_forward(T* qkv, const float* cos_sin, int B, int S, int G, int R, int hd);
template <class T>
void rope_backward(T* dqkv, const float* cos_sin, int B, int S, int G, int R, int hd);

}  // namespace meshtrain::kernels
