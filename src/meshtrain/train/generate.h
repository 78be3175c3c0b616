// Text generation from trained weights: autoregressive sampling with the
// serial model (no parallelism: the weights are first gathered in the
// serial layout's order), temperature and top-k.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/model/model_config.h"

namespace meshtrain {

struct SamplingOptions {
  int new_tokens = 64;
  float temperature = 0.8f;
  int top_k = 40;
  uint64_t seed = 1;
};

// One token drawn from the top_k largest of logits / temperature, by the
// uniform draw (seed, step): the token with the largest logit when top_k is
// 1. cand: one entry per vocabulary token (its size is the vocabulary),
// reused between calls.
int sample_top_k(const float* logits, const SamplingOptions& o, int step, std::vector<std::pair<float, int>>& cand);

// `weights`: fp32, laid out as Layout::build(m, serial config, 0, 0).
// The context is the last seq_length tokens. Returns prompt + new tokens.
std::vector<int32_t> generate(const ModelConfig& m, const std::vector<float>& weights, std::vector<int32_t> prompt,
                              const SamplingOptions& o);

// Continues `prompt_text` (encoded with the tokenizer file `tokenizer`, if
// one is named; else from the end-of-text token) by o.new_tokens tokens and
// prints the text (or the token ids).
void print_sample(const ModelConfig& m, const std::vector<float>& weights, const std::string& tokenizer,
                  const std::string& prompt_text, const SamplingOptions& o);

}  // namespace meshtrain
