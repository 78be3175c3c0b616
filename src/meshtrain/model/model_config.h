// ModelConfig: the shape of a GPT-style decoder, GPT-2 (LayerNorm, GELU MLP,
// learned positions, tied embedding, biases) or Llama (RMSNorm, SwiGLU MLP,
// rotary positions, grouped-query attention, untied embedding, no biases)
// or any mix; the engine trains and the performance model costs every field.
// The JSON names follow Megatron-LM's flags where one exists
// ("normalization": "RMSNorm", "position_embedding_type": "rope",
// "norm_epsilon"); "rope_scaling" is Hugging Face's object (rope_scaling.h).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/model/rope_scaling.h"

namespace meshtrain {

struct ModelConfig {
  std::string name = "custom";
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;             // 0: equal to num_attention_heads
  int ffn_hidden_size = 0;          // 0: 4 * hidden_size
  int seq_length = 0;
  int max_position_embeddings = 0;  // 0: equal to seq_length
  int vocab_size = 0;
  bool gated_mlp = false;           // SwiGLU: three FFN matrices instead of two
  bool tied_embeddings = true;
  bool learned_positions = true;    // false: no position table
  bool rotary = false;              // rotary position embedding of q and k (needs
                                    // learned_positions false and an even head_dim)
  double rotary_base = 10000;       // --rotary-base
  RopeScaling rope_scaling;         // Llama 3.1's "llama3" or "linear" (rotary only)
  bool rmsnorm = false;             // --normalization RMSNorm (weights only), else LayerNorm
  double norm_epsilon = 1e-5;       // --norm-epsilon: both norms' eps (kernels::kLayerNormEps)
  bool bias_linear = true;          // false: --disable-bias-linear (no qkv/proj/fc/fc2 biases)

  int head_dim() const { return hidden_size / num_attention_heads; }
  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_attention_heads; }
  int ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int max_positions() const { return max_position_embeddings > 0 ? max_position_embeddings : seq_length; }
  // Vocabulary rounded up to a multiple of 128, as Megatron pads it. The
  // padding rows exist in the embedding but are masked out of the softmax.
  int64_t padded_vocab() const { return (static_cast<int64_t>(vocab_size) + 127) / 128 * 128; }

  // Parameters of the unsharded model (padded vocabulary included).
  int64_t num_parameters() const;
  // Parameters of one transformer block.
  int64_t block_parameters() const;

  // "learned_absolute", "rope" or "none" (Megatron's --position-embedding-type).
  std::string position_embedding_type() const;
  // Sets learned_positions and rotary from such a name; throws Error on
  // another.
  void set_position_embedding_type(const std::string& type);
  // "LayerNorm" or "RMSNorm" (Megatron's --normalization); the setter throws
  // Error on another name.
  std::string normalization() const { return rmsnorm ? "RMSNorm" : "LayerNorm"; }
  void set_normalization(const std::string& name);

  // Throws Error naming the first violated constraint: positive sizes, hidden
  // divisible by heads, heads divisible by kv heads, seq <= positions.
  void validate() const;
};

// Megatron-LM's command-line flag of each integer shape field (read by the
// launch scripts and by `sweep`).
struct ShapeFlag {
  const char* flag;
  int ModelConfig::*field;
};
inline constexpr ShapeFlag kShapeFlags[] = {{"--num-layers", &ModelConfig::num_layers},
                                            {"--hidden-size", &ModelConfig::hidden_size},
                                            {"--num-attention-heads", &ModelConfig::num_attention_heads},
                                            {"--ffn-hidden-size", &ModelConfig::ffn_hidden_size},
                                            {"--seq-length", &ModelConfig::seq_length},
                                            {"--max-position-embeddings", &ModelConfig::max_position_embeddings},
                                            {"--vocab-size", &ModelConfig::vocab_size}};

void to_json(nlohmann::json& j, const ModelConfig& m);
void from_json(const nlohmann::json& j, ModelConfig& m);

// Loads a preset by name ("tiny", "22b") from configs/models, or a JSON path:
// this project's fields, or a Hugging Face config.json (hf_config.h).
ModelConfig load_model_config(const std::string& name_or_path);

// The folder holding the model and system presets: MESHTRAIN_CONFIG_DIR when
// set, else PREFIX/share/meshtrain/configs beside an installed binary, else the
// source tree's configs/.
std::string config_root();

}  // namespace meshtrain
