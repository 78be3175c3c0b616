// The FLOP convention (docs/MEASUREMENT.md): a multiply-add is 2 FLOPs;
// matmuls and attention scores are counted, element-wise work is not, as in
// Megatron-LM (Narayanan et al. 2021) and PaLM (Chowdhery et al. 2022).
// Attention is counted dense (S^2, as if no causal mask), which is the
// convention of published MFU figures; the causal kernel executes about
// half of it.
//
//   forward per token = 2 x (matmul weights of all blocks + vocab x h)
//                     + 4 x S x h x layers            (QK^T and PV)
//   model FLOPs       = 3 x forward x tokens          (backward = 2 x forward)
//   hardware FLOPs    = model FLOPs + recomputed forward work:
//                       full: the blocks' forward again; selective: the
//                       attention core (QK^T, PV) again
// For a GPT with 4h FFN this is Narayanan et al.'s
// 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
#pragma once

#include <algorithm>
#include <cstdint>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

struct StepFlops {
  double model = 0;     // MFU numerator
  double hardware = 0;  // HFU numerator (recompute counted)
};

// Forward FLOPs per token: blocks only, and the logits.
double block_forward_flops_per_token(const ModelConfig& m);  // one layer, attention included
double attention_core_flops_per_token(const ModelConfig& m);  // one layer: QK^T and PV
double head_forward_flops_per_token(const ModelConfig& m);

// FLOPs of a step that consumes `tokens` tokens.
StepFlops step_flops(const ModelConfig& m, const ParallelConfig& p, double tokens);

}  // namespace meshtrain
