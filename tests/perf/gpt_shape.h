// A GPT of the given shape for the performance-model tests (learned
// positions, LayerNorm, GELU MLP of 4 x hidden, tied embeddings).
#pragma once

#include "meshtrain/model/model_config.h"

namespace meshtrain::testing {

inline ModelConfig gpt_shape(int layers, int hidden, int heads, int seq, int vocab) {
  ModelConfig m;
  m.name = "test";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.seq_length = seq;
  m.vocab_size = vocab;
  return m;
}

}  // namespace meshtrain::testing
