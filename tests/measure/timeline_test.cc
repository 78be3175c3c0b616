#include "meshtrain/measure/timeline.h"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

// Stage 0 of a 2-stage 1F1B with 2 micro-batches:
//   F0 sendF0 F1 sendF1 recvB0 B0 recvB1 B1
TEST(Timeline, OneSpanPerComputeActionWithItsTimes) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 2);
  std::vector<ActionTime> times;
  double t = 0;
  for (const Action& a : s.stages[0]) {
    times.push_back(ActionTime{a, t, t + 1});
    t += 2;
  }
  const auto spans = compute_spans(times);
  ASSERT_EQ(spans.size(), 4u);
  const char* names[] = {"forward", "forward", "backward", "backward"};
  const char* acts[] = {"F0.0", "F1.0", "B0.0", "B1.0"};
  size_t k = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    const ActionKind kind = times[i].action.kind;
    if (kind != ActionKind::forward && kind != ActionKind::backward) continue;
    ASSERT_LT(k, spans.size());
    EXPECT_EQ(spans[k].name, names[k]);
    EXPECT_EQ(spans[k].args["action"], acts[k]);
    EXPECT_EQ(spans[k].args["micro_batch"], times[i].action.micro_batch);
    EXPECT_DOUBLE_EQ(spans[k].start_s, times[i].start_s);
    EXPECT_DOUBLE_EQ(spans[k].end_s, times[i].end_s);
    ++k;
  }
}

TEST(Timeline, InterleavedChunksAreNamed) {
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 2);
  std::vector<ActionTime> times;
  for (const Action& a : s.stages[1]) times.push_back(ActionTime{a, 0, 1});
  const auto spans = compute_spans(times);
  ASSERT_EQ(spans.size(), 8u);  // 2 micro-batches x 2 chunks, forward and backward
  int chunk1 = 0;
  for (const auto& sp : spans) chunk1 += sp.args["chunk"].get<int>() == 1;
  EXPECT_EQ(chunk1, 4);
}

}  // namespace
}  // namespace meshtrain
