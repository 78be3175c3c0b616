#include "meshtrain/model/embedding_layer.h"

#include <algorithm>

#include "meshtrain/core/dtype.h"
#include "meshtrain/kernels/embedding.h"

namespace meshtrain {

// Position of local row n is (first_row + n) % S; runs of rows within one
// sequence go to the kernel as one call each.
template <class T, class F>
static void for_each_sequence_run(int64_t first_row, int64_t rows, int S, F&& f) {
  for (int64_t n = 0; n < rows;) {
    const int pos = static_cast<int>((first_row + n) % S);
    const int64_t len = std::min<int64_t>(S - pos, rows - n);
    f(n, len, pos);
    n += len;
  }
}

template <class T>
void embedding_forward(T* out, T* scratch, const int32_t* tokens, const T* wte, const T* wpe, const EmbeddingDims& d,
                       const TpContext& tp) {
  const int N = static_cast<int>(d.N());
  if (d.sp) {
    kernels::token_embedding_forward(scratch, tokens, wte, N, d.h, d.vocab_start, d.vocab_local);
    tp.comm->reduce_scatter(scratch, out, d.Ns() * d.h);
  } else {
    kernels::token_embedding_forward(out, tokens, wte, N, d.h, d.vocab_start, d.vocab_local);
    if (tp.size() > 1) tp.comm->all_reduce(out, d.N() * d.h);
  }
  if (!wpe) return;
  const int64_t first = d.sp ? tp.rank() * d.Ns() : 0;
  for_each_sequence_run<T>(first, d.Ns(), d.S, [&](int64_t n, int64_t len, int pos) {
    kernels::position_embedding_forward(out + n * d.h, wpe, static_cast<int>(len), static_cast<int>(len), pos, d.h);
  });
}

template <class T>
void embedding_backward(float* dwte, float* dwpe, T* scratch, const T* dout, const int32_t* tokens,
                        const EmbeddingDims& d, const TpContext& tp) {
  if (dwpe) {
    const int64_t first = d.sp ? tp.rank() * d.Ns() : 0;
    for_each_sequence_run<T>(first, d.Ns(), d.S, [&](int64_t n, int64_t len, int pos) {
      kernels::position_embedding_backward(dwpe, dout + n * d.h, static_cast<int>(len), static_cast<int>(len), pos,
                                           d.h);
    });
  }
  const T* dfull = dout;
  if (d.sp) {
    tp.comm->all_gather(dout, scratch, d.Ns() * d.h);
    dfull = scratch;
  }
  kernels::token_embedding_backward(dwte, dfull, tokens, static_cast<int>(d.N()), d.h, d.vocab_start, d.vocab_local);
}

template void embedding_forward<float>(float*, float*, const int32_t*, const float*, const float*,
                                       const EmbeddingDims&, const TpContext&);
template void embedding_forward<bf16>(bf16*, bf16*, const int32_t*, const bf16*, const bf16*, const EmbeddingDims&,
                                      const TpContext&);
template void embedding_backward<float>(float*, float*, float*, const float*, const int32_t*, const EmbeddingDims&,
                                        const TpContext&);
template void embedding_backward<bf16>(float*, float*, bf16*, const bf16*, const int32_t*, const EmbeddingDims&,
                                       const TpContext&);

}  // namespace meshtrain
