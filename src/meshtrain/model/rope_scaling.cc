#include "meshtrain/model/rope_scaling.h"

#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string RopeScaling::type_name() const {
  switch (type) {
    case Type::linear: return "linear";
    case Type::llama3: return "llama3";
    case Type::none: break;
  }
  return "none";
}

void RopeScaling::validate() const {
  if (type == Type::none) return;
  check(factor > 0 && std::isfinite(factor), "rope_scaling factor must be positive (got {})", factor);
  if (type != Type::llama3) return;
  check(low_freq_factor > 0 && std::isfinite(low_freq_factor), "rope_scaling low_freq_factor must be positive (got {})",
        low_freq_factor);
  check(high_freq_factor > low_freq_factor && std::isfinite(high_freq_factor),
        "rope_scaling high_freq_factor {} must exceed low_freq_factor {}", high_freq_factor, low_freq_factor);
  check(original_max_position_embeddings > 0, "rope_scaling original_max_position_embeddings must be positive (got {})",
        original_max_position_embeddings);
}

RopeScaling rope_scaling_from_json(const nlohmann::json& j) {
  RopeScaling s;
  if (j.is_null()) return s;
  check(j.is_object(), "rope_scaling must be null or an object (got {})", j.dump());
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  check(j.contains(type_key) && j.at(type_key).is_string(), "rope_scaling {} names no rope_type", j.dump());
  const std::string type = j.at(type_key).get<std::string>();
  check(type == "linear" || type == "llama3" || type == "default",
        "rope_scaling type '{}' is not supported (linear or llama3)", type);
  if (type == "default") return s;
  s.type = type == "linear" ? RopeScaling::Type::linear : RopeScaling::Type::llama3;
  auto number = [&](const char* key, auto& v, bool required) {
    if (!j.contains(key)) {
      check(!required, "rope_scaling type '{}' needs field '{}'", type, key);
      return;
    }
    const nlohmann::json& x = j.at(key);
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int>)
      check(x.is_number_integer(), "rope_scaling field '{}' must be an integer (got {})", key, x.dump());
    else
      check(x.is_number(), "rope_scaling field '{}' must be a number (got {})", key, x.dump());
    x.get_to(v);
  };
  number("factor", s.factor, true);
  if (s.type == RopeScaling::Type::llama3) {
    number("low_freq_factor", s.low_freq_factor, true);
    number("high_freq_factor", s.high_freq_factor, true);
    number("original_max_position_embeddings", s.original_max_position_embeddings, true);
  }
  s.validate();
  return s;
}

nlohmann::json rope_scaling_to_json(const RopeScaling& s) {
  if (s.type == RopeScaling::Type::none) return nullptr;
  nlohmann::json j{{"rope_type", s.type_name()}, {"factor", s.factor}};
  if (s.type == RopeScaling::Type::llama3) {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
    j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  return j;
}

std::vector<double> rope_inv_freq(int hd, double base, const RopeScaling& s) {
  std::vector<double> f(static_cast<size_t>(hd / 2));
  for (int i = 0; i < hd / 2; ++i) f[i] = std::pow(base, -2.0 * i / hd);
  if (s.type == RopeScaling::Type::linear)
    for (double& x : f) x /= s.factor;
  if (s.type != RopeScaling::Type::llama3) return f;
  const double L = s.original_max_position_embeddings;
  const double low_wavelen = L / s.low_freq_factor, high_wavelen = L / s.high_freq_factor;
  for (double& x : f) {
    const double wavelen = 2 * std::numbers::pi / x;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      x /= s.factor;
    } else {
      const double smooth = (L / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      x = (1 - smooth) * x / s.factor + smooth * x;
    }
  }
  return f;
}

std::vector<float> rope_cos_sin_table(int S, int hd, double base, const RopeScaling& s) {
  const std::vector<double> f = rope_inv_freq(hd, base, s);
  const int half = hd / 2;
  std::vector<float> t(static_cast<size_t>(S) * hd);
  for (int p = 0; p < S; ++p)
    for (int i = 0; i < half; ++i) {
      const double theta = p * f[i];
      t[static_cast<size_t>(p) * hd + i] = static_cast<float>(std::cos(theta));
      t[static_cast<size_t>(p) * hd + half + i] = static_cast<float>(std::sin(theta));
    }
  return t;
}

}  // namespace meshtrain
