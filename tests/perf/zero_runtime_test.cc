// ZeRO-3 as frameworks run it: the latency of ring all-gathers and
// reduce-scatters grows with the group (all-reduce uses a tree), so per-call
// costs dominate at scale; a framework's bounds on gathered weights and
// gradient buckets decide what fits.
#include <gtest/gtest.h>

#include "meshtrain/perf/collective.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/perf/time_model.h"

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

// FSDP2 copies each gathered unit out of the all-gather buffer (forward and
// backward gathers) and each unsharded gradient, cast to the fp32 reduce
// dtype, into the reduce-scatter input: memory-bound passes on the compute
// stream, per micro-batch. FSDP1 and DeepSpeed copy the gradient only; the
// engine neither.
TEST(ZeroRuntime, Fsdp2CopiesEachGatheredUnitOutAndEachGradientIn) {
  const ModelConfig m = gpt(8, 2048, 16);
  const ParallelConfig p = zero3(8, 2);
  const SystemSpec s = load_system_spec("dgx-h100");
  PerfCache cache;
  const PerfOptions fsdp2 = framework_profile("torchtitan-2024").options;
  PerfOptions bare = fsdp2;
  bare.zero.gather_copy_out = bare.zero.grad_copy_in = false;
  const ChunkCost with = step_costs(m, p, s, fsdp2, cache).chunks[0];
  const ChunkCost without = step_costs(m, p, s, bare, cache).chunks[0];
  const double numel = double(cache.stage_layout(m, p, 0).chunk_numel[0]);
  auto pass = [&](double bytes) {
    return bytes / (s.memory.bandwidth_gbs * 1e9 * s.memory.elementwise_efficiency) + s.compute.kernel_overhead_s;
  };
  EXPECT_NEAR(with.forward_compute_s - without.forward_compute_s, pass(numel * 4), 1e-9);
  EXPECT_NEAR(with.backward_compute_s - without.backward_compute_s, pass(numel * 4) + pass(numel * 6), 1e-9);
  const ZeroRuntime fsdp1 = framework_profile("fsdp-2022").options.zero;
  const ZeroRuntime deepspeed = framework_profile("deepspeed-zero3").options.zero;
  EXPECT_TRUE(fsdp1.grad_copy_in && !fsdp1.gather_copy_out);
  EXPECT_TRUE(deepspeed.grad_copy_in && !deepspeed.gather_copy_out);
  EXPECT_FALSE(PerfOptions{}.zero.grad_copy_in || PerfOptions{}.zero.gather_copy_out);
}

}  // namespace
}  // namespace meshtrain::perf
