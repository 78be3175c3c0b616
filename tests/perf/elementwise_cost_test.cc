// The time model's memory-bound block terms against the bytes the kernels
// move, in closed form: LayerNorm or RMSNorm (statistics, parameters and
// gradient partials per kind), GELU or SwiGLU, rope on the queries and keys
// only. On a system whose GEMMs and attention are free and whose memory
// moves exactly 1 GB/s with no launch cost, a middle pipeline stage's compute
// time is those bytes / 1e9.
#include <gtest/gtest.h>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/time_model.h"

namespace meshtrain::perf {
namespace {

SystemSpec memory_only_system() {
  SystemSpec s = load_system_spec("dgx-h100");
  s.compute.peak_tflops_bf16 = s.compute.peak_tflops_fp32 = 1e18;  // GEMMs and attention: ~1e-20 s
  s.compute.kernel_overhead_s = 0;
  s.compute.action_overhead_s = 0;
  s.memory.bandwidth_gbs = 1;
  s.memory.elementwise_efficiency = 1;
  return s;
}

ModelConfig model(bool llama) {
  ModelConfig m;
  m.num_layers = 3;
  m.hidden_size = 512;
  m.num_attention_heads = 8;
  m.seq_length = 256;
  m.vocab_size = 1000;
  m.ffn_hidden_size = 1408;
  if (llama) {
    m.num_kv_heads = 2;
    m.rmsnorm = m.gated_mlp = true;
    m.set_position_embedding_type("rope");
    m.bias_linear = false;
  }
  m.validate();
  return m;
}

// Stage 1 of 3 holds one block and nothing else.
ChunkCost middle_block(const ModelConfig& m) {
  ParallelConfig p;
  p.pp = 3;
  p.micro_batch_size = 2;
  p.global_batch_size = 6;
  p.bf16 = true;
  PerfCache cache;
  return step_costs(m, p, memory_only_system(), PerfOptions{}, cache).chunk(1, 0);
}

// Bytes one block moves, written out per kernel for B = 2, S = 256, bf16.
struct Bytes {
  double forward, backward;
};
Bytes closed_form(const ModelConfig& m) {
  const double e = 2, n = 2.0 * 256, h = 512, f = 1408;
  const double stats = m.rmsnorm ? 4 * n : 8 * n;                   // rstd (+ mean), fp32
  const double params = m.rmsnorm ? h * e : 2 * h * e;              // weight (+ bias)
  const double partials = (m.rmsnorm ? 1 : 2) * 2 * (n / 32) * h * 4;  // written, read back
  const double norm_f = 2 * n * h * e + stats + params;
  const double norm_b = 4 * n * h * e + stats + params + partials;
  const double act_f = (m.gated_mlp ? 3 : 2) * n * f * e, act_b = (m.gated_mlp ? 5 : 3) * n * f * e;
  const double qk = m.rotary ? (8 + 2) * 64 : 0;                      // 8 query heads, 2 key heads, hd 64
  const double rope = m.rotary ? 2 * n * qk * e + 256.0 * 64 * 4 : 0;
  return {2 * norm_f + 6 * n * h * e + act_f + rope, 2 * norm_b + 12 * n * h * e + act_b + rope};
}

// Llama (RMSNorm, SwiGLU, rope, GQA) and GPT-2 (LayerNorm, GELU) blocks.
TEST(ElementwiseCost, BlocksAreCostedByTheirKernelsBytes) {
  for (const bool llama : {true, false}) {
    const ModelConfig m = model(llama);
    const ChunkCost c = middle_block(m);
    const Bytes b = closed_form(m);
    EXPECT_NEAR(c.forward_compute_s, b.forward / 1e9, 1e-9 * b.forward / 1e9) << (llama ? "llama" : "gpt");
    EXPECT_NEAR(c.backward_compute_s, b.backward / 1e9, 1e-9 * b.backward / 1e9) << (llama ? "llama" : "gpt");
  }
}

// RMSNorm alone against LayerNorm alone: the difference is one statistic,
// one parameter vector and one gradient partial per norm.
TEST(ElementwiseCost, RmsNormMovesLessThanLayerNorm) {
  ModelConfig ln = model(false), rms = model(false);
  rms.rmsnorm = true;
  const ChunkCost a = middle_block(ln), b = middle_block(rms);
  const double n = 512, h = 512, e = 2;
  EXPECT_NEAR(a.forward_compute_s - b.forward_compute_s, 2 * (4 * n + h * e) / 1e9, 1e-12);
  EXPECT_NEAR(a.backward_compute_s - b.backward_compute_s, 2 * (4 * n + h * e + 2 * (n / 32) * h * 4) / 1e9, 1e-12);
}

}  // namespace
}  // namespace meshtrain::perf
