// The matmul shapes one rank's layers produce (for `meshtrain bench gemm`):
// out[M, N] = inp[M, K] . W[N, K]^T as kernels/matmul.h defines it, with
// M = micro-batch x sequence rows (the full sequence: with sequence
// parallelism the input is gathered before each column-parallel matmul) and
// the tensor-parallel split of each layer (model/tensor_parallel.h):
//   qkv     column-parallel  K = h,        N = (heads + 2 kv heads) x head_dim / tp
//   proj    row-parallel     K = h / tp,   N = h
//   fc      column-parallel  K = h,        N = ffn / tp
//   fc2     row-parallel     K = ffn / tp, N = h
//   logits  vocabulary-parallel head, in passes of head_logits_rows rows:
//           M = rows per pass, K = h, N = padded vocab / tp
// Each runs forward (2MKN) and backward (input gradient 2MKN, weight
// gradient 2MKN).
#pragma once

#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"

namespace meshtrain {

struct GemmShape {
  std::string layer;  // qkv, proj, fc, fc2, logits
  int tp = 1, micro_batch = 1;
  int M = 0, K = 0, N = 0;
  int calls_per_micro_batch = 1;  // per layer (logits: the passes over the rows)
};

// Throws Error if tp does not divide heads, ffn or the padded vocabulary.
std::vector<GemmShape> layer_gemm_shapes(const ModelConfig& m, int tp, int micro_batch, bool bf16);

}  // namespace meshtrain
