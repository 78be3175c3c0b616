// Reads a Hugging Face transformers config.json of a LlamaForCausalLM or a
// GPT2LMHeadModel into a ModelConfig, by the field names transformers writes:
//
//   Llama: hidden_size, intermediate_size, num_hidden_layers,
//     num_attention_heads, num_key_value_heads (default: heads),
//     max_position_embeddings, vocab_size, rope_theta (default 10000),
//     tie_word_embeddings (default false), hidden_act (silu),
//     rms_norm_eps (default 1e-5), attention_bias / mlp_bias (equal),
//     head_dim (hidden / heads if given), rope_scaling (null, or the types
//     "linear" and "llama3" of rope_scaling.h: Llama 3.1 and 3.2)
//   GPT-2: n_embd, n_layer, n_head, n_inner (null: 4 x n_embd), n_positions,
//     vocab_size, activation_function (gelu_new), layer_norm_epsilon (1e-5),
//     tie_word_embeddings (default true), scale_attn_weights (true),
//     scale_attn_by_inverse_layer_idx and reorder_and_upcast_attn (false)
//
// The engine's choices: RMSNorm + SwiGLU + rotary + no biases for Llama,
// LayerNorm + GELU + learned positions + biases for GPT-2. A field whose
// value the engine cannot represent (another activation or head size, a
// rope scaling type other than linear and llama3) is an Error naming it; fields that do not shape
// the model (token ids, dropout, dtype, cache, versions) are ignored. The
// sequence length is the context (max_position_embeddings / n_positions);
// --seq-length shortens it.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/model/model_config.h"

namespace meshtrain {

// Whether j is a transformers config (it has "architectures" or "model_type").
bool is_hf_config(const nlohmann::json& j);

// The model of a transformers config; `name` becomes its name. Throws Error
// for another architecture or an unrepresentable field.
ModelConfig model_from_hf_config(const nlohmann::json& j, const std::string& name);

}  // namespace meshtrain
