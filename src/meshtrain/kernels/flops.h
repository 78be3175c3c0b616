// FLOP counts from shapes, forward and backward. A multiply-add counts 2.
//
// Matmul (out[M,N] = inp[M,K] . W[N,K]^T):
//   forward 2MKN; backward 2MKN for the weight gradient plus 2MKN for the
//   input gradient when it is computed. Bias add / bias gradient not counted.
//
// Attention (per batch element and head, the two T x T products QK^T and PV,
// each 2 * hd FLOPs per (query, key) pair):
//   pairs = T * T                 dense: the model-FLOPs convention of
//                                 Megatron-LM and PaLM (mask ignored)
//   pairs = T * (T + 1) / 2       causal: only the unmasked pairs, the work a
//                                 causal kernel has to do. The tiled kernel
//                                 also evaluates the masked half of each
//                                 diagonal 64 x 64 tile (T = 256: 25% more
//                                 pairs, T = 2048: 3%), not counted here.
//   forward  = 4 * B * H * hd * pairs   (QK^T, PV)
//   backward = 10 * B * H * hd * pairs  (recomputed QK^T, dV = P^T dO,
//              dP = dO V^T, dQ = dS K, dK = dS^T Q: 2.5x forward)
//   Softmax, scaling and masking are not counted (O(pairs), not O(pairs hd)).
//
// Elementwise ops, stated counts per element (an exp, tanh, sqrt or division
// counts 1, a comparison counts 1):
//   layernorm   forward 8 (mean 1, variance 3, normalise + affine 4)
//               backward 13 (xhat 2, dout*w 1, two row sums 3, dbias 1,
//               dweight 2, dinp 4)
//   gelu        forward 8, backward 16
//   crossentropy (per logit, max + exp-sum passes together) forward 4
//               (compare, subtract, exp, add), backward 4 (subtract, exp,
//               two multiplies); the per-row log, one-hot and loss not counted
//   residual    1 (add);  embedding: position forward 1, both backwards 1
//               (the accumulation), token forward 0 (a copy)
#pragma once

#include <cstdint>

namespace meshtrain::kernels {

constexpr int64_t matmul_forward_flops(int64_t M, int64_t K, int64_t N) { return 2 * M * K * N; }
constexpr int64_t matmul_backward_flops(int64_t M, int64_t K, int64_t N, bool input_grad) {
  return (input_grad ? 4 : 2) * M * K * N;
}

constexpr int64_t attention_pairs(int64_t T, bool causal) { return causal ? T * (T + 1) / 2 : T * T; }
constexpr int64_t attention_forward_flops(int64_t B, int64_t T, int64_t H, int64_t hd, bool causal) {
  return 4 * B * H * hd * attention_pairs(T, causal);
}
constexpr int64_t attention_backward_flops(int64_t B, int64_t T, int64_t H, int64_t hd, bool causal) {
  return 10 * B * H * hd * attention_pairs(T, causal);
}

inline constexpr int64_t kLayerNormForwardFlopsPerElement = 8;
inline constexpr int64_t kLayerNormBackwardFlopsPerElement = 13;
inline constexpr int64_t kGeluForwardFlopsPerElement = 8;
inline constexpr int64_t kGeluBackwardFlopsPerElement = 16;
inline constexpr int64_t kCrossEntropyForwardFlopsPerElement = 4;
inline constexpr int64_t kCrossEntropyBackwardFlopsPerElement = 4;
inline constexpr int64_t kResidualFlopsPerElement = 1;

constexpr int64_t layernorm_forward_flops(int64_t N, int64_t C) {
  return kLayerNormForwardFlopsPerElement * N * C;
}
constexpr int64_t layernorm_backward_flops(int64_t N, int64_t C) {
  return kLayerNormBackwardFlopsPerElement * N * C;
}
constexpr int64_t gelu_forward_flops(int64_t n) { return kGeluForwardFlopsPerElement * n; }
constexpr int64_t gelu_backward_flops(int64_t n) { return kGeluBackwardFlopsPerElement * n; }
// logits [N, V]: V the real (unpadded) columns.
constexpr int64_t crossentropy_forward_flops(int64_t N, int64_t V) {
  return kCrossEntropyForwardFlopsPerElement * N * V;
}
constexpr int64_t crossentropy_backward_flops(int64_t N, int64_t V) {
  return kCrossEntropyBackwardFlopsPerElement * N * V;
}
constexpr int64_t residual_flops(int64_t n) { return kResidualFlopsPerElement * n; }
constexpr int64_t position_embedding_forward_flops(int64_t N, int64_t C) { return N * C; }
constexpr int64_t embedding_backward_flops(int64_t N, int64_t C) { return N * C; }

}  // namespace meshtrain::kernels
