// FLOP convention (docs/PERFORMANCE-MODEL.md). A multiply-add is 2 FLOPs.
// A block's forward counts its weight GEMMs (2 x tokens x in x out each) and
// the attention core over the full s x s score matrix (4 x tokens x s x h:
// QK^T and PV), with no halving for the causal mask; the LM head counts
// 2 x tokens x h x V (padded vocabulary); embedding lookups, LayerNorm,
// GELU, softmax and the optimizer count 0. Backward = 2 x forward.
//
// Model FLOPs (MFU) = 3 x forward of blocks and head, recompute not counted:
// for the GPT shape this is Narayanan et al. (SC21) / PaLM's
//   72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
// Hardware FLOPs (HFU) add what recompute runs again: the blocks' forward
// under full recompute (4 x forward, Narayanan et al.'s 96 B s l h^2 (1 +
// s/(6h) + V/(16 l h))), the attention core's forward under selective.
#pragma once

#include <cstdint>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::perf {

// Forward FLOPs of one unsplit block over `tokens` tokens, split into the
// weight GEMMs and the attention core.
double block_gemm_forward_flops(const ModelConfig& m, double tokens);
double attention_core_forward_flops(const ModelConfig& m, double tokens);
double head_forward_flops(const ModelConfig& m, double tokens);

// Per optimizer step, over all ranks, for global_batch_size sequences.
double model_flops_per_step(const ModelConfig& m, const ParallelConfig& p);
double hardware_flops_per_step(const ModelConfig& m, const ParallelConfig& p);

}  // namespace meshtrain::perf
