#include "meshtrain/model/flops.h"

#include "meshtrain/model/activations.h"
#include "meshtrain/parallel/stage_layers.h"

namespace meshtrain {

double attention_core_flops_per_token(const ModelConfig& m) {
  return 4.0 * m.seq_length * m.hidden_size;
}

double block_forward_flops_per_token(const ModelConfig& m) {
  const double h = m.hidden_size, f = m.ffn(), kv = double(m.kv_heads()) * m.head_dim();
  const double weights = h * (h + 2 * kv) + h * h + (m.gated_mlp ? 3 : 2) * h * f;
  return 2.0 * weights + attention_core_flops_per_token(m);
}

double head_forward_flops_per_token(const ModelConfig& m) {
  return 2.0 * double(m.padded_vocab()) * m.hidden_size;
}

StepFlops step_flops(const ModelConfig& m, const ParallelConfig& p, double tokens) {
  const double blocks = m.num_layers * block_forward_flops_per_token(m);
  const double fwd = blocks + head_forward_flops_per_token(m);
  StepFlops f;
  f.model = 3.0 * fwd * tokens;
  double extra = 0;
  if (p.recompute == Recompute::full) {
    // The blocks that recompute: every one (uniform) or the first
    // recompute_num_layers of each model chunk (block).
    int recomputed = 0;
    for (const int chunk_layers : virtual_stage_layers(m.num_layers, p))
      for (int i = 0; i < chunk_layers; ++i) recomputed += block_is_recomputed(p, i, chunk_layers) ? 1 : 0;
    extra = double(recomputed) * block_forward_flops_per_token(m);
  } else if (p.recompute == Recompute::selective) {
    extra = m.num_layers * attention_core_flops_per_token(m);
  }
  f.hardware = f.model + extra * tokens;
  return f;
}

}  // namespace meshtrain
