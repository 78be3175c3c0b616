#include "meshtrain/measure/timeline.h"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

// Stage 0 of a 2-stage 1F1B with 2 micro-batches:
//   F0 sendF0 F1 sendF1 recvB0 B0 recvB1 B1
TEST(Timeline, SpansBetweenPointToPointCalls) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 2);
  const auto& a = s.stages[0];
  // Times: F0 [0,1], send posted at 1; F1 [1,2], send at 2; recv B0 [2,3];
  // B0 [3,4]; recv B1 [4,5]; B1 [5,6].
  int n_p2p = 0;
  for (const Action& x : a) n_p2p += x.kind != ActionKind::forward && x.kind != ActionKind::backward;
  ASSERT_EQ(n_p2p, 4) << "unexpected schedule";
  const std::vector<TimedCall> calls = {{1, 1.5, false}, {2, 2.5, false}, {2, 3, true}, {4, 5, true}};
  const auto spans = compute_spans(a, calls, 0, 6);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].name, "forward");
  EXPECT_EQ(spans[0].args["micro_batch"], 0);
  EXPECT_DOUBLE_EQ(spans[0].start_s, 0);
  EXPECT_DOUBLE_EQ(spans[0].end_s, 1);
  EXPECT_EQ(spans[1].name, "forward");
  EXPECT_DOUBLE_EQ(spans[1].start_s, 1);  // after the send was posted
  EXPECT_DOUBLE_EQ(spans[1].end_s, 2);
  EXPECT_EQ(spans[2].name, "backward");
  EXPECT_DOUBLE_EQ(spans[2].start_s, 3);  // after the blocking receive
  EXPECT_DOUBLE_EQ(spans[2].end_s, 4);
  EXPECT_EQ(spans[3].name, "backward");
  EXPECT_DOUBLE_EQ(spans[3].start_s, 5);
  EXPECT_DOUBLE_EQ(spans[3].end_s, 6);
}

TEST(Timeline, AdjacentComputeMergesAndMismatchFallsBack) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 1, 1, 2);  // F0 B0 F1 B1, no p2p
  auto spans = compute_spans(s.stages[0], {}, 0, 4);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].name, "forward+backward");
  EXPECT_EQ(spans[0].args["actions"], "F0.0 B0.0 F1.0 B1.0");
  // A stage with p2p actions but no recorded calls: one span over the step.
  const Schedule t = make_schedule(ScheduleKind::gpipe, 2, 1, 2);
  spans = compute_spans(t.stages[1], {}, 0, 4);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_DOUBLE_EQ(spans[0].end_s, 4);
}

TEST(Timeline, StepTracerKeepsPipelineCallsInOrder) {
  StepTracer tr(nullptr);
  tr.on_comm(CommEvent{CommOp::isend, "pp", 2, 8, 2.0, 9.0, 0.1, 1});
  tr.on_comm(CommEvent{CommOp::recv, "pp", 2, 8, 1.0, 1.5, 0.5, 1});
  tr.on_comm(CommEvent{CommOp::all_reduce, "tp", 2, 8, 0.5, 0.6, 0.1, -1});
  const auto calls = tr.take_p2p();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_DOUBLE_EQ(calls[0].start_s, 1.0);
  EXPECT_TRUE(calls[0].blocking);
  EXPECT_FALSE(calls[1].blocking);
  EXPECT_TRUE(tr.take_p2p().empty());
}

}  // namespace
}  // namespace meshtrain
