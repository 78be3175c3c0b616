// The memory check's verdict and the training value ranges.
#include "meshtrain/train/memory_check.h"

#include <string>

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/train/option_ranges.h"
#include "meshtrain/train/trainer.h"

namespace meshtrain {
namespace {

TrainOptions options(int dp, int zero) {
  TrainOptions o;
  o.model = load_model_config("gpt2-1.5b");
  o.parallel.dp = dp;
  o.parallel.zero_stage = zero;
  o.parallel.micro_batch_size = 1;
  o.parallel.global_batch_size = dp;
  o.mock_data = true;
  return o;
}

// check_options refuses o on `ranks` ranks with a message containing `why`.
void expect_refused(const TrainOptions& o, int ranks, const std::string& why) {
  try {
    check_options(o, ranks);
    ADD_FAILURE() << "accepted; expected a refusal naming '" << why << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

constexpr double GiB = 1073741824.0;

TEST(MemoryCheck, RankPeakIsTheMemoryModelOfItsStage) {
  const TrainOptions o = options(1, 0);
  const perf::MemoryBytes b = rank_peak_memory(o, 0);
  // fp32: 4 bytes of weights, 4 of gradients, 8 of Adam moments per parameter.
  const double n = double(o.model.num_parameters());
  EXPECT_NEAR(b.parameters, 4 * n, 0.01 * 4 * n);
  EXPECT_NEAR(b.optimizer, 8 * n, 0.01 * 8 * n);
  EXPECT_GT(b.activations, 0);
  EXPECT_EQ(b.workspace, 0);
}

// --async-save keeps a host copy of the rank's weights and optimizer state
// between saves; without --save there is nothing to snapshot.
TEST(MemoryCheck, AsyncSaveCountsTheSnapshot) {
  TrainOptions o = options(1, 0);
  const perf::MemoryBytes plain = rank_peak_memory(o, 0);
  o.async_save = true;
  EXPECT_EQ(rank_peak_memory(o, 0).workspace, 0);
  o.save_dir = "ckpt";
  const perf::MemoryBytes with = rank_peak_memory(o, 0);
  EXPECT_DOUBLE_EQ(with.workspace, plain.parameters + plain.optimizer);
  EXPECT_DOUBLE_EQ(with.total(), plain.total() + plain.parameters + plain.optimizer);
}

TEST(MemoryCheck, VerdictNamesNeedLimitLargestItemAndAHint) {
  const TrainOptions o = options(2, 0);
  const perf::MemoryBytes rank{6 * GiB, 6 * GiB, 12 * GiB, 1 * GiB, 0, 0};
  perf::MemoryBytes node = rank;
  node.parameters *= 2, node.gradients *= 2, node.optimizer *= 2, node.activations *= 2;
  const std::string v = node_memory_verdict(node, rank, 2, AvailableMemory{int64_t(22.9 * GiB), "MemAvailable"}, o);
  EXPECT_EQ(v, "not enough memory: the run needs 50.0 GiB on this node (2 ranks, up to 25.0 GiB each), 22.9 GiB "
               "available (MemAvailable); largest item: optimizer states 12.0 GiB; try --zero-stage 1, more ranks on "
               "more nodes (tensor or pipeline parallelism) or a smaller model (--no-memory-check runs anyway)");
  // What fits passes; an unknown limit is no verdict.
  EXPECT_EQ(node_memory_verdict(node, rank, 2, AvailableMemory{int64_t(64 * GiB), "MemAvailable"}, o), "");
  EXPECT_EQ(node_memory_verdict(node, rank, 2, AvailableMemory{}, o), "");
  // Activations the largest: recompute and a smaller micro-batch.
  TrainOptions big_batch = options(1, 0);
  big_batch.parallel.micro_batch_size = 8;
  const perf::MemoryBytes acts{1 * GiB, 1 * GiB, 2 * GiB, 30 * GiB, 0, 0};
  const std::string a = node_memory_verdict(acts, acts, 1, AvailableMemory{int64_t(8 * GiB), "x"}, big_batch);
  EXPECT_NE(a.find("largest item: activations 30.0 GiB; try --recompute-granularity full, a smaller "
                   "--micro-batch-size"),
            std::string::npos)
      << a;
}

TEST(OptionRanges, AcceptTheDefaultsAndRejectEachBadValue) {
  TrainOptions o = options(1, 0);
  o.lr.decay_iters = 10;
  EXPECT_NO_THROW(check_option_ranges(o));
  auto bad = [&](auto change) {
    TrainOptions c = o;
    change(c);
    return [&c] {
      try {
        check_option_ranges(c);
      } catch (const Error&) {
        return true;
      }
      return false;
    }();
  };
  EXPECT_TRUE(bad([](TrainOptions& c) { c.lr.lr = 1.0f / 0.0f; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.lr.lr = -1; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.lr.min_lr = 1; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.adam.beta1 = 1; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.adam.beta2 = -0.1f; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.adam.eps = 0; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.adam.weight_decay = -5; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.clip_grad = 0.0f / 0.0f; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.train_iters = 0; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.log_interval = 0; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.lr.warmup = -1; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.data_path = "/tmp"; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.sample_tokens = -1; }));
  EXPECT_TRUE(bad([](TrainOptions& c) { c.parallel.micro_batch_size = 1 << 30; }));
  EXPECT_FALSE(bad([](TrainOptions& c) { c.eval_iters = 3; }));  // mock data validates
  EXPECT_TRUE(bad([](TrainOptions& c) {
    c.mock_data = false;
    c.data_path = "/nonexistent/tokens.bin";
    c.eval_iters = 3;
  }));
}

}  // namespace
}  // namespace meshtrain

namespace meshtrain {
namespace {

// Context parallelism is a layout the performance model prices; the engine
// refuses it with one line before anything is allocated.
TEST(TrainOptions, TheEngineRefusesContextParallelism) {
  TrainOptions o = options(2, 0);
  o.parallel.cp = 2;
  o.parallel.flash_attention = true;
  expect_refused(o, 4, "engine runs no context parallelism");
}

// Hybrid sharding: a shard group that divides DP, under ZeRO 1-3.
TEST(TrainOptions, HybridShardingNeedsAGroupThatDividesDpUnderZero) {
  TrainOptions o = options(4, 3);
  o.parallel.zero_shard = 2;
  EXPECT_NO_THROW(check_options(o, 4));
  o.parallel.zero_shard = 3;
  expect_refused(o, 4, "not divisible by the data-parallel shard size 3");
  o.parallel.zero_shard = 2;
  o.parallel.zero_stage = 0;
  EXPECT_THROW(check_options(o, 4), Error);
}

// ZeRO-3's prefetch holds one more unit's gathered weights; turning it off
// (--no-zero-prefetch) saves them, and applies only to ZeRO-3.
TEST(MemoryCheck, ZeroPrefetchHoldsOneMoreUnit) {
  TrainOptions o = options(4, 3);
  const double with = rank_peak_memory(o, 0).comm_buffers;
  o.zero_prefetch = false;
  const double without = rank_peak_memory(o, 0).comm_buffers;
  const double h = o.model.hidden_size;
  EXPECT_GT(with - without, 12 * h * h * 4 * 0.99);  // about a block of fp32 weights (12 h^2)
  EXPECT_NO_THROW(check_options(o, 4));
  o.parallel.zero_stage = 2;
  expect_refused(o, 4, "--no-zero-prefetch applies to --zero-stage 3");
}

}  // namespace
}  // namespace meshtrain
