// The memory model against the closed forms: bytes per parameter per ZeRO
// stage (Layout), activations x micro-batches in flight (activations.h x
// Schedule), communication buffers of the walk. (tests/parallel holds it
// against the engine's measured peaks.)
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "meshtrain/model/activations.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/perf/memory_model.h"

#include "gpt_shape.h"

namespace meshtrain::perf {
namespace {

ModelConfig gpt(int layers, int hidden, int heads, int seq, int vocab) {
  return testing::gpt_shape(layers, hidden, heads, seq, vocab);
}

SystemSpec big_device() {
  SystemSpec s = load_system_spec("dgx-a100-80gb");
  return s;
}

TEST(MemoryModel, BytesPerParameterPerZeroStage) {
  const ModelConfig m = gpt(8, 1024, 16, 512, 32000);
  const SystemSpec sys = big_device();
  struct Case {
    int zero;
    bool bf16;
    double bytes;  // per parameter with dp = 8
  };
  // bf16: 2 weights + 4 fp32 grads + 12 (fp32 master, m, v); fp32: 4 + 4 + 8.
  const Case cases[] = {{0, true, 18},          {1, true, 2 + 4 + 12 / 8.0}, {2, true, 2 + (4 + 12) / 8.0},
                        {3, true, 18 / 8.0},    {0, false, 16},              {1, false, 4 + 4 + 8 / 8.0},
                        {2, false, 4 + 12 / 8.0}, {3, false, 16 / 8.0}};
  for (const Case& c : cases) {
    ParallelConfig p;
    p.dp = 8;
    p.zero_stage = c.zero;
    p.bf16 = c.bf16;
    p.global_batch_size = 8;
    PerfCache cache;
    const MemoryBytes b = stage_memory(m, p, sys, 0, cache);
    const double numel = double(Layout::build(m, p, 0, 0).numel());
    EXPECT_NEAR((b.parameters + b.gradients + b.optimizer) / numel, c.bytes, 1e-12) << c.zero << " " << c.bf16;
  }
}

TEST(MemoryModel, ActivationsScaleWithMicroBatchesInFlight) {
  const ModelConfig m = gpt(8, 512, 8, 256, 1000);
  const SystemSpec sys = big_device();
  ParallelConfig p;
  p.pp = 4;
  p.micro_batch_size = 2;
  p.global_batch_size = 32;  // 16 micro-batches
  p.bf16 = true;
  p.recompute = Recompute::none;
  PerfCache cache;
  const double block = double(allocated_bytes(block_stash(m, p, false)));
  const double tokens = p.num_micro_batches() * double(total_bytes(embedding_stash(m, p)));
  // Stage 0 of 1F1B holds pp micro-batches of its 2 blocks; stage pp-1 one,
  // plus the head's stash.
  const MemoryBytes first = stage_memory(m, p, sys, 0, cache);
  EXPECT_NEAR(first.activations, 4 * 2 * block + tokens + allocated_bytes(rank_working_set(m, p, false)), 1);
  const MemoryBytes last = stage_memory(m, p, sys, 3, cache);
  EXPECT_NEAR(last.activations,
              1 * (2 * block + allocated_bytes(head_stash(m, p))) + tokens +
                  allocated_bytes(rank_working_set(m, p, true)),
              1);
  // Full recompute keeps only each block's input.
  p.recompute = Recompute::full;
  const double input = double(allocated_bytes(block_stash(m, p, true)));
  EXPECT_NEAR(stage_memory(m, p, sys, 0, cache).activations,
              4 * 2 * input + tokens + allocated_bytes(rank_working_set(m, p, false)), 1);
}

TEST(MemoryModel, StashesAreCountedAsAllocated) {
  // Each tensor of a stash starts on a 64-byte boundary: with sequence
  // parallelism over 4 ranks the LayerNorm statistics of 8 tokens take 32
  // bytes of data and 64 of the allocation.
  const ModelConfig m = gpt(2, 32, 4, 16, 200);
  ParallelConfig p;
  p.tp = 4;
  p.sequence_parallel = true;
  p.micro_batch_size = 2;
  p.global_batch_size = 2;
  const auto stash = block_stash(m, p, false);
  int64_t expect = 0;
  for (const TensorSpec& t : stash) expect += (t.bytes() + 63) / 64 * 64;
  EXPECT_EQ(allocated_bytes(stash), expect);
  EXPECT_EQ(allocated_bytes(stash) - total_bytes(stash), 4 * (64 - 32));
}

TEST(MemoryModel, CommBuffersOfThePipelineAndZero) {
  const ModelConfig m = gpt(8, 64, 4, 32, 500);
  PerfCache cache;
  ParallelConfig p;
  p.micro_batch_size = 2;
  // One stage without ZeRO-2/3 holds no communication buffers.
  p.global_batch_size = 4;
  for (int z : {0, 1}) {
    p.dp = 2;
    p.zero_stage = z;
    EXPECT_EQ(peak_comm_buffer_bytes(m, p, 0, cache), 0) << z;
  }
  // A pipeline without ZeRO-2/3: one boundary activation at a time (a
  // forward's output until its send, a received gradient until its send),
  // taking every send to complete when posted.
  p.dp = 1;
  p.zero_stage = 0;
  p.pp = 4;
  p.global_batch_size = 16;
  const double boundary = 2.0 * 32 * 64 * 4;
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    for (int s = 0; s < 4; ++s) {
      p.schedule = k;
      EXPECT_EQ(peak_comm_buffer_bytes(m, p, s, cache), boundary) << schedule_name(k) << " " << s;
    }
  // ZeRO-2 on one stage and one micro-batch: the largest window is the
  // head's two units, then the blocks' gradients two at a time, each with
  // its shard; the walk must be at least the largest unit's gradient and
  // shard, and at most three of the largest units' with their shards.
  p.pp = 1;
  p.dp = 2;
  p.zero_stage = 2;
  p.global_batch_size = 4;
  p.schedule = ScheduleKind::one_f_one_b;
  const Layout L = Layout::build(m, p, 0, 0);
  int64_t largest = 0;
  for (const Unit& u : L.units()) largest = std::max(largest, u.padded_numel);
  const double unit = largest * 4.0 * (1 + 1.0 / p.dp);
  const double zero2 = peak_comm_buffer_bytes(m, p, 0, cache);
  EXPECT_GE(zero2, unit);
  EXPECT_LE(zero2, 3 * unit);
  // ZeRO-3 adds the gathered weights.
  p.zero_stage = 3;
  EXPECT_GT(peak_comm_buffer_bytes(m, p, 0, cache), zero2);
}

TEST(MemoryModel, CommBufferWalkReachesTheSteadyState) {
  // The shortened walk agrees with the walk of every micro-batch.
  const ModelConfig m = gpt(16, 64, 4, 32, 500);
  PerfCache cache;
  struct Case {
    ScheduleKind kind;
    int pp, vpp, zero;
  };
  const Case cases[] = {{ScheduleKind::gpipe, 4, 1, 3},       {ScheduleKind::one_f_one_b, 4, 1, 2},
                        {ScheduleKind::one_f_one_b, 4, 1, 3}, {ScheduleKind::interleaved, 4, 2, 2},
                        {ScheduleKind::interleaved, 2, 4, 3}, {ScheduleKind::interleaved, 4, 4, 0}};
  for (const Case& c : cases) {
    ParallelConfig p;
    p.pp = c.pp;
    p.vpp = c.vpp;
    p.dp = 2;
    p.zero_stage = c.zero;
    p.schedule = c.kind;
    p.global_batch_size = 2 * 16 * c.pp;  // 16 pp micro-batches per DP rank
    for (int s = 0; s < c.pp; ++s)
      EXPECT_EQ(peak_comm_buffer_bytes(m, p, s, cache), peak_comm_buffer_bytes(m, p, s, cache, /*full_walk=*/true))
          << schedule_name(c.kind) << " pp " << c.pp << " vpp " << c.vpp << " zero " << c.zero << " stage " << s;
  }
}

// ZeRO-3 gathers one unit ahead (the engine's prefetch, FSDP's): the
// backward of a block then holds its own weights, the previous block's,
// arriving, and its fp32 gradient, so the peak grows by one block's weights.
TEST(MemoryModel, ZeroThreeHoldsThePrefetchedUnitWhileTheCurrentOneComputes) {
  const ModelConfig m = gpt(4, 256, 4, 64, 1000);
  ParallelConfig p;
  p.dp = 2;
  p.zero_stage = 3;
  p.global_batch_size = 2;
  PerfCache cache;
  ZeroRuntime none;
  none.prefetch_units = 0;
  const double with = peak_comm_buffer_bytes(m, p, 0, cache);
  const double without = peak_comm_buffer_bytes(m, p, 0, cache, false, none);
  const StageLayout& L = cache.stage_layout(m, p, 0);
  const double block = double(L.unit_numel[size_t(L.chunk_order[0].blocks[0])]) * 4;
  EXPECT_EQ(ZeroRuntime{}.prefetch_units, 1);
  EXPECT_EQ(with - without, block);
}

// The walks are memoized (PerfCache::comm_buffer_peak): one cache shared by
// layouts that differ in what the walk reads (ZeRO stage, DP, dtype,
// micro-batch, the framework's ZeRO runtime) returns what a fresh cache
// computes for each, and recompute, which the walk does not read, shares it.
TEST(MemoryModel, CommBufferWalksAreSharedOnlyWhereTheyAgree) {
  const ModelConfig m = gpt(16, 64, 4, 32, 500);
  ZeroRuntime deepspeed;
  deepspeed.gather_elements = 3000;
  deepspeed.reduce_bucket_elements = 2000;
  deepspeed.reduce_in_model_dtype = true;
  deepspeed.prefetch_units = 1;
  ZeroRuntime no_prefetch = deepspeed, fp32_reduce = deepspeed, whole_units = deepspeed;
  no_prefetch.prefetch_units = 0;
  fp32_reduce.reduce_in_model_dtype = false;
  whole_units.gather_elements = whole_units.reduce_bucket_elements = 0;
  PerfCache shared;
  std::vector<double> seen;
  for (int zero : {3, 2, 1})
    for (int dp : {2, 4})
      for (int mb : {1, 2})
        for (bool bf16 : {true, false})
          for (const ZeroRuntime& z : {ZeroRuntime{}, deepspeed, no_prefetch, fp32_reduce, whole_units})
            for (Recompute r : {Recompute::none, Recompute::full}) {
              ParallelConfig p;
              p.pp = 2;
              p.dp = dp;
              p.zero_stage = zero;
              p.micro_batch_size = mb;
              p.bf16 = bf16;
              p.recompute = r;
              p.global_batch_size = dp * mb * 8;
              for (int s = 0; s < 2; ++s) {
                PerfCache fresh;
                const double want = peak_comm_buffer_bytes(m, p, s, fresh, false, z);
                EXPECT_EQ(peak_comm_buffer_bytes(m, p, s, shared, false, z), want)
                    << "zero " << zero << " dp " << dp << " mb " << mb << " bf16 " << bf16 << " stage " << s;
                seen.push_back(want);
              }
            }
  std::sort(seen.begin(), seen.end());
  EXPECT_GT(std::unique(seen.begin(), seen.end()) - seen.begin(), 8);  // the keys matter
}

TEST(MemoryModel, SchedulesHoldWhatTheyKeepInFlight) {
  PerfCache cache;
  const std::vector<double> one = {1.0};
  EXPECT_EQ(peak_stash_bytes(ScheduleKind::gpipe, 4, 1, 16, 0, one, cache), 16);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(peak_stash_bytes(ScheduleKind::one_f_one_b, 4, 1, 64, s, one, cache), 4 - s);
  // Interleaved: the shortened walk agrees with the whole schedule.
  const std::vector<double> chunks = {3.0, 1.0, 2.0};
  for (int s = 0; s < 4; ++s) {
    const Schedule full = make_schedule(ScheduleKind::interleaved, 4, 3, 64);
    double now = 0, peak = 0;
    for (const Action& a : full.stages[s]) {
      if (a.kind == ActionKind::forward) peak = std::max(peak, now += chunks[a.chunk]);
      if (a.kind == ActionKind::backward) now -= chunks[a.chunk];
    }
    EXPECT_EQ(peak_stash_bytes(ScheduleKind::interleaved, 4, 3, 64, s, chunks, cache), peak) << s;
  }
}

TEST(MemoryModel, FitsAgainstDeviceMemory) {
  const SystemSpec sys = big_device();
  PerfCache cache;
  ParallelConfig p;
  p.bf16 = true;
  EXPECT_FALSE(estimate_memory(load_model_config("175b"), p, sys, cache).fits());
  EXPECT_TRUE(estimate_memory(load_model_config("gpt2-124m"), p, sys, cache).fits());
}

}  // namespace
}  // namespace meshtrain::perf
