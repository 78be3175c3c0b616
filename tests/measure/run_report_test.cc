// The run report's aggregation, FLOP shares and bubble formula on synthetic
// per-rank records (no MPI).
#include "meshtrain/measure/run_report.h"

#include <gtest/gtest.h>

#include "meshtrain/model/flops.h"

namespace meshtrain {
namespace {

ModelConfig tiny() { return load_model_config("tiny"); }

TEST(RunReport, RankFlopSharesAddUpToTheStep) {
  const ModelConfig m = tiny();
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      for (int dp : {1, 2})
        for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
          ParallelConfig p;
          p.tp = tp, p.pp = pp, p.dp = dp, p.recompute = rc;
          p.micro_batch_size = 1, p.global_batch_size = 8;
          const double tokens = 8.0 * m.seq_length;
          double model = 0, hw = 0;
          for (int s = 0; s < pp; ++s) {
            const StepFlops f = rank_step_flops(m, p, s, tokens);
            model += f.model * tp * dp;  // every rank of the stage holds the same share
            hw += f.hardware * tp * dp;
          }
          const StepFlops all = step_flops(m, p, tokens);
          EXPECT_NEAR(model, all.model, 1e-9 * all.model) << tp << " " << pp << " " << dp;
          EXPECT_NEAR(hw, all.hardware, 1e-9 * all.hardware) << tp << " " << pp << " " << dp;
        }
}

TEST(RunReport, TheoreticalBubble) {
  ParallelConfig p;
  p.pp = 1, p.micro_batch_size = 1, p.global_batch_size = 8;
  EXPECT_EQ(theoretical_bubble_fraction(p), 0.0);
  p.pp = 4;  // m = 8
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(p), 3.0 / 11.0);
  p.schedule = ScheduleKind::gpipe;
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(p), 3.0 / 11.0);
  p.schedule = ScheduleKind::interleaved, p.vpp = 2;
  EXPECT_DOUBLE_EQ(theoretical_bubble_fraction(p), 3.0 / 11.0 / 2);
}

TEST(RunReport, Spread) {
  const nlohmann::json s = spread({3, 1, 2, 5}, {10, 11, 12, 13});
  EXPECT_EQ(s["min"], 1.0);
  EXPECT_EQ(s["max"], 5.0);
  EXPECT_EQ(s["median"], 2.5);
  EXPECT_EQ(s["min_rank"], 11);
  EXPECT_EQ(s["max_rank"], 13);
}

// Two ranks of a 2-stage pipeline: per-step communication, bubble per stage,
// throughput from the consumed tokens, MFU against the peak.
TEST(RunReport, AggregatesRanks) {
  ParallelConfig p;
  p.pp = 2, p.micro_batch_size = 1, p.global_batch_size = 4;  // m = 4
  const ReportContext ctx{tiny(), p, 2, 0.001};
  std::vector<nlohmann::json> ranks;
  for (int r = 0; r < 2; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.coord = RankCoord{0, 0, r};
    for (int i = 0; i < 3; ++i) {
      StepRecord s;
      s.time_s = i == 0 ? 5.0 : 1.0;  // the first step is left out of steady figures
      s.compute_s = 0.6;
      s.idle_s = r == 0 ? 0.2 : 0.3;
      s.forward_s = 0.2, s.backward_s = 0.4, s.optimizer_s = 0.1;
      s.pipeline_s = r == 1 && i > 0 ? 0.9 : 0.8;
      s.loss_tokens = r == 1 ? 64 : 0;
      s.step_tokens = 64;
      rec.steps.push_back(s);
    }
    rec.comm_steps = 2;
    rec.comm.entry("pp", CommOp::isend, 2).record(1000, 0.01, 0.001);
    rec.comm.entry("pp", CommOp::isend, 2).record(1000, 0.01, 0.001);
    rec.comm.entry("pp", CommOp::recv, 2).record(1000, 0.02, 0.02 + r * 0.01);
    rec.memory.peak[0] = 100 * (r + 1);
    rec.memory.peak_total = 1000 * (r + 1);
    rec.peak_rss_bytes = 1 << 20;
    rec.flops = StepFlops{1e9, 1.5e9};
    ranks.push_back(nlohmann::json::parse(rank_record_json(rec).dump()));  // through text, as gathered
  }
  const nlohmann::json m = aggregate_measurements(ranks, ctx);
  const nlohmann::json& a = m["aggregate"];
  EXPECT_EQ(m["iterations"], 3);
  EXPECT_EQ(m["steady_iterations"], 2);
  EXPECT_DOUBLE_EQ(a["step_time_s"]["median"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(a["tokens_per_s"]["median"].get<double>(), 64.0);
  EXPECT_DOUBLE_EQ(a["compute"]["model_tflops"]["max"].get<double>(), 1e9 / 1.0 / 1e12);
  EXPECT_DOUBLE_EQ(a["compute"]["mfu"]["max"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(a["compute"]["hfu"]["max"].get<double>(), 1.5);
  // span = the longest train_step (0.8 s; rank 1's 0.9 s from iteration 2 on)
  EXPECT_DOUBLE_EQ(a["pipeline"]["bubble_fraction"]["max"].get<double>(), 1 - 0.6 / 0.9);
  EXPECT_DOUBLE_EQ(a["pipeline"]["idle_fraction_of_step"]["max"].get<double>(), 0.3);
  EXPECT_EQ(a["pipeline"]["idle_fraction_of_step"]["max_rank"], 1);
  EXPECT_DOUBLE_EQ(a["pipeline"]["recv_wait_fraction"]["min"].get<double>(), 0.2 / 0.8);
  ASSERT_EQ(a["pipeline"]["stages"].size(), 2u);
  EXPECT_DOUBLE_EQ(a["pipeline"]["stages"][1]["recv_wait_fraction"].get<double>(), 0.3 / 0.9);
  EXPECT_DOUBLE_EQ(a["pipeline"]["stages"][0]["bubble_fraction"].get<double>(), 1 - 0.6 / 0.9);
  EXPECT_DOUBLE_EQ(m["theory"]["bubble_fraction"].get<double>(), 1.0 / 5.0);
  // 2 sends and a receive of 1000 bytes over 2 steps.
  EXPECT_DOUBLE_EQ(a["comm_by_group"]["pp"]["bytes_per_step"]["median"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(a["comm_by_group"]["pp"]["calls_per_step"]["median"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(a["comm_by_group"]["pp"]["exposed_s_per_step"]["max"].get<double>(), (0.002 + 0.03) / 2);
  EXPECT_EQ(a["comm_by_group"]["pp"]["exposed_s_per_step"]["max_rank"], 1);
  ASSERT_EQ(a["comm"].size(), 2u);
  EXPECT_EQ(a["comm"][0]["op"], "isend");
  EXPECT_DOUBLE_EQ(a["comm"][0]["bytes_per_step"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(a["memory_peak_bytes"]["parameters"]["max"].get<double>(), 200.0);
  EXPECT_EQ(a["memory_peak_bytes"]["total"]["max_rank"], 1);
  const std::string t = summary_table(m);
  EXPECT_NE(t.find("bubble by stage"), std::string::npos);
  EXPECT_NE(t.find("isend"), std::string::npos);
  EXPECT_NE(t.find("MFU"), std::string::npos);
}

}  // namespace
}  // namespace meshtrain
