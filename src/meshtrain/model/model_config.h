// ModelConfig: the shape of a GPT-style decoder. The engine trains the GPT-2
// subset (multi-head attention, GELU MLP, learned positions, tied embedding);
// the performance model costs every field (grouped-query attention, gated
// MLP, untied embeddings) since published runs use them.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

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
  bool learned_positions = true;    // false: no position table (the engine adds no
                                    // position signal; the cost model's view of rotary)

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

  // Throws Error naming the first violated constraint: positive sizes, hidden
  // divisible by heads, heads divisible by kv heads, seq <= positions.
  void validate() const;
};

void to_json(nlohmann::json& j, const ModelConfig& m);
void from_json(const nlohmann::json& j, ModelConfig& m);

// Loads a preset by name ("tiny", "22b") from configs/models, or a JSON path.
ModelConfig load_model_config(const std::string& name_or_path);

// The folder holding the model and system presets: MESHTRAIN_CONFIG_DIR when
// set, else PREFIX/share/meshtrain/configs beside an installed binary, else the
// source tree's configs/.
std::string config_root();

}  // namespace meshtrain
