// Token and position embeddings (GPT-2: learned positions).
//
// Vocabulary parallelism: this rank holds rows [vocab_start, vocab_start +
// V_local) of the token table wte. A token outside that range gets a zero row
// here; the caller sums the ranks' outputs (all-reduce / reduce-scatter).
//
//   token_embedding_forward   out[N,C] = wte[tokens[n] - vocab_start] if the
//                             token is local, else 0 (overwrites out)
//   token_embedding_backward  dwte[V_local,C] += dout[n] for every n whose
//                             token is local
//
// Positions: the position of row n is pos_offset + (n % T_local), where
// T_local is the sequence length this rank holds (the whole sequence, or its
// shard under sequence parallelism) and pos_offset the first position of the
// shard. wpe / dwpe are the whole [P, C] table, P >= pos_offset + T_local.
//
//   position_embedding_forward   out[N,C] += wpe[pos(n)]
//   position_embedding_backward  dwpe[pos(n)] += dout[n]
//
// Parameter gradients are fp32 and accumulated (+=). Both backward passes are
// deterministic: every element is summed over n in increasing order (token:
// threads split the columns C; position: threads split the positions), so the
// result does not depend on the number of threads.
#pragma once

#include <cstdint>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void token_embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_start,
                             int V_local);
template <class T>
void token_embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C,
                              int vocab_start, int V_local);

template <class T>
void position_embedding_forward(T* out, const T* wpe, int N, int T_local, int pos_offset, int C);
template <class T>
void position_embedding_backward(float* dwpe, const T* dout, int N, int T_local, int pos_offset, int C);

}  // namespace meshtrain::kernels
