// Hugging Face config.json import (LlamaForCausalLM, GPT2LMHeadModel) from
// hand-written files with transformers' field names (tests/model/hf), the
// Llama presets' published parameter counts, and the errors for what the
// engine cannot represent.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/model/hf_config.h"
#include "meshtrain/model/model_config.h"

namespace meshtrain {
namespace {

std::string hf(const std::string& dir) { return std::string(MESHTRAIN_SOURCE_DIR) + "/tests/model/hf/" + dir + "/config.json"; }

// Every field that shapes the model, names aside.
void expect_same_model(const ModelConfig& a, const ModelConfig& b) {
  nlohmann::json ja = a, jb = b;
  ja.erase("name");
  jb.erase("name");
  EXPECT_EQ(ja, jb) << ja.dump() << "\n" << jb.dump();
}

TEST(HfConfig, Llama2And3MatchThePresets) {
  const ModelConfig l2 = load_model_config(hf("Llama-2-7b-hf"));
  EXPECT_EQ(l2.name, "Llama-2-7b-hf");
  expect_same_model(l2, load_model_config("llama2-7b"));
  const ModelConfig l3 = load_model_config(hf("Meta-Llama-3-8B"));
  expect_same_model(l3, load_model_config("llama3-8b"));
  EXPECT_EQ(l3.kv_heads(), 8);
  EXPECT_EQ(l3.rotary_base, 500000.0);
  EXPECT_TRUE(l3.rmsnorm && l3.gated_mlp && l3.rotary && !l3.learned_positions && !l3.tied_embeddings &&
              !l3.bias_linear);
}

// Llama 3.1 and 3.2: the llama3 rope scaling read from rope_scaling; the
// 3.1 preset plans at the 8K pre-training sequence within the 128K context.
TEST(HfConfig, Llama31And32CarryTheRopeScaling) {
  ModelConfig l31 = load_model_config(hf("Llama-3.1-8B"));
  EXPECT_EQ(l31.max_positions(), 131072);
  EXPECT_EQ(l31.rope_scaling, (RopeScaling{RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 8192}));
  l31.seq_length = 8192;
  expect_same_model(l31, load_model_config("llama3.1-8b"));
  const ModelConfig l32 = load_model_config(hf("Llama-3.2-1B"));
  EXPECT_EQ(l32.rope_scaling.factor, 32.0);
  EXPECT_TRUE(l32.tied_embeddings);
  // 1,235,814,400 parameters (Llama 3.2 1B, tied embedding).
  EXPECT_EQ(l32.num_parameters(), 1235814400);
}

TEST(HfConfig, NormEpsilonIsRead) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(hf("tiny-llama-hf")));
  j["rms_norm_eps"] = 1e-6;
  EXPECT_EQ(model_from_hf_config(j, "x").norm_epsilon, 1e-6);
  j.erase("rms_norm_eps");
  EXPECT_EQ(model_from_hf_config(j, "x").norm_epsilon, 1e-5);  // transformers' default
  nlohmann::json g = nlohmann::json::parse(std::ifstream(hf("gpt2")));
  g["layer_norm_epsilon"] = 1e-6;
  EXPECT_EQ(model_from_hf_config(g, "x").norm_epsilon, 1e-6);
}

TEST(HfConfig, Gpt2MatchesThePreset) {
  const ModelConfig g = load_model_config(hf("gpt2"));
  expect_same_model(g, load_model_config("gpt2-124m"));
  EXPECT_FALSE(g.rmsnorm || g.gated_mlp || g.rotary);
  EXPECT_TRUE(g.learned_positions && g.tied_embeddings && g.bias_linear);
}

TEST(HfConfig, TinyLlamaMatchesTheTestPreset) {
  expect_same_model(load_model_config(hf("tiny-llama-hf")), load_model_config("tiny-llama"));
}

// Parameter counts of the published models (vocabularies 32000 and 128256
// are multiples of 128, so padding adds nothing): Llama 2 7B 6,738,415,616
// and Llama 3 8B 8,030,261,248, as transformers counts them.
TEST(HfConfig, LlamaParameterCounts) {
  EXPECT_EQ(load_model_config("llama2-7b").num_parameters(), 6738415616);
  EXPECT_EQ(load_model_config("llama3-8b").num_parameters(), 8030261248);
  for (const char* preset : {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b",
                             "tiny-llama"})
    EXPECT_NO_THROW(load_model_config(preset).validate()) << preset;
  // Llama 3 405B: 405.9B parameters (Llama Team 2024 reports 405B).
  EXPECT_NEAR(double(load_model_config("llama3-405b").num_parameters()), 405.85e9, 0.05e9);
  // Llama 3.1 (the architecture of Llama 3, a longer context): 8,030,261,248,
  // 70,553,706,496 and 405,853,388,800 parameters, the counts of the
  // meta-llama/Llama-3.1-{8B,70B,405B} checkpoints (8.03B, 70.6B, 406B on
  // their model pages).
  EXPECT_EQ(load_model_config("llama3.1-8b").num_parameters(), 8030261248);
  EXPECT_EQ(load_model_config("llama3.1-70b").num_parameters(), 70553706496);
  EXPECT_EQ(load_model_config("llama3.1-405b").num_parameters(), 405853388800);
  for (const char* preset : {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b"})
    EXPECT_NO_THROW(load_model_config(preset).validate()) << preset;
}

nlohmann::json llama_json() { return nlohmann::json::parse(std::ifstream(hf("tiny-llama-hf"))); }

std::string error_of(const nlohmann::json& j) {
  try {
    model_from_hf_config(j, "x");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, UnrepresentableFieldsAreNamed) {
  nlohmann::json j = llama_json();
  j["architectures"] = {"MistralForCausalLM"};
  EXPECT_NE(error_of(j).find("MistralForCausalLM"), std::string::npos) << error_of(j);
  j = llama_json();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  EXPECT_NE(error_of(j).find("rope_scaling type 'yarn' is not supported"), std::string::npos) << error_of(j);
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_NE(error_of(j).find("low_freq_factor"), std::string::npos) << error_of(j);
  j = llama_json();
  j["rms_norm_eps"] = -1e-6;
  EXPECT_NE(error_of(j).find("rms_norm_eps"), std::string::npos) << error_of(j);
  j = llama_json();
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of(j).find("hidden_act"), std::string::npos) << error_of(j);
  j = llama_json();
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("hidden_size"), std::string::npos) << error_of(j);
  j = llama_json();
  j["num_hidden_layers"] = "eight";
  EXPECT_NE(error_of(j).find("num_hidden_layers"), std::string::npos) << error_of(j);
  j = llama_json();
  j["attention_bias"] = true;  // mlp_bias false in the file
  EXPECT_NE(error_of(j).find("mlp_bias"), std::string::npos) << error_of(j);
  j["mlp_bias"] = true;
  EXPECT_TRUE(model_from_hf_config(j, "x").bias_linear);
  nlohmann::json g = nlohmann::json::parse(std::ifstream(hf("gpt2")));
  g["activation_function"] = "relu";
  EXPECT_NE(error_of(g).find("activation_function"), std::string::npos) << error_of(g);
  g["activation_function"] = "gelu_new";
  g["scale_attn_by_inverse_layer_idx"] = true;
  EXPECT_NE(error_of(g).find("scale_attn_by_inverse_layer_idx"), std::string::npos) << error_of(g);
  g.erase("scale_attn_by_inverse_layer_idx");
  g.erase("architectures");  // model_type alone names it
  EXPECT_EQ(model_from_hf_config(g, "x").hidden_size, 768);
}

}  // namespace
}  // namespace meshtrain
