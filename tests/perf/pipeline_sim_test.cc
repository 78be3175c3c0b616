// The pipeline simulator against the closed forms it must reproduce, and its
// long-schedule extrapolation against the full walk.
#include <gtest/gtest.h>

#include <random>

#include "meshtrain/perf/predict.h"

namespace meshtrain::perf {
namespace {

PipelineCosts uniform(int pp, int vpp, double f, double b) {
  PipelineCosts c;
  c.pp = pp;
  c.vpp = vpp;
  c.forward_s.assign(pp * vpp, f / vpp);
  c.backward_s.assign(pp * vpp, b / vpp);
  c.transfer_s.assign(pp, 0.0);
  return c;
}

TEST(PipelineSim, OneFOneBBubbleMatchesClosedForm) {
  for (int pp : {1, 2, 4, 8})
    for (int m : {1, 4, 8, 32}) {
      const PipelineTimeline t = simulate(make_schedule(ScheduleKind::one_f_one_b, pp, 1, m), uniform(pp, 1, 1.0, 2.0));
      const double want = double(pp - 1) / (m + pp - 1);
      // Stage 0 ends the step; later stages finish earlier and idle the rest.
      EXPECT_NEAR(t.stages[0].finish_s, t.makespan_s, 1e-12);
      for (int s = 0; s < pp; ++s) {
        const double idle = t.stages[s].bubble_s + (t.makespan_s - t.stages[s].finish_s);
        EXPECT_NEAR(idle / t.makespan_s, want, 1e-12) << pp << " " << m << " " << s;
        EXPECT_NEAR(t.stages[s].busy_s, m * 3.0, 1e-9);
      }
      EXPECT_NEAR(t.makespan_s, (m + pp - 1) * 3.0, 1e-9);
    }
}

TEST(PipelineSim, GPipeBubbleMatchesClosedForm) {
  const int pp = 4, m = 8;
  const PipelineTimeline t = simulate(make_schedule(ScheduleKind::gpipe, pp, 1, m), uniform(pp, 1, 1.0, 2.0));
  EXPECT_NEAR(t.makespan_s, (m + pp - 1) * 3.0, 1e-9);
  EXPECT_NEAR(t.stages[0].bubble_s / t.makespan_s, double(pp - 1) / (m + pp - 1), 1e-12);
}

TEST(PipelineSim, InterleavingDividesTheBubbleByChunks) {
  // Megatron-LM (Narayanan et al. 2021): bubble time (p-1)(f+b)/v.
  for (int pp : {2, 4})
    for (int vpp : {2, 3})
      for (int m : {2 * pp, 4 * pp}) {
        const PipelineTimeline t =
            simulate(make_schedule(ScheduleKind::interleaved, pp, vpp, m), uniform(pp, vpp, 1.0, 2.0));
        EXPECT_NEAR(t.makespan_s, m * 3.0 + (pp - 1) * 3.0 / vpp, 1e-9) << pp << " " << vpp << " " << m;
      }
}

TEST(PipelineSim, TransfersDelayTheReceiverOrTheSender) {
  PipelineCosts c = uniform(2, 1, 1.0, 2.0);
  c.transfer_s = {0.5, 0.5};
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 1);
  // f on stage 0, transfer, f + b on stage 1, transfer, b on stage 0.
  EXPECT_NEAR(simulate(s, c).makespan_s, 1 + 0.5 + 3 + 0.5 + 2, 1e-12);
  EXPECT_NEAR(simulate(s, c).stages[0].transfer_wait_s, 0.5, 1e-12);
  c.blocking_sends = true;
  // Stage 1 waits for the activation and then for its own send of the gradient.
  EXPECT_NEAR(simulate(s, c).stages[1].transfer_wait_s, 1.0, 1e-12);
  EXPECT_NEAR(simulate(s, c).makespan_s, 1 + 0.5 + 3 + 0.5 + 2, 1e-12);
}

TEST(PipelineSim, UnevenLastStageBoundsTheSteadyState) {
  PipelineCosts c = uniform(4, 1, 1.0, 2.0);
  c.forward_s[3] = 2.0;  // a heavy head: 4 s per micro-batch on the last stage
  c.backward_s[3] = 2.0;
  const int m = 40;
  const PipelineTimeline t = simulate(make_schedule(ScheduleKind::one_f_one_b, 4, 1, m), c);
  EXPECT_GT(t.makespan_s, m * 4.0);
  EXPECT_LT(t.makespan_s, m * 4.0 + 4 * 4.0);
}

// Durations as the time model produces them: a first, a last and identical
// middle stages, transfers per boundary.
PipelineCosts structured(std::mt19937& rng, int pp, int vpp) {
  std::uniform_real_distribution<double> u(0.5, 2.0);
  const double f = u(rng), b = u(rng);
  PipelineCosts c = uniform(pp, vpp, f * vpp, b * vpp);
  c.forward_s.front() *= u(rng);
  c.backward_s.front() *= u(rng);
  c.forward_s.back() *= u(rng);
  c.backward_s.back() *= u(rng);
  for (double& x : c.transfer_s) x = 0.05 * u(rng);
  return c;
}

TEST(PipelineSim, ExtrapolationEqualsTheFullWalk) {
  std::mt19937 rng(7);
  PerfCache cache;
  for (int trial = 0; trial < 40; ++trial) {
    const int pp = 2 + trial % 7;
    const bool inter = trial % 3 == 0;
    const int vpp = inter ? 1 + trial % 3 : 1;
    const ScheduleKind kind = inter ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
    PipelineCosts c = structured(rng, pp, vpp);
    c.blocking_sends = trial % 2 == 0;
    const int m = pp * (12 + trial % 5);
    const PipelineTimeline full = simulate(make_schedule(kind, pp, vpp, m), c);
    const PipelineTimeline fast = pipeline_timeline(kind, m, c, cache, /*max_exact_steps=*/0);
    EXPECT_NEAR(fast.makespan_s, full.makespan_s, 1e-9 * full.makespan_s) << trial << " pp " << pp << " vpp " << vpp << " m " << m;
    for (int s = 0; s < pp; ++s) {
      EXPECT_NEAR(fast.stages[s].bubble_s + fast.stages[s].transfer_wait_s,
                  full.stages[s].bubble_s + full.stages[s].transfer_wait_s, 1e-9 * full.makespan_s);
      EXPECT_NEAR(fast.stages[s].bubble_s, full.stages[s].bubble_s, 1e-3 * full.makespan_s);
      EXPECT_NEAR(fast.stages[s].finish_s, full.stages[s].finish_s, 1e-9 * full.makespan_s);
      for (int k = 0; k < vpp; ++k)
        EXPECT_NEAR(fast.stages[s].last_backward_end_s[k], full.stages[s].last_backward_end_s[k],
                    1e-9 * full.makespan_s);
    }
  }
}

}  // namespace
}  // namespace meshtrain::perf
