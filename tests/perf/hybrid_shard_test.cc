// Hybrid sharding (HSDP) in the performance model: ZeRO state sharded over
// groups of consecutive DP ranks and replicated across the groups; the
// all-gathers and reduce-scatters stay in the group, each reduced shard is
// all-reduced across the replicas. The engine runs it (its parity tests are
// in tests/parallel); frameworks without it and Megatron's launch line
// refuse it; the planner searches it under a profile that has it or when
// asked.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/perf/collective.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/launch.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain {
namespace {

// Llama 2 7B on 16 DGX A100 nodes under FSDP: ZeRO-3, bf16, DP 128, one
// micro-batch of 2 a step; `shard` DP ranks per shard group (0: all).
ParallelConfig fsdp(int shard, int micro_batches = 1) {
  ParallelConfig p;
  p.dp = 128;
  p.zero_stage = 3;
  p.zero_shard = shard;
  p.bf16 = true;
  p.flash_attention = true;
  p.micro_batch_size = 2;
  p.global_batch_size = 2 * 128 * micro_batches;
  return p;
}

TEST(HybridShard, LayoutChecksAndJsonRoundTrip) {
  const ModelConfig m = load_model_config("llama2-7b");
  EXPECT_NO_THROW(validate(m, fsdp(8), 128));
  EXPECT_EQ(fsdp(8).shard_size(), 8);
  EXPECT_EQ(fsdp(8).shard_replicas(), 16);
  EXPECT_TRUE(fsdp(8).hybrid_shard());
  EXPECT_FALSE(fsdp(0).hybrid_shard());
  EXPECT_FALSE(fsdp(128).hybrid_shard());  // the whole group is full sharding
  try {
    validate(m, fsdp(6), 128);
    FAIL() << "a shard group that does not divide DP was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible by the data-parallel shard size 6"), std::string::npos)
        << e.what();
  }
  ParallelConfig plain = fsdp(8);
  plain.zero_stage = 0;  // nothing is sharded: nothing to replicate
  EXPECT_THROW(validate(m, plain, 128), Error);
  const nlohmann::json j = fsdp(8);
  EXPECT_EQ(j.at("data_parallel_shard_size"), 8);
  EXPECT_EQ(j.get<ParallelConfig>().zero_shard, 8);
  EXPECT_EQ(nlohmann::json(fsdp(0)).get<ParallelConfig>().zero_shard, 0);
}

// The states are sharded over the group: 8 of 128 ranks hold 16 times a
// full shard's share.
TEST(HybridShard, StatesAreShardedOverTheGroupOnly) {
  const ModelConfig m = load_model_config("llama2-7b");
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  const perf::PerfOptions o = perf::framework_profile("torchtitan-2024").options;
  perf::PerfCache cache;
  const perf::MemoryBytes full = perf::stage_memory(m, fsdp(0), s, 0, cache, o);
  const perf::MemoryBytes hybrid = perf::stage_memory(m, fsdp(8), s, 0, cache, o);
  EXPECT_NEAR(hybrid.optimizer / full.optimizer, 16.0, 0.01);
  EXPECT_NEAR(hybrid.parameters / full.parameters, 16.0, 0.01);
  EXPECT_NEAR(hybrid.activations, full.activations, 1.0);
}

// Bytes per GPU from the shapes: per micro-batch two all-gathers of the
// bf16 weights and a reduce-scatter of the gradients over the group, then
// an all-reduce of the reduced shard across the replicas (fp32 gradients
// under torchtitan's mixed precision).
TEST(HybridShard, EachGpuMovesTheGroupsCollectivesAndTheReplicaAllReduce) {
  const ModelConfig m = load_model_config("llama2-7b");
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  const perf::PerfOptions o = perf::framework_profile("torchtitan-2024").options;
  const ParallelConfig p = fsdp(8, 2);
  perf::PerfCache cache;
  const double n = double(cache.stage_layout(m, p, 0).numel);  // padded to the group
  const double group = (8 - 1) / 8.0, replicas = 2 * (16 - 1) / 16.0;
  const double expected = 2 * (2 * n * 2 * group + n * 4 * group + n / 8 * 4 * replicas);
  EXPECT_NEAR(perf::predict(m, p, s, 128, o).comm_bytes.dp / expected, 1.0, 1e-9);
}

// A group of one node keeps the weights' all-gathers on NVLink: over a slow
// network the full shard's forward waits for them, the hybrid one does not.
TEST(HybridShard, ANodeGroupKeepsTheGathersOffTheNetwork) {
  const ModelConfig m = load_model_config("llama2-7b");
  const perf::SystemSpec s = perf::load_system_spec("ibm-a100-80gb-400g");
  const perf::PerfOptions o = perf::framework_profile("fsdp-2022").options;
  const double in_node = perf::collective_time(s, perf::Collective::all_gather, 1e8, 8, 1);
  const double across = perf::collective_time(s, perf::Collective::all_gather, 1e8, 128, 1);
  EXPECT_LT(5 * in_node, across);
  const perf::Prediction full = perf::predict(m, fsdp(0), s, 128, o);
  const perf::Prediction hybrid = perf::predict(m, fsdp(8), s, 128, o);
  EXPECT_LT(hybrid.time.dp_comm, full.time.dp_comm);
  EXPECT_GT(hybrid.tokens_per_s, full.tokens_per_s);
}

// MiCS all-reduces each gradient shard across the replicas once a step
// (DeepSpeed's MiCS_Optimizer, at the accumulation boundary); FSDP's
// HYBRID_SHARD after every micro-batch's backward.
TEST(HybridShard, MicsReducesAcrossReplicasOncePerStep) {
  const ModelConfig m = load_model_config("llama2-7b");
  const perf::SystemSpec s = perf::load_system_spec("ibm-a100-80gb-400g");
  const perf::PerfOptions mics = perf::framework_profile("deepspeed-mics").options;
  ASSERT_TRUE(mics.zero.replica_reduce_at_boundary);
  perf::PerfOptions every = mics;
  every.zero.replica_reduce_at_boundary = false;
  // One micro-batch: the same bytes either way.
  const double one = perf::predict(m, fsdp(8, 1), s, 128, every).comm_bytes.dp;
  EXPECT_NEAR(perf::predict(m, fsdp(8, 1), s, 128, mics).comm_bytes.dp, one, 1e-9 * one);
  // Four: the replicas' all-reduce three times fewer.
  const perf::Prediction once = perf::predict(m, fsdp(8, 4), s, 128, mics);
  const perf::Prediction each = perf::predict(m, fsdp(8, 4), s, 128, every);
  const double replica_bytes = (each.comm_bytes.dp - once.comm_bytes.dp) / 3;
  EXPECT_GT(replica_bytes, 0);
  // A ring all-reduce over the 16 replicas sends 2 x 15/16 of the 1/8 shard
  // of the gradients (bf16 under DeepSpeed).
  const double shard_bytes = 2.0 * m.num_parameters() / 8;
  EXPECT_NEAR(replica_bytes, 2 * 15.0 / 16 * shard_bytes, 0.05 * shard_bytes);
  EXPECT_LE(once.step_time_s, each.step_time_s);
}

TEST(HybridShard, OnlyFrameworksWithItRunIt) {
  const ModelConfig m = load_model_config("llama2-7b");
  const ParallelConfig p = fsdp(8);
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("torchtitan-2024"), p, m.num_layers), "");
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("llm-foundry-2023"), p, m.num_layers), "");
  ParallelConfig unfused = p;
  unfused.flash_attention = false;
  EXPECT_NE(perf::unsupported_by(perf::framework_profile("deepspeed-zero3"), unfused, m.num_layers)
                .find("no hybrid sharding"),
            std::string::npos);
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("deepspeed-mics"), unfused, m.num_layers), "");
  // The engine runs it (tests/parallel: parity); Megatron-LM has no flag.
  const tune::LaunchSpec spec{"", m, p, 128, 8};
  EXPECT_NE(tune::emit(spec, "train").find("--data-parallel-shard-size 8"), std::string::npos);
  EXPECT_THROW(tune::emit(spec, "megatron"), Error);
}

// The planner lists node-sized groups (one node, then powers of two of
// nodes) under a profile that has hybrid sharding, or when asked.
TEST(HybridShard, PlannerSearchesItUnderAProfileThatHasIt) {
  const ModelConfig m = load_model_config("llama2-7b");
  const perf::SystemSpec s = perf::load_system_spec("ibm-a100-80gb-400g");
  const perf::FrameworkProfile& f = perf::framework_profile("fsdp-2022");
  tune::SearchSpace space;
  space.tp = {1};
  space.flash_attention = {false};
  restrict_to_framework(f, space, m);
  space.framework = &f;
  EXPECT_TRUE(space.hybrid_shard);
  std::set<int> shards;
  for (const ParallelConfig& p : tune::enumerate(m, space, 128, 256, 8)) shards.insert(p.zero_shard);
  EXPECT_EQ(shards, (std::set<int>{0, 8, 16, 32, 64}));
  const tune::Plan with = tune::plan(m, s, 128, 256, space, f.options);
  ASSERT_FALSE(with.ranked.empty());
  EXPECT_TRUE(with.ranked.front().config.hybrid_shard());
  tune::SearchSpace engine;
  engine.tp = {1};
  for (const ParallelConfig& p : tune::enumerate(m, engine, 128, 256, 8)) EXPECT_EQ(p.zero_shard, 0);
  engine.hybrid_shard = true;  // plan --hybrid-shard
  shards.clear();
  for (const ParallelConfig& p : tune::enumerate(m, engine, 128, 256, 8)) shards.insert(p.zero_shard);
  EXPECT_EQ(shards, (std::set<int>{0, 8, 16, 32, 64}));
  // Under TP 8 a node holds one DP rank: groups of 2 nodes and more.
  engine.tp = {8};
  shards.clear();
  for (const ParallelConfig& p : tune::enumerate(m, engine, 128, 256, 8)) shards.insert(p.zero_shard);
  EXPECT_EQ(shards, (std::set<int>{0, 2, 4, 8}));
}

}  // namespace
}  // namespace meshtrain
