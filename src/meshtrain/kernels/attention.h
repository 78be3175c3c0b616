// Causal self-attention, FlashAttention style, scale 1/sqrt(hd), with H
// query heads in G groups (grouped-query attention, Ainslie et al. 2023):
// the R = H/G query heads of a group share one key and one value head.
// G == H (or G <= 0) is multi-head attention, G == 1 multi-query.
//
//   qkv  [B, T, G, R + 2, hd]  per token and group: its R queries, then its
//                          k, then its v, contiguous (a tensor-parallel
//                          split into whole groups is contiguous; for
//                          G == H this is [B, T, H, 3, hd])
//   out  [B, T, H, hd]     (query head h = g * R + r)
//   lse  [B, H, T]  fp32, log-sum-exp of each query row's scaled scores,
//                   saved by the forward for the backward
//   dout [B, T, H, hd],  dqkv like qkv (overwritten)
//
// Forward: for each (batch, head, block of 64 queries), loops over the key
// blocks at or below the diagonal with an online softmax (running max and
// sum per query, rescaling the output accumulator). Scores are formed
// transposed (S^T = K Q^T, keys by queries) so the per-query statistics are
// vector operations across the 64 queries. q^T, k, v, scores and the output
// accumulator live in fp32 per-thread scratch (fp32 inputs are read in place
// where the shapes allow); the T x T score matrix is never formed. Work
// items (b, h, query block) are spread over threads dynamically.
//
// Backward (FlashAttention-2): D_i = rowsum(dO_i * O_i); for each key block,
// for each query block at or below it: P = exp(S - lse) recomputed from q, k,
// dV += P^T dO, dP = dO V^T, dS = P * (dP - D), dQ += dS K, dK += dS^T Q
// (with the softmax scale). One thread owns a whole (b, group): the dQ of
// its R heads is summed in fp32 scratch [R, T, hd], and dK, dV of a key
// block over the R heads in head order, so results are deterministic and
// independent of the thread count. Parallelism is over B * G.
//
// Tile products run on a register-blocked 4 x 64 kernel; exp is the
// polynomial approximation of cpu/common.h (relative error < 5e-7).
// Scratch per thread (floats, hdp = hd rounded up to 16), allocated per call:
// forward 4 * 64 * hdp + 64 * 64 + 192; backward 7 * 64 * hdp + 2 * 64 * 64
// + R * T_pad * (hdp + 1), T_pad = T rounded up to 64.
//
// The sequence length parameter is named T_ (T is the element type).
#pragma once

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

inline constexpr int kAttentionBlock = 64;  // query and key tile size

// G must divide H.
template <class T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int H, int hd, int G = 0);

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int H,
                        int hd, int G = 0);

}  // namespace meshtrain::kernels
