// The output head of the last virtual stage: final LayerNorm (or RMSNorm), logits against
// this rank's vocabulary shard of the (tied) word embedding, and the
// vocabulary-parallel fused softmax cross-entropy. The full logits never
// exist on one rank, nor all rows at once: `rows` tokens at a time, with the
// per-row max and sum-of-exponentials all-reduced over TP.
//
// The gradient of the loss is known as soon as the loss is (every token
// weighs `dloss` in the global mean), so the head runs its backward right
// after its forward and returns the gradient of its input; its logits are
// never stashed.
//   x [Ns, h] -> dx [Ns, h];  targets [N];  wte [V/tp, h];  logits [rows, V/tp]
#pragma once

#include <cstdint>

#include "meshtrain/model/tensor_parallel.h"

namespace meshtrain {

struct HeadDims {
  int B = 0, S = 0, h = 0, vocab_local = 0, vocab_start = 0, vocab_size = 0, tp = 1;
  bool sp = false;
  int rows = 1;  // logit rows per pass
  bool rmsnorm = false;  // final norm: RMSNorm (lnf_b nullptr), else LayerNorm
  float norm_eps = 1e-5f;  // the model's norm_epsilon
  int64_t N() const { return int64_t{B} * S; }
  int64_t Ns() const { return sp ? N() / tp : N(); }
};

template <class T>
struct HeadScratch {
  T* logits = nullptr;        // [rows, V/tp]
  float* row_stats = nullptr; // [3, rows]: max, sum of exp, target logit
  T* lnf_out = nullptr;       // [N, h]
  float* lnf_mean = nullptr;  // [Ns]
  float* lnf_rstd = nullptr;  // [Ns]
  T* d_lnf_out = nullptr;     // [N, h]
};

struct HeadGrads {
  float *lnf_w = nullptr, *lnf_b = nullptr, *wte = nullptr;
};

// Returns the sum of the per-token losses of the micro-batch (the same on
// every TP rank). With dx == nullptr only the loss is computed (evaluation).
template <class T>
double head_forward_backward(T* dx, const HeadGrads& g, const T* x, const T* lnf_w, const T* lnf_b, const T* wte,
                             const int32_t* targets, float dloss, const HeadScratch<T>& s, const HeadDims& d,
                             const TpContext& tp);

}  // namespace meshtrain
