// Time sharing: ranks that outnumber their node's cores share them. A node
// with a core per rank (or no cores_per_node) predicts exactly as before; 8
// ranks on 2 cores run 4x their compute plus all their communication, and
// a pipeline's bubble costs nothing (idle ranks lend their core).
#include "meshtrain/perf/time_sharing.h"

#include <gtest/gtest.h>

#include "meshtrain/perf/predict.h"

namespace meshtrain::perf {
namespace {

SystemSpec eight_ranks(int cores) {
  SystemSpec s = load_system_spec("local");
  s.devices_per_node = 8;
  s.links.resize(1);
  s.links[0].span = 8;
  s.cores_per_node = cores;
  s.validate();
  return s;
}

ParallelConfig layout(int tp, int pp) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = 8 / (tp * pp);
  p.micro_batch_size = 1;
  p.global_batch_size = 16;
  return p;
}

TEST(TimeSharing, OnlyWhenRanksOutnumberCores) {
  const ModelConfig m = load_model_config("tiny");
  const ParallelConfig p = layout(2, 2);
  const Prediction own = predict(m, p, eight_ranks(0), 8);
  for (int cores : {8, 16}) EXPECT_DOUBLE_EQ(predict(m, p, eight_ranks(cores), 8).step_time_s, own.step_time_s);
  PerfCache cache;
  EXPECT_EQ(time_shared_step(step_costs(m, p, eight_ranks(8), {}, cache), p, eight_ranks(8), 8).step_s, 0.0);
  // Fewer cores, longer steps; the parts add up to the step.
  double last = own.step_time_s;
  for (int cores : {4, 2, 1}) {
    const Prediction q = predict(m, p, eight_ranks(cores), 8);
    EXPECT_GT(q.step_time_s, last) << cores;
    EXPECT_NEAR(q.time.total(), q.step_time_s, 1e-12 * q.step_time_s);
    last = q.step_time_s;
  }
}

TEST(TimeSharing, DataParallelRunsFourTimesItsComputePlusItsCommunication) {
  const ModelConfig m = load_model_config("tiny");
  const ParallelConfig p = layout(1, 1);
  const Prediction own = predict(m, p, eight_ranks(0), 8);
  const Prediction shared = predict(m, p, eight_ranks(2), 8);
  // ZeRO-0 all-reduces once after the last backward: nothing of it overlaps.
  EXPECT_NEAR(shared.step_time_s, 4 * (own.time.compute + own.time.optimizer) + own.time.dp_comm + own.time.tp_comm,
              1e-9 * shared.step_time_s);
  EXPECT_DOUBLE_EQ(shared.time.compute, 4 * own.time.compute);
}

TEST(TimeSharing, PipelineBubbleIsFree) {
  const ModelConfig m = load_model_config("tiny");
  const ParallelConfig p = layout(1, 4);
  const Prediction own = predict(m, p, eight_ranks(0), 8);
  ASSERT_GT(own.time.bubble, 0);
  const Prediction shared = predict(m, p, eight_ranks(2), 8);
  EXPECT_EQ(shared.time.bubble, 0);
  EXPECT_EQ(shared.bubble_fraction, 0);
  // 4 x the mean stage's compute, less than 4 x the critical stage's with its bubble.
  EXPECT_LT(shared.time.compute, 4 * (own.time.compute + own.time.bubble));
}

}  // namespace
}  // namespace meshtrain::perf
