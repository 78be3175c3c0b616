#include "meshtrain/measure/sweep.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/gemm_shapes.h"

namespace meshtrain {
namespace {

SweepSpec tiny_spec(const std::string& grid, int ranks) {
  SweepSpec s;
  s.model = "tiny";
  s.model_config = sweep_model("tiny", {});
  s.ranks = ranks;
  s.grid = parse_grid(grid);
  return s;
}

TEST(Sweep, ParseGrid) {
  const Grid g = parse_grid("tp=1,2,4; pp=1,2 ;zero=0,1,2,3;mbs=1;recompute=none,selective,full;schedule=1f1b,interleaved");
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g[0].name, "tp");
  EXPECT_EQ(g[0].values, (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_EQ(g[5].values, (std::vector<std::string>{"1f1b", "interleaved"}));
  EXPECT_THROW(parse_grid("tq=1"), Error);
  EXPECT_THROW(parse_grid("tp=1;tp=2"), Error);
  EXPECT_THROW(parse_grid("tp="), Error);
  EXPECT_THROW(parse_grid("zero=4"), Error);
  EXPECT_THROW(parse_grid("recompute=some"), Error);
  EXPECT_THROW(parse_grid("tp=0"), Error);
  EXPECT_THROW(parse_grid("tp=1,1"), Error);
  EXPECT_THROW(parse_grid(""), Error);
}

TEST(Sweep, ExpandValidatesEachConfiguration) {
  const auto pts = expand_sweep(tiny_spec("tp=1,2,3;pp=1,2;schedule=1f1b,interleaved", 4));
  ASSERT_EQ(pts.size(), 12u);
  EXPECT_EQ(pts[0].name, "tp1_pp1_schedule1f1b");
  // tp=1, pp=1, interleaved: needs pp > 1
  EXPECT_FALSE(pts[1].valid);
  EXPECT_NE(pts[1].reason.find("interleaved"), std::string::npos);
  // tp=1, pp=2, 1f1b: dp 2
  EXPECT_TRUE(pts[2].valid) << pts[2].reason;
  EXPECT_EQ(pts[2].parallel.dp, 2);
  // tp=1, pp=2, interleaved: 2 chunks of 2 layers per stage
  EXPECT_TRUE(pts[3].valid) << pts[3].reason;
  EXPECT_EQ(pts[3].parallel.vpp, 2);
  const auto& a = pts[3].train_args;
  const auto it = std::find(a.begin(), a.end(), "--num-layers-per-virtual-pipeline-stage");
  ASSERT_NE(it, a.end());
  EXPECT_EQ(*(it + 1), "2");
  // tp=3: 4 ranks are not divisible by 3
  for (int i = 8; i < 12; ++i) {
    EXPECT_FALSE(pts[i].valid);
    EXPECT_NE(pts[i].reason.find("not divisible"), std::string::npos) << pts[i].reason;
  }
  // The default global batch is ranks x the largest micro-batch.
  EXPECT_EQ(pts[0].parallel.global_batch_size, 4);
}

TEST(Sweep, ExtraFlagsMustNotSetKnobs) {
  SweepSpec s = tiny_spec("tp=1", 2);
  s.extra = {"--zero-stage", "1"};
  EXPECT_THROW(expand_sweep(s), Error);
  EXPECT_EQ(sweep_model("tiny", {"--hidden-size", "64", "--num-layers=4"}).hidden_size, 64);
  EXPECT_EQ(sweep_model("tiny", {"--hidden-size", "64", "--num-layers=4"}).num_layers, 4);
}

TEST(Sweep, CsvAndSummary) {
  const SweepSpec s = tiny_spec("tp=1,2;zero=0,1", 2);
  const auto pts = expand_sweep(s);
  ASSERT_EQ(pts.size(), 4u);
  std::vector<nlohmann::json> rows;
  // memory halves with tp=2 and drops by a quarter with zero=1; throughput
  // falls to 0.5 with tp=2.
  for (const SweepPoint& p : pts) {
    const bool tp2 = p.parallel.tp == 2, z1 = p.parallel.zero_stage == 1;
    nlohmann::json rep{{"tokens_per_s", tp2 ? 50.0 : 100.0},
                       {"memory_peak_bytes", {{"total", (tp2 ? 500.0 : 1000.0) * (z1 ? 0.75 : 1.0)}}},
                       {"measurements", {{"aggregate", {{"comm_exposed_s_per_step", {{"max", tp2 ? 0.3 : 0.1}}}}}}}};
    rows.push_back(sweep_row(p, "ok", "", rep));
  }
  rows.push_back(sweep_row(pts[0], "failed", "exit 1: boom, \"quoted\"", nullptr));
  const std::string csv = rows_to_csv(rows, sweep_columns(s.grid));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6);
  EXPECT_NE(csv.find("\"exit 1: boom, \"\"quoted\"\"\""), std::string::npos);
  EXPECT_EQ(csv.substr(0, csv.find('\n')).find("name,tp,zero,dp,status,reason"), 0u);

  const nlohmann::json sum = summarize_sweep(s.grid, rows);
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0]["knob"], "tp");
  EXPECT_EQ(sum[0]["pairs"], 2);
  EXPECT_DOUBLE_EQ(sum[0]["mem_total"]["median"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(sum[0]["tokens_per_s"]["median"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(sum[0]["comm_exposed_s"]["median"].get<double>(), 3.0);
  EXPECT_EQ(sum[1]["knob"], "zero");
  EXPECT_DOUBLE_EQ(sum[1]["mem_total"]["median"].get<double>(), 0.75);
  EXPECT_NE(summary_text(sum).find("0.50x"), std::string::npos);
  EXPECT_EQ(grid_from_json(grid_json(s.grid))[1].values, s.grid[1].values);
}

TEST(GemmShapes, LayerShapes) {
  ModelConfig m = sweep_model("bench", {});
  const auto s = layer_gemm_shapes(m, 2, 4, false);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].layer, "qkv");
  EXPECT_EQ(s[0].M, 4 * 256);
  EXPECT_EQ(s[0].K, 384);
  EXPECT_EQ(s[0].N, 3 * 384 / 2);
  EXPECT_EQ(s[1].K, 192);  // proj: row-parallel
  EXPECT_EQ(s[2].N, 4 * 384 / 2);
  EXPECT_EQ(s[3].K, 4 * 384 / 2);
  EXPECT_EQ(s[4].N, 50304 / 2);
  EXPECT_GE(s[4].calls_per_micro_batch, 1);
  EXPECT_THROW(layer_gemm_shapes(m, 4, 1, false), Error);  // 6 heads
}

}  // namespace
}  // namespace meshtrain
