// Rotary frequency scaling (rope_scaling.h) against the closed forms of
// position interpolation and of Llama 3.1's rescaling (Meta's llama-models
// apply_scaling; Hugging Face transformers' _compute_llama3_parameters), the
// cos/sin table the kernels read, the JSON forms, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/model/rope_scaling.h"

namespace meshtrain {
namespace {

RopeScaling llama31() { return RopeScaling{RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 8192}; }

// Llama 3.1 8B (hd 128, base 500000, factor 8, frequency factors 1 and 4,
// original context 8192): wavelengths 2 pi / f below 8192 / 4 = 2048 keep
// their frequency (i < 29), those above 8192 are divided by 8 (i > 34), and
// in between f' = f (1 + (factor - 1) s) / factor with s = (8192 / wavelength
// - 1) / 3, the same interpolation written the other way round.
TEST(RopeScaling, Llama3FrequenciesMatchTheClosedForm) {
  const int hd = 128;
  const double base = 500000;
  const std::vector<double> f = rope_inv_freq(hd, base, llama31());
  ASSERT_EQ(f.size(), 64u);
  int high = 0, mid = 0, low = 0;
  for (int i = 0; i < hd / 2; ++i) {
    const double raw = std::pow(base, -2.0 * i / hd), wavelen = 2 * std::numbers::pi / raw;
    double want = raw;
    if (wavelen > 8192) {
      want = raw / 8, ++low;
    } else if (wavelen >= 2048) {
      const double s = (8192 / wavelen - 1) / 3;
      want = raw * (1 + 7 * s) / 8, ++mid;
    } else {
      ++high;
    }
    EXPECT_NEAR(f[i], want, 1e-14 * raw) << i;
  }
  EXPECT_EQ(high, 29);
  EXPECT_EQ(mid, 6);
  EXPECT_EQ(low, 29);
  // A few entries as printed by that formula in double (Python).
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[30], 0.0013718935677611381, 1e-17);
  EXPECT_NEAR(f[40], 3.428102195952591e-05, 1e-19);
  EXPECT_NEAR(f[63], 3.068925988914511e-07, 1e-21);
  // The scaled frequencies never exceed the unscaled ones.
  const std::vector<double> plain = rope_inv_freq(hd, base, RopeScaling{});
  for (int i = 0; i < hd / 2; ++i) EXPECT_LE(f[i], plain[i]);
}

TEST(RopeScaling, LinearDividesEveryFrequency) {
  RopeScaling s;
  s.type = RopeScaling::Type::linear;
  s.factor = 4;
  const std::vector<double> f = rope_inv_freq(16, 10000, s), plain = rope_inv_freq(16, 10000, RopeScaling{});
  for (int i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ(plain[i], std::pow(10000.0, -2.0 * i / 16));
    EXPECT_DOUBLE_EQ(f[i], plain[i] / 4);
  }
}

// Row t of the table: cos then sin of t * inv_freq.
TEST(RopeScaling, TableHoldsCosAndSinOfTheScaledAngles) {
  const int S = 300, hd = 128;
  const std::vector<float> t = rope_cos_sin_table(S, hd, 500000, llama31());
  const std::vector<double> f = rope_inv_freq(hd, 500000, llama31());
  ASSERT_EQ(t.size(), size_t(S) * hd);
  for (int p : {0, 1, 77, 299})
    for (int i : {0, 30, 63}) {
      EXPECT_FLOAT_EQ(t[size_t(p) * hd + i], float(std::cos(p * f[i]))) << p << " " << i;
      EXPECT_FLOAT_EQ(t[size_t(p) * hd + hd / 2 + i], float(std::sin(p * f[i]))) << p << " " << i;
    }
}

std::string error_of(const nlohmann::json& j) {
  try {
    rope_scaling_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RopeScaling, JsonRoundTripAndErrors) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192, "rope_type": "llama3"})");
  EXPECT_EQ(rope_scaling_from_json(j), llama31());
  EXPECT_EQ(rope_scaling_from_json(rope_scaling_to_json(llama31())), llama31());
  EXPECT_TRUE(rope_scaling_to_json(RopeScaling{}).is_null());
  EXPECT_EQ(rope_scaling_from_json(nullptr), RopeScaling{});
  // The legacy key "type" (transformers before 4.43).
  EXPECT_EQ(rope_scaling_from_json({{"type", "linear"}, {"factor", 2.0}}).factor, 2.0);
  EXPECT_NE(error_of({{"rope_type", "yarn"}, {"factor", 4.0}}).find("'yarn' is not supported"), std::string::npos)
      << error_of({{"rope_type", "yarn"}});
  EXPECT_NE(error_of({{"rope_type", "dynamic"}, {"factor", 4.0}}).find("dynamic"), std::string::npos);
  EXPECT_NE(error_of({{"rope_type", "llama3"}, {"factor", 8.0}}).find("low_freq_factor"), std::string::npos);
  nlohmann::json bad = j;
  bad["high_freq_factor"] = 1.0;
  EXPECT_NE(error_of(bad).find("high_freq_factor"), std::string::npos) << error_of(bad);
  bad = j;
  bad["factor"] = "8";
  EXPECT_NE(error_of(bad).find("factor"), std::string::npos) << error_of(bad);
  bad = j;
  bad["factor"] = 0;
  EXPECT_NE(error_of(bad).find("factor"), std::string::npos) << error_of(bad);
}

// The model JSON carries the scaling and the epsilon; scaling without
// rotary positions is refused.
TEST(RopeScaling, ModelConfigCarriesScalingAndEpsilon) {
  ModelConfig m = load_model_config("llama3.1-8b");
  EXPECT_EQ(m.rope_scaling, llama31());
  m.norm_epsilon = 1e-6;
  const ModelConfig back = nlohmann::json(m).get<ModelConfig>();
  EXPECT_EQ(back.rope_scaling, m.rope_scaling);
  EXPECT_EQ(back.norm_epsilon, 1e-6);
  m.set_position_embedding_type("learned_absolute");
  EXPECT_THROW(m.validate(), Error);
  m = load_model_config("llama3.1-8b");
  m.norm_epsilon = 0;
  EXPECT_THROW(m.validate(), Error);
}

}  // namespace
}  // namespace meshtrain
