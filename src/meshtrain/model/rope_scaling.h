// RopeScaling: how a model stretches its rotary position embedding beyond the
// context it was pre-trained on, and the rotary inverse frequencies and
// cos/sin table that follow from it (computed once per model, never per call).
//
//   none    inv_freq[i] = base^(-2i/hd), i < hd/2 (Su et al. 2021, RoFormer)
//   linear  inv_freq[i] / factor (position interpolation, Chen et al. 2023;
//           Hugging Face transformers' _compute_linear_scaling_rope_parameters)
//   llama3  Llama 3.1's frequency-dependent rescaling (Meta's reference
//           implementation, llama-models apply_scaling; transformers'
//           _compute_llama3_parameters): with wavelength w = 2 pi / inv_freq,
//           L = original_max_position_embeddings,
//             w < L / high_freq_factor   inv_freq                (unchanged)
//             w > L / low_freq_factor    inv_freq / factor
//             otherwise                  (1 - s) inv_freq / factor + s inv_freq,
//                                        s = (L / w - low_freq_factor) /
//                                            (high_freq_factor - low_freq_factor)
//
// JSON: null (none) or Hugging Face's object {"rope_type": "linear"|"llama3",
// "factor", "low_freq_factor", "high_freq_factor",
// "original_max_position_embeddings"}; the legacy key "type" names the type
// too. Any other type is an Error naming it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace meshtrain {

struct RopeScaling {
  enum class Type { none, linear, llama3 };
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;          // llama3 only
  double high_freq_factor = 4.0;         // llama3 only
  int original_max_position_embeddings = 8192;  // llama3 only

  // "none", "linear" or "llama3".
  std::string type_name() const;
  // Throws Error naming the first invalid field: factor > 0; llama3: low <
  // high frequency factors, both positive, a positive original context.
  void validate() const;
  bool operator==(const RopeScaling&) const = default;
};

// Reads Hugging Face's rope_scaling object (or null); throws Error on an
// unknown type, a missing or mistyped field.
RopeScaling rope_scaling_from_json(const nlohmann::json& j);
// null for none, else the object rope_scaling_from_json reads.
nlohmann::json rope_scaling_to_json(const RopeScaling& s);

// The inverse frequencies inv_freq[i], i < hd/2, of a rotary embedding with
// this base and scaling, in double.
std::vector<double> rope_inv_freq(int hd, double base, const RopeScaling& s);

// The table the rope kernels read, [S, hd] fp32: row t holds cos(t inv_freq[i])
// in its first hd/2 entries and sin(t inv_freq[i]) in the last hd/2 (angles in
// double).
std::vector<float> rope_cos_sin_table(int S, int hd, double base, const RopeScaling& s);

}  // namespace meshtrain
