// The FLOP count of a Llama model by the 6N rule: a step's model FLOPs per
// token are 6 x (the parameters a token multiplies with: all but the input
// embedding table and the norms) plus 12 x layers x seq x hidden for the
// dense attention scores (Megatron-LM's convention, flops.h).
#include <gtest/gtest.h>

#include "meshtrain/model/flops.h"
#include "meshtrain/model/model_config.h"

namespace meshtrain {
namespace {

TEST(LlamaFlops, SixNPlusAttention) {
  for (const char* preset : {"llama2-7b", "llama2-70b", "llama3-8b", "llama3-405b", "tiny-llama"}) {
    const ModelConfig m = load_model_config(preset);
    const double embedding = double(m.padded_vocab()) * m.hidden_size;
    const double norms = (2.0 * m.num_layers + 1) * m.hidden_size;  // RMSNorm: weights only
    const double matmul_params = double(m.num_parameters()) - embedding - norms;
    const double attention = 12.0 * m.num_layers * m.seq_length * m.hidden_size;
    ParallelConfig p;
    EXPECT_NEAR(step_flops(m, p, 1.0).model / (6 * matmul_params + attention), 1.0, 1e-12) << preset;
  }
  // Llama 2 7B at 4096 tokens: 46.08 GFLOP per token.
  ParallelConfig p;
  EXPECT_NEAR(step_flops(load_model_config("llama2-7b"), p, 1.0).model, 46084915200.0, 1.0);
}

}  // namespace
}  // namespace meshtrain
