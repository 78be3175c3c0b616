// The Megatron-LM flags that choose a model's architecture, shared by the
// commands that take a model (train, predict). Each overrides the --model
// file:
//   --normalization LayerNorm|RMSNorm   --swiglu
//   --position-embedding-type learned_absolute|rope|none   --rotary-base B
//   --use-rope-scaling (Llama 3.1's "llama3" scaling: factor 8, low/high
//     frequency factors 1 and 4, original context 8192, as Megatron-core)
//     --rope-scaling-factor F
//   --norm-epsilon E (both norms; default 1e-5)
//   --group-query-attention --num-query-groups G (G key/value heads; the
//     latter alone also sets G)
//   --untie-embeddings-and-output-weights   --disable-bias-linear
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "meshtrain/model/model_config.h"

namespace meshtrain::cli {

struct ArchFlags {
  std::optional<std::string> normalization, position_embedding_type;
  std::optional<double> rotary_base, rope_scaling_factor, norm_epsilon;
  std::optional<int> num_query_groups;
  bool use_rope_scaling = false;
  bool swiglu = false, group_query_attention = false, untie = false, disable_bias_linear = false;
};

void add_arch_flags(CLI::App* cmd, ArchFlags& f, const std::string& group);
// Applies the given flags to m; throws Error on an invalid value or
// combination.
void apply_arch_flags(const ArchFlags& f, ModelConfig& m);

}  // namespace meshtrain::cli
