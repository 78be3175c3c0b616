#include "meshtrain/measure/comm_bench.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

TEST(CommBench, ParseBytes) {
  EXPECT_EQ(parse_bytes("8"), 8);
  EXPECT_EQ(parse_bytes("64K"), 64 << 10);
  EXPECT_EQ(parse_bytes("64KiB"), 64 << 10);
  EXPECT_EQ(parse_bytes("256M"), int64_t{256} << 20);
  EXPECT_EQ(parse_bytes("1g"), int64_t{1} << 30);
  EXPECT_THROW(parse_bytes("x"), Error);
  EXPECT_THROW(parse_bytes("12Q"), Error);
  EXPECT_THROW(parse_bytes(""), Error);
}

TEST(CommBench, Sizes) {
  const auto s = bench_sizes(8, 256 << 20);
  EXPECT_EQ(s.front(), 8);
  EXPECT_EQ(s.back(), int64_t{256} << 20);
  EXPECT_EQ(s.size(), 26u);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], 2 * s[i - 1]);
  EXPECT_THROW(bench_sizes(0, 8), Error);
  EXPECT_THROW(bench_sizes(16, 8), Error);
}

TEST(CommBench, CountsPerRank) {
  // all-gather of 8 bytes over 4 ranks of float: one element each, 16 bytes moved
  EXPECT_EQ(bench_count_per_rank(BenchOp::all_gather, 8, 4, 4), 1);
  EXPECT_EQ(bench_actual_bytes(BenchOp::all_gather, 1, 4, 4), 16);
  EXPECT_EQ(bench_count_per_rank(BenchOp::all_reduce, 1024, 4, 4), 256);
  EXPECT_EQ(bench_actual_bytes(BenchOp::all_reduce, 256, 4, 4), 1024);
  EXPECT_EQ(bench_count_per_rank(BenchOp::reduce_scatter, 1 << 20, 8, 4), (1 << 20) / 32);
}

TEST(CommBench, FitRecoversAlphaBeta) {
  std::vector<SizeTime> pts;
  for (double b = 8; b <= (1 << 26); b *= 2) pts.push_back({b, 5e-6 + b / 2e9});
  const AlphaBeta f = fit_alpha_beta(pts);
  EXPECT_NEAR(f.alpha_s, 5e-6, 1e-12);
  EXPECT_NEAR(f.beta_Bps, 2e9, 1e-3);
  EXPECT_LT(f.rel_rms, 1e-9);
  EXPECT_EQ(f.points, static_cast<int>(pts.size()));
  const nlohmann::json j = alpha_beta_json(f, BenchOp::all_reduce, 4);
  EXPECT_EQ(j["steps"], 6);
  EXPECT_NEAR(j["bus_beta_Bps"].get<double>(), 2e9 * 1.5, 1e-3);
  EXPECT_NEAR(j["latency_per_step_s"].get<double>(), 5e-6 / 6, 1e-12);
}

TEST(CommBench, FitKeepsTermsNonNegative) {
  // Times that fall with size would need a negative bandwidth term.
  const AlphaBeta f = fit_alpha_beta({{8, 3e-6}, {16, 2e-6}, {32, 1e-6}});
  EXPECT_GE(f.alpha_s, 0.0);
  EXPECT_EQ(f.beta_Bps, 0.0);
  // A steep line through the origin would need a negative latency.
  const AlphaBeta g = fit_alpha_beta({{1000, 1e-7}, {2000, 1e-6}, {4000, 3e-6}});
  EXPECT_EQ(g.alpha_s, 0.0);
  EXPECT_GT(g.beta_Bps, 0.0);
}

}  // namespace
}  // namespace meshtrain
