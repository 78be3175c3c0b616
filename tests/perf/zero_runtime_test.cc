// ZeRO-3 as frameworks run it: the latency of ring all-gathers and
// reduce-scatters grows with the group (all-reduce uses a tree), so per-call
// costs dominate at scale; a framework's bounds on gathered weights and
// gradient buckets decide what fits.
#include <gtest/gtest.h>

#include "meshtrain/perf/collective.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/predict.h"

namespace meshtrain::perf {
namespace {

TEST(Collectives, RingLatencyGrowsWithTheGroupTreeDoesNot) {
  const SystemSpec s = load_system_spec("dgx-a100-80gb");
  const double tiny = 64;  // bytes: latency-bound
  const double ag128 = collective_time(s, Collective::all_gather, tiny, 128, 1);
  const double ag1024 = collective_time(s, Collective::all_gather, tiny, 1024, 1);
  const double ar128 = collective_time(s, Collective::all_reduce, tiny, 128, 1);
  const double ar1024 = collective_time(s, Collective::all_reduce, tiny, 1024, 1);
  EXPECT_GT(ag1024, 7 * ag128);           // ~ (n - 1) steps
  EXPECT_GE(ag1024, 1023 * s.network.latency_s);
  EXPECT_LT(ar1024, 2 * ar128);           // ~ log2(nodes) steps
  EXPECT_EQ(collective_time(s, Collective::reduce_scatter, tiny, 1024, 1), ag1024);
}

ModelConfig gpt(int layers, int hidden, int heads) {
  ModelConfig m;
  m.name = "test";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.seq_length = 2048;
  m.vocab_size = 51200;
  return m;
}

ParallelConfig zero3(int dp, int micro_batch) {
  ParallelConfig p;
  p.dp = dp;
  p.zero_stage = 3;
  p.micro_batch_size = micro_batch;
  p.global_batch_size = dp * micro_batch;
  p.recompute = Recompute::full;
  p.bf16 = true;
  return p;
}

TEST(ZeroRuntime, DeepSpeedBoundsTheBuffersAWholeBlockWouldNeed) {
  const ModelConfig m = gpt(105, 20480, 128);  // MT-NLG 530B
  const ParallelConfig p = zero3(640, 1);
  PerfCache cache;
  const ZeroRuntime ds = framework_profile("deepspeed-zero3").options.zero;
  const double engine = peak_comm_buffer_bytes(m, p, 0, cache);
  const double deepspeed = peak_comm_buffer_bytes(m, p, 0, cache, false, ds);
  EXPECT_GT(engine, 60e9);    // a 5.0B-parameter block gathered, its fp32 gradient and two in flight
  EXPECT_LT(deepspeed, 8e9);  // 1e9 live parameters, 5e8-element bf16 buckets
  const SystemSpec s = load_system_spec("dgx-a100-80gb");
  EXPECT_FALSE(estimate_memory(m, p, s, cache).fits());
  EXPECT_TRUE(estimate_memory(m, p, s, cache, framework_profile("deepspeed-zero3").options).fits());
}

// At a fixed model, the per-call latencies of ZeRO-3 make a step at
// micro-batch 1 on 1,024 GPUs cost nearly as much as one at micro-batch 4:
// throughput per GPU falls with the per-GPU batch.
TEST(ZeroRuntime, ThroughputFallsWithThePerGpuBatchAtScale) {
  const ModelConfig m = gpt(44, 6144, 64);  // 20B
  const SystemSpec s = load_system_spec("dgx-a100-80gb");
  const PerfOptions o = framework_profile("deepspeed-zero3").options;
  PerfCache cache;
  const double small = predict(m, zero3(1024, 1), s, 1024, o, &cache).tokens_per_s;
  const double large = predict(m, zero3(1024, 4), s, 1024, o, &cache).tokens_per_s;
  EXPECT_GT(large / small, 1.5);
  // On 64 GPUs the same per-GPU batches differ much less.
  const double small64 = predict(m, zero3(64, 1), s, 64, o, &cache).tokens_per_s;
  const double large64 = predict(m, zero3(64, 4), s, 64, o, &cache).tokens_per_s;
  EXPECT_LT(large64 / small64, large / small);
}

}  // namespace
}  // namespace meshtrain::perf
