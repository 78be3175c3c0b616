// The input embedding, vocabulary-parallel (Megatron VocabParallelEmbedding):
// TP rank r holds word rows [r*V/tp, (r+1)*V/tp); each rank looks up the
// tokens in its range (zero elsewhere) and the partial sums are all-reduced
// over TP, or reduce-scattered along the sequence with sequence parallelism.
// Learned positions (replicated) are added after the reduction.
//   tokens [N], N = B*S;  out [Ns, h];  wte [V/tp, h];  wpe [P, h]
#pragma once

#include <cstdint>

#include "meshtrain/model/tensor_parallel.h"

namespace meshtrain {

struct EmbeddingDims {
  int B = 0, S = 0, h = 0, vocab_local = 0, vocab_start = 0, tp = 1;
  bool sp = false;
  int64_t N() const { return int64_t{B} * S; }
  int64_t Ns() const { return sp ? N() / tp : N(); }
};

// scratch [N, h] is used with sequence parallelism only.
template <class T>
void embedding_forward(T* out, T* scratch, const int32_t* tokens, const T* wte, const T* wpe, const EmbeddingDims& d,
                       const TpContext& tp);

// dout [Ns, h]; with SP it is all-gathered into scratch [N, h] for the word
// gradient. dwte += ; dwpe += (a partial sum over TP under SP).
template <class T>
void embedding_backward(float* dwte, float* dwpe, T* scratch, const T* dout, const int32_t* tokens,
                        const EmbeddingDims& d, const TpContext& tp);

}  // namespace meshtrain
