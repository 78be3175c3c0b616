// Context parallelism (CP) in the performance model: the cost view splits
// every sequence over the CP ranks and counts them as data-parallel ranks
// for gradients and ZeRO state; attention spans the whole sequence and each
// block sends its K and V round the CP ring. The engine and the profiles
// without CP refuse it; the planner searches it only under a profile that
// has it.
#include <gtest/gtest.h>

#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/perf/context_parallel.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/launch.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain {
namespace {

// Llama 3 8B at a 64K context on one DGX H100 node: TP 2, ZeRO-1, flash,
// bf16, DP what remains of 8 GPUs after TP x CP.
ParallelConfig long_context(int cp, int micro_batches = 4) {
  ParallelConfig p;
  p.tp = 2;
  p.cp = cp;
  p.dp = 8 / (2 * cp);
  p.zero_stage = 1;
  p.bf16 = true;
  p.flash_attention = true;
  p.micro_batch_size = 1;
  p.global_batch_size = micro_batches * p.dp;
  p.recompute = Recompute::full;
  return p;
}

ModelConfig llama8b_64k() {
  ModelConfig m = load_model_config("llama3-8b");
  m.seq_length = 65536;
  m.max_position_embeddings = 65536;
  return m;
}

TEST(ContextParallel, CostViewSplitsTheSequenceAndCountsCpRanksAsDataParallel) {
  const ModelConfig m = llama8b_64k();
  const ParallelConfig p = long_context(4);
  const perf::CostView v = perf::cost_view(m, p);
  EXPECT_EQ(v.model.seq_length, 65536 / 4);
  EXPECT_EQ(v.model.max_positions(), 65536);
  EXPECT_EQ(v.parallel.dp, p.dp * 4);
  EXPECT_EQ(v.parallel.cp, 4);
  EXPECT_EQ(v.parallel.num_micro_batches(), p.num_micro_batches());
  const perf::CostView same = perf::cost_view(m, long_context(1));
  EXPECT_EQ(same.model.seq_length, m.seq_length);
  EXPECT_EQ(same.parallel.dp, long_context(1).dp);
}

TEST(ContextParallel, LayoutChecksNameTheFailedConstraint) {
  const ModelConfig m = llama8b_64k();
  ParallelConfig p = long_context(2);
  EXPECT_NO_THROW(validate(m, p, 8));
  EXPECT_THROW(validate(m, p, 16), Error);  // world is TP x CP x PP x DP
  ModelConfig odd = m;
  odd.seq_length = 65536 + 2;  // not two equal chunks a rank
  odd.max_position_embeddings = odd.seq_length;
  try {
    validate(odd, long_context(4), 8);
    FAIL() << "an uneven split was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 x context-parallel-size"), std::string::npos) << e.what();
  }
  p.flash_attention = false;
  EXPECT_THROW(validate(m, p, 8), Error);
}

// Activations are per token: CP 4 holds a quarter of each sequence. Weights
// and optimizer state are sharded over DP x CP, the same ranks as DP alone.
TEST(ContextParallel, MemoryIsOneRanksShareOfEachSequence) {
  const ModelConfig m = llama8b_64k();
  const perf::SystemSpec s = perf::load_system_spec("dgx-h100");
  const perf::PerfOptions o = perf::framework_profile("megatron-core-2024").options;
  perf::PerfCache cache;
  const perf::MemoryBytes one = perf::stage_memory(m, long_context(1), s, 0, cache, o);
  const perf::MemoryBytes four = perf::stage_memory(m, long_context(4), s, 0, cache, o);
  const double ratio = four.activations / one.activations;
  EXPECT_GT(ratio, 0.2);
  EXPECT_LT(ratio, 0.3);
  EXPECT_DOUBLE_EQ(four.optimizer, one.optimizer);  // ZeRO-1 over 4 ranks either way
  EXPECT_DOUBLE_EQ(four.parameters, one.parameters);
}

// Per GPU the same FLOPs run with or without CP (a quarter of the tokens of
// four times the micro-batches); the K/V exchange is counted separately, in
// bytes from the shapes: each block pass sends the rank's K and V chunk
// cp - 1 times forward and, with their gradients, twice that backward; full
// recompute sends the forward's again.
TEST(ContextParallel, ComputeMatchesAndTheRingSendsEachRanksKvChunk) {
  const ModelConfig m = llama8b_64k();
  const perf::SystemSpec s = perf::load_system_spec("dgx-h100");
  const perf::PerfOptions o = perf::framework_profile("megatron-core-2024").options;
  const int cp = 4;
  const ParallelConfig p1 = long_context(1, 2);
  ParallelConfig p4 = long_context(cp);
  p4.global_batch_size = p1.global_batch_size;  // the same sequences a step
  const perf::Prediction a = perf::predict(m, p1, s, 8, o), b = perf::predict(m, p4, s, 8, o);
  EXPECT_NEAR(b.time.compute / a.time.compute, 1.0, 0.15);
  EXPECT_DOUBLE_EQ(a.comm_bytes.cp, 0.0);
  EXPECT_DOUBLE_EQ(a.time.cp_comm, 0.0);
  const double chunk = 2.0 * (m.seq_length / cp) * m.kv_heads() * m.head_dim() / p4.tp * 2;  // K and V, bf16
  const double per_block = (cp - 1) * chunk * (1 + 2 + 1);  // forward, backward, recompute
  EXPECT_NEAR(b.comm_bytes.cp, per_block * m.num_layers * p4.num_micro_batches(), 1.0);
  // Inside one NVLink node the ring hides under the attention it feeds.
  EXPECT_LT(b.time.cp_comm, 0.01 * b.step_time_s);
  // The rates count the whole sequence's attention, not a rank's share.
  EXPECT_DOUBLE_EQ(b.tokens_per_step, double(p4.global_batch_size) * m.seq_length);
}

// Across nodes, with short chunks whose attention is brief, the ring shows.
TEST(ContextParallel, ARingAcrossNodesShowsWhereAttentionCannotHideIt) {
  ModelConfig m = load_model_config("llama3-8b");
  m.seq_length = 8192;
  m.num_kv_heads = m.num_attention_heads;  // no GQA: K and V as large as Q
  const perf::SystemSpec s = perf::load_system_spec("dgx-h100");
  const perf::PerfOptions o = perf::framework_profile("megatron-core-2024").options;
  ParallelConfig p = long_context(1);
  p.tp = 8;
  p.cp = 8;  // 64 GPUs: each CP neighbour on another node
  p.dp = 1;
  p.global_batch_size = 4;
  const perf::Prediction r = perf::predict(m, p, s, 64, o);
  EXPECT_GT(r.time.cp_comm, 0.0);
}

// Meta's Llama 3 context parallelism all-gathers K and V before attention
// and reduce-scatters their gradients after, exposed (llama3-2024): the
// forward moves the whole sequence's K and V once, not cp - 1 chunks under
// the attention, and costs more than the ring where the ring hides.
TEST(ContextParallel, Llama3AllGathersKvAndExposesIt) {
  const ModelConfig m = llama8b_64k();
  const perf::SystemSpec s = perf::load_system_spec("dgx-h100");
  const perf::PerfOptions ring = perf::framework_profile("megatron-core-2024").options;
  const perf::PerfOptions gather = perf::framework_profile("llama3-2024").options;
  ASSERT_TRUE(gather.cp_all_gather);
  ASSERT_FALSE(ring.cp_all_gather);
  const int cp = 4;
  const ParallelConfig p = long_context(cp);
  const perf::Prediction a = perf::predict(m, p, s, 8, ring), b = perf::predict(m, p, s, 8, gather);
  EXPECT_GT(b.time.cp_comm, 10 * a.time.cp_comm);
  EXPECT_GT(b.step_time_s, a.step_time_s);
  const double chunk = 2.0 * (m.seq_length / cp) * m.kv_heads() * m.head_dim() / p.tp * 2;  // K and V, bf16
  // Each rank sends its chunk cp - 1 times a collective: forward,
  // recompute, and the gradients' reduce-scatter.
  EXPECT_NEAR(b.comm_bytes.cp, (cp - 1) * chunk * 3 * m.num_layers * p.num_micro_batches(), 1.0);
  // The gathered K and V (and their gradients) are held while a block runs.
  perf::PerfCache cache;
  const double extra = perf::stage_memory(m, p, s, 0, cache, gather).activations -
                       perf::stage_memory(m, p, s, 0, cache, ring).activations;
  EXPECT_NEAR(extra, (2.0 * cp - 4) * chunk, 1e-6 * chunk);
}

TEST(ContextParallel, OnlyFrameworksWithItRunIt) {
  const ModelConfig m = llama8b_64k();
  const ParallelConfig p = long_context(2);
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("megatron-core-2024"), p, m.num_layers), "");
  const ParallelConfig titan = [&] {
    ParallelConfig q = p;
    q.zero_stage = 3;
    q.sequence_parallel = true;
    return q;
  }();
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("torchtitan-2024"), titan, m.num_layers), "");
  EXPECT_NE(perf::unsupported_by(perf::framework_profile("megatron-lm-2022"), p, m.num_layers)
                .find("has no context parallelism"),
            std::string::npos);
  // The engine runs no CP (tests/train): only the Megatron launch prints it.
  const tune::LaunchSpec spec{"", m, p, 8, 8};
  EXPECT_THROW(tune::emit(spec, "train"), Error);
  EXPECT_NE(tune::emit(spec, "megatron").find("--context-parallel-size 2"), std::string::npos);
}

// At a 128K context an 8B model fits 8 H100s only with its sequences split;
// the planner finds that under Megatron-Core and searches no CP without a
// profile.
TEST(ContextParallel, PlannerSearchesItUnderAProfileThatHasIt) {
  ModelConfig m = load_model_config("llama3-8b");
  m.seq_length = 131072;
  m.max_position_embeddings = 131072;
  const perf::SystemSpec s = perf::load_system_spec("dgx-h100");
  const perf::FrameworkProfile& f = perf::framework_profile("megatron-core-2024");
  tune::SearchSpace space;
  space.tp = {1, 2};
  restrict_to_framework(f, space, m);
  space.framework = &f;
  EXPECT_EQ(space.cp, (std::vector<int>{1, 2, 4, 8, 16, 32}));
  const tune::Plan with = tune::plan(m, s, 8, 8, space, f.options);
  ASSERT_FALSE(with.ranked.empty());
  EXPECT_GT(with.ranked.front().config.cp, 1);
  for (const auto& c : with.ranked) EXPECT_EQ(c.config.world(), 8);
  tune::SearchSpace engine;
  engine.tp = {1, 2};
  const tune::Plan without = tune::plan(m, s, 8, 8, engine);
  for (const auto& c : without.ranked) EXPECT_EQ(c.config.cp, 1);
}

}  // namespace
}  // namespace meshtrain
