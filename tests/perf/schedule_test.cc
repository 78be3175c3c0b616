// Properties of the generated pipeline schedules: every (micro-batch, chunk)
// runs forward then backward exactly once on each stage, the sends and
// receives match and can always complete (non-blocking sends, blocking
// receives), and the activations in flight are those of the published
// schedules.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "meshtrain/core/error.h"
#include "meshtrain/parallel/schedule.h"

namespace meshtrain {
namespace {

// Runs every stage's actions in order; a receive completes only after the
// matching send was executed. Returns false on deadlock.
bool runs_to_completion(const Schedule& s) {
  std::set<std::tuple<int, int, int>> sent;  // (direction, micro-batch, virtual stage receiving)
  std::vector<size_t> pos(s.pp, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int st = 0; st < s.pp; ++st) {
      const auto& acts = s.stages[st];
      while (pos[st] < acts.size()) {
        const Action& a = acts[pos[st]];
        const int v = a.chunk * s.pp + st;
        if (a.kind == ActionKind::recv_forward && !sent.count({0, a.micro_batch, v})) break;
        if (a.kind == ActionKind::recv_backward && !sent.count({1, a.micro_batch, v})) break;
        if (a.kind == ActionKind::send_forward) sent.insert({0, a.micro_batch, v + 1});
        if (a.kind == ActionKind::send_backward) sent.insert({1, a.micro_batch, v - 1});
        ++pos[st];
        progress = true;
      }
    }
  }
  for (int st = 0; st < s.pp; ++st)
    if (pos[st] != s.stages[st].size()) return false;
  return true;
}

void check_structure(const Schedule& s) {
  const int last = s.pp * s.vpp - 1;
  for (int st = 0; st < s.pp; ++st) {
    std::map<std::pair<int, int>, int> state;  // 0 none, 1 forward done, 2 backward done
    std::map<ActionKind, int> count;
    for (const Action& a : s.stages[st]) {
      ++count[a.kind];
      auto& x = state[{a.micro_batch, a.chunk}];
      if (a.kind == ActionKind::forward) {
        EXPECT_EQ(x, 0) << to_string(a);
        x = 1;
      }
      if (a.kind == ActionKind::backward) {
        EXPECT_EQ(x, 1) << to_string(a) << " before its forward";
        x = 2;
      }
    }
    const int n = s.num_micro_batches * s.vpp;
    EXPECT_EQ(count[ActionKind::forward], n);
    EXPECT_EQ(count[ActionKind::backward], n);
    // Virtual stage 0 receives no activation, the last sends none.
    int first_chunk_v0 = st == 0 ? s.num_micro_batches : 0;
    int last_chunk_vlast = st == s.pp - 1 ? s.num_micro_batches : 0;
    EXPECT_EQ(count[ActionKind::recv_forward], n - first_chunk_v0);
    EXPECT_EQ(count[ActionKind::send_backward], n - first_chunk_v0);
    EXPECT_EQ(count[ActionKind::send_forward], n - last_chunk_vlast);
    EXPECT_EQ(count[ActionKind::recv_backward], n - last_chunk_vlast);
    (void)last;
  }
}

TEST(Schedule, GPipeHoldsEveryMicroBatch) {
  for (int pp : {1, 2, 4})
    for (int m : {1, 3, 8}) {
      Schedule s = make_schedule(ScheduleKind::gpipe, pp, 1, m);
      check_structure(s);
      EXPECT_TRUE(runs_to_completion(s));
      for (int st = 0; st < pp; ++st) EXPECT_EQ(s.max_in_flight(st), m);
    }
}

TEST(Schedule, OneFOneBInFlightIsPipelineDepth) {
  for (int pp : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 7, 8, 16}) {
      Schedule s = make_schedule(ScheduleKind::one_f_one_b, pp, 1, m);
      check_structure(s);
      EXPECT_TRUE(runs_to_completion(s)) << pp << " " << m;
      for (int st = 0; st < pp; ++st) EXPECT_EQ(s.max_in_flight(st), std::min(pp - st, m)) << pp << " " << m;
    }
}

TEST(Schedule, OneFOneBStartsWithWarmUpForwards) {
  Schedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 1, 8);
  // Stage 1: pp - s - 1 = 2 warm-up forwards, then forward 2, backward 0.
  std::vector<Action> computes;
  for (const Action& a : s.stages[1])
    if (a.kind == ActionKind::forward || a.kind == ActionKind::backward) computes.push_back(a);
  ASSERT_GE(computes.size(), 4u);
  EXPECT_EQ(computes[0], (Action{ActionKind::forward, 0, 0}));
  EXPECT_EQ(computes[1], (Action{ActionKind::forward, 1, 0}));
  EXPECT_EQ(computes[2], (Action{ActionKind::forward, 2, 0}));
  EXPECT_EQ(computes[3], (Action{ActionKind::backward, 0, 0}));
}

TEST(Schedule, InterleavedFollowsMegatronOrder) {
  for (int pp : {2, 4})
    for (int vpp : {1, 2, 3})
      for (int m : {pp, 2 * pp, 3 * pp, 4 * pp}) {
        Schedule s = make_schedule(ScheduleKind::interleaved, pp, vpp, m);
        check_structure(s);
        EXPECT_TRUE(runs_to_completion(s)) << pp << " " << vpp << " " << m;
        for (int st = 0; st < pp; ++st) {
          const int warmup = m == pp ? m * vpp : std::min((pp - st - 1) * 2 + (vpp - 1) * pp, m * vpp);
          EXPECT_EQ(s.max_in_flight(st), std::min(warmup + 1, m * vpp)) << pp << " " << vpp << " " << m;
        }
      }
  // pp = 2, vpp = 2, m = 4, stage 0: forwards run chunk 0 on micro-batches
  // 0, 1, then chunk 1 on 0, 1 (groups of pp), then chunk 0 on 2, 3.
  Schedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 4);
  std::vector<std::pair<int, int>> fw;
  for (const Action& a : s.stages[0])
    if (a.kind == ActionKind::forward) fw.push_back({a.micro_batch, a.chunk});
  std::vector<std::pair<int, int>> want = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  EXPECT_EQ(fw, want);
}

TEST(Schedule, RejectsImpossibleShapes) {
  EXPECT_THROW(make_schedule(ScheduleKind::interleaved, 4, 2, 6), Error);
  EXPECT_THROW(make_schedule(ScheduleKind::one_f_one_b, 4, 2, 8), Error);
  EXPECT_THROW(make_schedule(ScheduleKind::gpipe, 0, 1, 8), Error);
  EXPECT_THROW(make_schedule(ScheduleKind::gpipe, 2, 1, 0), Error);
}

}  // namespace
}  // namespace meshtrain
