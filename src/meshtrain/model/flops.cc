#include "meshtrain/model/flops.h"

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
    const double share = p.recompute_method == RecomputeMethod::uniform
                             ? 1.0
                             : std::min(1.0, double(p.recompute_num_layers) * p.pp * p.vpp / m.num_layers);
    extra = blocks * share;
  } else if (p.recompute == Recompute::selective) {
    extra = m.num_layers * attention_core_flops_per_token(m);
  }
  f.hardware = f.model + extra * tokens;
  return f;
}

}  // namespace meshtrain
