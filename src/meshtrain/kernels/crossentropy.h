// Vocabulary-parallel fused softmax + cross-entropy, in passes so the caller
// can combine the per-row statistics across tensor-parallel ranks between
// them.
//
//   logits  [N, V_local] (T): this rank's columns, global vocabulary indices
//           [vocab_start, vocab_start + V_local). Only global indices below
//           the real vocabulary size are real; the rest is padding and is
//           excluded from the max and the sum and gets gradient 0.
//   n_valid = number of real local columns
//           = clamp(vocab_size - vocab_start, 0, V_local) (the first n_valid).
//   targets [N] global token indices.
//
// Protocol for one step (TP = tensor-parallel group):
//   1. crossentropy_row_max   row_max[n] = max over real local columns
//                             (-inf if n_valid == 0)          -> all-reduce MAX
//   2. crossentropy_sumexp    sumexp[n] = sum_j exp(logit - row_max[n]) over
//                             real local columns; target_logit[n] = logit of
//                             targets[n] if it is a local column, else 0
//                                                             -> all-reduce SUM both
//   3. crossentropy_loss      loss[n] = log(sumexp) + row_max - target_logit
//   4. crossentropy_backward  dlogits = (softmax - onehot(target)) * scale,
//                             padding columns 0; scale is d(total loss)/d(loss[n])
//                             (e.g. 1 / tokens in the global batch).
//                             dlogits may alias logits (in place).
// Each pass reads the logits once; rows are split over threads.
#pragma once

#include <cstdint>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void crossentropy_row_max(float* row_max, const T* logits, int N, int V_local, int n_valid);

template <class T>
void crossentropy_sumexp(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                         const int32_t* targets, int N, int V_local, int vocab_start, int n_valid);

void crossentropy_loss(float* loss, const float* row_max, const float* sumexp, const float* target_logit, int N);

template <class T>
void crossentropy_backward(T* dlogits, const T* logits, const float* row_max, const float* sumexp,
                           const int32_t* targets, float scale, int N, int V_local, int vocab_start, int n_valid);

}  // namespace meshtrain::kernels
