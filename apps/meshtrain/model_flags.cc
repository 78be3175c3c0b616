#include "model_flags.h"

#include "meshtrain/core/error.h"

namespace meshtrain::cli {

void add_arch_flags(CLI::App* cmd, ArchFlags& f, const std::string& group) {
  cmd->add_option("--normalization", f.normalization, "LayerNorm or RMSNorm")->group(group);
  cmd->add_flag("--swiglu", f.swiglu, "SwiGLU MLP (gate and up projections)")->group(group);
  cmd->add_option("--position-embedding-type", f.position_embedding_type, "learned_absolute, rope or none")
      ->group(group);
  cmd->add_option("--rotary-base", f.rotary_base, "Base of the rotary embedding's frequencies (default 10000)")
      ->group(group);
  cmd->add_flag("--use-rope-scaling", f.use_rope_scaling,
                "Llama 3.1's rotary frequency scaling (llama3: factor 8, frequency factors 1 and 4, context 8192)")
      ->group(group);
  cmd->add_option("--rope-scaling-factor", f.rope_scaling_factor, "Factor of --use-rope-scaling (default 8)")
      ->group(group);
  cmd->add_option("--norm-epsilon", f.norm_epsilon, "Epsilon of the LayerNorm/RMSNorm (default 1e-5)")->group(group);
  cmd->add_flag("--group-query-attention", f.group_query_attention, "Grouped-query attention (--num-query-groups)")
      ->group(group);
  cmd->add_option("--num-query-groups", f.num_query_groups, "Key/value heads (grouped-query attention)")->group(group);
  cmd->add_flag("--untie-embeddings-and-output-weights", f.untie, "An output matrix of its own")->group(group);
  cmd->add_flag("--disable-bias-linear", f.disable_bias_linear, "No biases in the attention and MLP matmuls")
      ->group(group);
}

void apply_arch_flags(const ArchFlags& f, ModelConfig& m) {
  if (f.normalization) m.set_normalization(*f.normalization);
  if (f.swiglu) m.gated_mlp = true;
  if (f.position_embedding_type) m.set_position_embedding_type(*f.position_embedding_type);
  if (f.rotary_base) {
    check(m.rotary, "--rotary-base needs rotary positions (--position-embedding-type rope)");
    m.rotary_base = *f.rotary_base;
  }
  if (f.use_rope_scaling) {
    check(m.rotary, "--use-rope-scaling needs rotary positions (--position-embedding-type rope)");
    m.rope_scaling = RopeScaling{RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 8192};
  }
  if (f.rope_scaling_factor) {
    check(f.use_rope_scaling || m.rope_scaling.type != RopeScaling::Type::none,
          "--rope-scaling-factor needs a rope scaling (--use-rope-scaling)");
    m.rope_scaling.factor = *f.rope_scaling_factor;
  }
  if (f.norm_epsilon) m.norm_epsilon = *f.norm_epsilon;
  check(!f.group_query_attention || f.num_query_groups,
        "--group-query-attention needs --num-query-groups (the number of key/value heads)");
  if (f.num_query_groups) {
    check(*f.num_query_groups > 0, "num-query-groups must be positive (got {})", *f.num_query_groups);
    m.num_kv_heads = *f.num_query_groups;
  }
  if (f.untie) m.tied_embeddings = false;
  if (f.disable_bias_linear) m.bias_linear = false;
}

}  // namespace meshtrain::cli
