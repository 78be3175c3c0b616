#include "meshtrain/model/hf_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

using json = nlohmann::json;

// Field `key` of j (required), as T.
template <class T>
T field(const json& j, const char* key) {
  check(j.contains(key) && !j.at(key).is_null(), "Hugging Face config: missing field '{}'", key);
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("Hugging Face config: field '{}' has the wrong type ({})", key, j.at(key).dump()));
  }
}

// Field `key` of j, or `fallback` when absent or null.
template <class T>
T field_or(const json& j, const char* key, T fallback) {
  return j.contains(key) && !j.at(key).is_null() ? field<T>(j, key) : fallback;
}

// The norms' epsilon (transformers' default 1e-5 for both architectures).
double epsilon(const json& j, const char* key) {
  const double eps = field_or<double>(j, key, 1e-5);
  check(eps > 0 && std::isfinite(eps), "Hugging Face config: {} {} must be positive", key, eps);
  return eps;
}

ModelConfig from_llama(const json& j) {
  ModelConfig m;
  m.hidden_size = field<int>(j, "hidden_size");
  m.ffn_hidden_size = field<int>(j, "intermediate_size");
  m.num_layers = field<int>(j, "num_hidden_layers");
  m.num_attention_heads = field<int>(j, "num_attention_heads");
  m.num_kv_heads = field_or<int>(j, "num_key_value_heads", m.num_attention_heads);
  m.max_position_embeddings = field<int>(j, "max_position_embeddings");
  m.seq_length = m.max_position_embeddings;
  m.vocab_size = field<int>(j, "vocab_size");
  m.tied_embeddings = field_or<bool>(j, "tie_word_embeddings", false);
  m.gated_mlp = true;
  m.rmsnorm = true;
  m.set_position_embedding_type("rope");
  m.rotary_base = field_or<double>(j, "rope_theta", 10000.0);
  const std::string act = field_or<std::string>(j, "hidden_act", "silu");
  check(act == "silu", "Hugging Face config: hidden_act '{}' is not supported (SwiGLU uses silu)", act);
  m.norm_epsilon = epsilon(j, "rms_norm_eps");
  const bool attn_bias = field_or<bool>(j, "attention_bias", false), mlp_bias = field_or<bool>(j, "mlp_bias", attn_bias);
  check(attn_bias == mlp_bias, "Hugging Face config: attention_bias {} and mlp_bias {} differ (one bias setting)",
        attn_bias, mlp_bias);
  m.bias_linear = attn_bias;
  if (j.contains("rope_scaling")) {
    try {
      m.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"));
    } catch (const Error& e) {
      throw Error(fmt::format("Hugging Face config: {}", e.what()));
    }
  }
  if (j.contains("head_dim") && !j.at("head_dim").is_null() && m.num_attention_heads > 0) {
    const int hd = field<int>(j, "head_dim");
    check(hd * m.num_attention_heads == m.hidden_size,
          "Hugging Face config: head_dim {} is not hidden_size / num_attention_heads = {} / {}", hd, m.hidden_size,
          m.num_attention_heads);
  }
  return m;
}

ModelConfig from_gpt2(const json& j) {
  ModelConfig m;
  m.hidden_size = field<int>(j, "n_embd");
  m.num_layers = field<int>(j, "n_layer");
  m.num_attention_heads = field<int>(j, "n_head");
  m.ffn_hidden_size = field_or<int>(j, "n_inner", 0);  // 0: 4 x hidden
  m.max_position_embeddings = field<int>(j, "n_positions");
  m.seq_length = m.max_position_embeddings;
  m.vocab_size = field<int>(j, "vocab_size");
  m.tied_embeddings = field_or<bool>(j, "tie_word_embeddings", true);
  const std::string act = field_or<std::string>(j, "activation_function", "gelu_new");
  check(act == "gelu_new" || act == "gelu_pytorch_tanh",
        "Hugging Face config: activation_function '{}' is not supported (the engine's GELU is the tanh form, gelu_new)",
        act);
  m.norm_epsilon = epsilon(j, "layer_norm_epsilon");
  check(field_or<bool>(j, "scale_attn_weights", true), "Hugging Face config: scale_attn_weights false is not supported");
  for (const char* k : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"})
    check(!field_or<bool>(j, k, false), "Hugging Face config: {} true is not supported", k);
  return m;
}

}  // namespace

bool is_hf_config(const json& j) { return j.is_object() && (j.contains("architectures") || j.contains("model_type")); }

ModelConfig model_from_hf_config(const json& j, const std::string& name) {
  std::string arch = j.contains("architectures") && j.at("architectures").is_array() && !j.at("architectures").empty()
                         ? j.at("architectures")[0].get<std::string>()
                         : "";
  const std::string type = field_or<std::string>(j, "model_type", "");
  if (arch.empty()) arch = type == "llama" ? "LlamaForCausalLM" : type == "gpt2" ? "GPT2LMHeadModel" : type;
  check(arch == "LlamaForCausalLM" || arch == "GPT2LMHeadModel",
        "Hugging Face config: architecture '{}' is not supported (LlamaForCausalLM or GPT2LMHeadModel)", arch);
  ModelConfig m = arch == "LlamaForCausalLM" ? from_llama(j) : from_gpt2(j);
  m.name = name;
  return m;
}

}  // namespace meshtrain
