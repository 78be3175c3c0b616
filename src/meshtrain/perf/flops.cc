#include "meshtrain/perf/flops.h"

#include "meshtrain/model/activations.h"

namespace meshtrain::perf {

double block_gemm_forward_flops(const ModelConfig& m, double tokens) {
  const double h = m.hidden_size, f = m.ffn(), kv = double(m.kv_heads()) * m.head_dim();
  const double qkv = h * (h + 2 * kv), proj = h * h, mlp = (m.gated_mlp ? 3 : 2) * h * f;
  return 2 * tokens * (qkv + proj + mlp);
}

double attention_core_forward_flops(const ModelConfig& m, double tokens) {
  return 4 * tokens * double(m.seq_length) * m.hidden_size;
}

double head_forward_flops(const ModelConfig& m, double tokens) {
  return 2 * tokens * double(m.hidden_size) * double(m.padded_vocab());
}

double model_flops_per_step(const ModelConfig& m, const ParallelConfig& p) {
  const double tokens = double(p.global_batch_size) * m.seq_length;
  const double fwd = m.num_layers * (block_gemm_forward_flops(m, tokens) + attention_core_forward_flops(m, tokens)) +
                     head_forward_flops(m, tokens);
  return 3 * fwd;
}

double hardware_flops_per_step(const ModelConfig& m, const ParallelConfig& p) {
  const double tokens = double(p.global_batch_size) * m.seq_length;
  const double block = block_gemm_forward_flops(m, tokens) + attention_core_forward_flops(m, tokens);
  double extra = 0;
  if (p.recompute == Recompute::full) {
    const int chunk_layers = m.num_layers / (p.pp * p.vpp);
    int recomputed = 0;
    for (int i = 0; i < chunk_layers; ++i) recomputed += block_is_recomputed(p, i, chunk_layers);
    extra = double(recomputed) * p.pp * p.vpp * block;
  } else if (p.recompute == Recompute::selective) {
    extra = m.num_layers * attention_core_forward_flops(m, tokens);
  }
  return model_flops_per_step(m, p) + extra;
}

}  // namespace meshtrain::perf
