#include "meshtrain/model/model_config.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "meshtrain/core/checked.h"
#include "meshtrain/core/error.h"
#include "meshtrain/model/hf_config.h"

#ifndef MESHTRAIN_SOURCE_CONFIG_DIR
#define MESHTRAIN_SOURCE_CONFIG_DIR "."
#endif

namespace meshtrain {

int64_t ModelConfig::block_parameters() const {
  // Shapes pass validate() first; the products are checked all the same.
  const char* what = "the parameter count of one block";
  const int64_t h = hidden_size, f = ffn(), kv = static_cast<int64_t>(kv_heads()) * head_dim();
  const int64_t b = bias_linear ? 1 : 0;
  const int64_t qkv = checked_add(h, 2 * kv, what);
  const int64_t attn =
      checked_add(checked_mul(h, qkv, what), checked_mul(h, h, what), what) + b * (qkv + h);  // qkv + proj
  const int64_t hf = checked_mul(h, f, what);
  const int64_t mlp =
      checked_add(checked_mul(gated_mlp ? 3 : 2, hf, what), b * ((gated_mlp ? 2 * f : f) + h), what);
  const int64_t norms = rmsnorm ? 2 * h : 4 * h;
  return checked_add(checked_add(attn, mlp, what), norms, what);
}

int64_t ModelConfig::num_parameters() const {
  const char* what = "the model's parameter count";
  const int64_t h = hidden_size;
  const int64_t words = checked_mul(padded_vocab(), h, what);
  int64_t n = checked_add(words, learned_positions ? checked_mul(max_positions(), h, what) : 0, what);
  n = checked_add(n, checked_mul(num_layers, block_parameters(), what), what);
  n = checked_add(n, rmsnorm ? h : 2 * h, what);  // final norm
  if (!tied_embeddings) n = checked_add(n, words, what);
  return n;
}

void ModelConfig::validate() const {
  check(num_layers > 0, "num-layers must be positive (got {})", num_layers);
  check(hidden_size > 0, "hidden-size must be positive (got {})", hidden_size);
  check(num_attention_heads > 0, "num-attention-heads must be positive (got {})", num_attention_heads);
  check(seq_length > 0, "seq-length must be positive (got {})", seq_length);
  check(vocab_size > 0, "vocab-size must be positive (got {})", vocab_size);
  check(num_kv_heads >= 0, "num-kv-heads must not be negative (got {})", num_kv_heads);
  check(ffn_hidden_size >= 0, "ffn-hidden-size must not be negative (got {})", ffn_hidden_size);
  check(max_position_embeddings >= 0, "max-position-embeddings must not be negative (got {})",
        max_position_embeddings);
  check(hidden_size % num_attention_heads == 0,
        "hidden-size {} is not divisible by num-attention-heads {}", hidden_size, num_attention_heads);
  check(num_attention_heads % kv_heads() == 0,
        "num-attention-heads {} is not divisible by num-kv-heads {}", num_attention_heads, kv_heads());
  check(seq_length <= max_positions(), "seq-length {} exceeds max-position-embeddings {}", seq_length,
        max_positions());
  check(ffn_hidden_size > 0 || hidden_size <= INT32_MAX / 4,
        "hidden-size {} is too large: the default ffn-hidden-size 4 x {} does not fit in 32 bits", hidden_size,
        hidden_size);
  num_parameters();  // throws when the count overflows 64 bits
  check(!(rotary && learned_positions), "rotary and learned position embeddings exclude each other");
  check(!rotary || head_dim() % 2 == 0, "rotary position embedding needs an even head dimension (got {})", head_dim());
  check(!rotary || (rotary_base > 0 && std::isfinite(rotary_base)), "rotary-base must be positive (got {})",
        rotary_base);
  check(rotary || rope_scaling.type == RopeScaling::Type::none,
        "rope_scaling '{}' needs rotary positions (position_embedding_type rope)", rope_scaling.type_name());
  rope_scaling.validate();
  check(norm_epsilon > 0 && std::isfinite(norm_epsilon), "norm-epsilon must be positive (got {})", norm_epsilon);
}

std::string ModelConfig::position_embedding_type() const {
  return learned_positions ? "learned_absolute" : rotary ? "rope" : "none";
}

void ModelConfig::set_position_embedding_type(const std::string& type) {
  check(type == "learned_absolute" || type == "rope" || type == "none",
        "position-embedding-type must be learned_absolute, rope or none (got '{}')", type);
  learned_positions = type == "learned_absolute";
  rotary = type == "rope";
}

void ModelConfig::set_normalization(const std::string& name) {
  check(name == "LayerNorm" || name == "RMSNorm", "normalization must be LayerNorm or RMSNorm (got '{}')", name);
  rmsnorm = name == "RMSNorm";
}

void to_json(nlohmann::json& j, const ModelConfig& m) {
  j = nlohmann::json{{"name", m.name},
                     {"num_layers", m.num_layers},
                     {"hidden_size", m.hidden_size},
                     {"num_attention_heads", m.num_attention_heads},
                     {"num_kv_heads", m.kv_heads()},
                     {"ffn_hidden_size", m.ffn()},
                     {"seq_length", m.seq_length},
                     {"max_position_embeddings", m.max_positions()},
                     {"vocab_size", m.vocab_size},
                     {"padded_vocab_size", m.padded_vocab()},
                     {"gated_mlp", m.gated_mlp},
                     {"tied_embeddings", m.tied_embeddings},
                     {"learned_positions", m.learned_positions},
                     {"position_embedding_type", m.position_embedding_type()},
                     {"rotary_base", m.rotary_base},
                     {"rope_scaling", rope_scaling_to_json(m.rope_scaling)},
                     {"normalization", m.normalization()},
                     {"norm_epsilon", m.norm_epsilon},
                     {"add_bias_linear", m.bias_linear},
                     {"parameters", m.num_parameters()}};
}

void from_json(const nlohmann::json& j, ModelConfig& m) {
  static const char* known[] = {"name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                                "ffn_hidden_size", "seq_length", "max_position_embeddings", "vocab_size",
                                "gated_mlp", "tied_embeddings", "learned_positions", "padded_vocab_size",
                                "parameters", "description", "position_embedding_type", "rotary_base",
                                "normalization", "add_bias_linear", "rope_scaling", "norm_epsilon"};
  check(j.is_object(), "a model description is a JSON object (got {})", j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok |= it.key() == k;
    check(ok, "unknown model field '{}'", it.key());
  }
  // Integer fields must be JSON integers within int's range: 2.7 or
  // 4294967360 are errors, never truncated or wrapped.
  auto get = [&](const char* k, auto& v) {
    if (!j.contains(k)) return;
    const nlohmann::json& x = j.at(k);
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, int>) {
      check(x.is_number_integer(), "model field '{}' must be an integer (got {})", k, x.dump());
      const bool fits = x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t{INT32_MAX}
                                               : x.get<int64_t>() >= INT32_MIN && x.get<int64_t>() <= INT32_MAX;
      check(fits, "model field '{}' = {} is out of range (at most {})", k, x.dump(), INT32_MAX);
    } else if constexpr (std::is_same_v<T, bool>) {
      check(x.is_boolean(), "model field '{}' must be true or false (got {})", k, x.dump());
    } else if constexpr (std::is_same_v<T, double>) {
      check(x.is_number(), "model field '{}' must be a number (got {})", k, x.dump());
    } else {
      check(x.is_string(), "model field '{}' must be a string (got {})", k, x.dump());
    }
    x.get_to(v);
  };
  get("name", m.name);
  get("num_layers", m.num_layers);
  get("hidden_size", m.hidden_size);
  get("num_attention_heads", m.num_attention_heads);
  get("num_kv_heads", m.num_kv_heads);
  get("ffn_hidden_size", m.ffn_hidden_size);
  get("seq_length", m.seq_length);
  get("max_position_embeddings", m.max_position_embeddings);
  get("vocab_size", m.vocab_size);
  get("gated_mlp", m.gated_mlp);
  get("tied_embeddings", m.tied_embeddings);
  get("learned_positions", m.learned_positions);
  if (j.contains("position_embedding_type")) {
    const std::string type = j.at("position_embedding_type").get<std::string>();
    m.set_position_embedding_type(type);
    if (j.contains("learned_positions"))
      check(j.at("learned_positions").get<bool>() == m.learned_positions,
            "learned_positions {} contradicts position_embedding_type '{}'", j.at("learned_positions").dump(), type);
  }
  get("rotary_base", m.rotary_base);
  if (j.contains("rope_scaling")) m.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"));
  get("norm_epsilon", m.norm_epsilon);
  if (j.contains("normalization")) m.set_normalization(j.at("normalization").get<std::string>());
  get("add_bias_linear", m.bias_linear);
}

std::string config_root() {
  if (const char* e = std::getenv("MESHTRAIN_CONFIG_DIR")) return e;
  // An installed binary (PREFIX/bin/meshtrain) reads PREFIX/share/meshtrain/configs,
  // wherever it is run from; a binary in its build tree reads the source tree.
  static const std::string installed = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return std::string();
    const std::filesystem::path dir = exe.parent_path().parent_path() / "share" / "meshtrain" / "configs";
    return std::filesystem::is_directory(dir, ec) ? dir.string() : std::string();
  }();
  return installed.empty() ? MESHTRAIN_SOURCE_CONFIG_DIR : installed;
}

ModelConfig load_model_config(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  // A bare name is a preset; anything with a slash or a .json suffix a file.
  const bool is_path = name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".json";
  const fs::path p = is_path ? fs::path(name_or_path) : fs::path(config_root()) / "models" / (name_or_path + ".json");
  std::error_code ec;
  check(fs::is_regular_file(p, ec), "model '{}' not found ({} is not a file{})", name_or_path, p.string(),
        is_path ? "" : "; presets live in " + config_root() + "/models");
  std::ifstream f(p);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("model file {}: invalid JSON ({})", p.string(), e.what()));
  }
  ModelConfig m;
  try {
    if (is_hf_config(j)) {
      // A transformers checkout: name it after its folder (".../Llama-2-7b-hf/config.json").
      const fs::path dir = fs::absolute(p).parent_path();
      return model_from_hf_config(j, dir.has_filename() ? dir.filename().string() : p.stem().string());
    }
    m = j.get<ModelConfig>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("model file {}: {}", p.string(), e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("model file {}: {}", p.string(), e.what()));
  }
  return m;
}

}  // namespace meshtrain
