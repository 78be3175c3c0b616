#include "meshtrain/comm/comm_stats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace meshtrain {
namespace {

TEST(BusBw, FactorsFollowNcclTests) {
  for (int n : {1, 2, 4, 8}) {
    SCOPED_TRACE(n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::all_reduce, n), 2.0 * (n - 1) / n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::iall_reduce, n), 2.0 * (n - 1) / n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::all_gather, n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::reduce_scatter, n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::iall_gather, n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::ireduce_scatter, n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::broadcast, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::send, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::recv, n), 1.0);
    EXPECT_DOUBLE_EQ(busbw_factor(CommOp::barrier, n), 0.0);
  }
}

TEST(OpStats, RecordSumsAndDerivesBandwidth) {
  OpStats s;
  s.op = CommOp::all_reduce;
  s.group_size = 4;
  s.record(1000, 0.001, 0.001);
  s.record(3000, 0.003, 0.002);
  EXPECT_EQ(s.calls, 2);
  EXPECT_EQ(s.bytes, 4000);
  EXPECT_DOUBLE_EQ(s.total_s, 0.004);
  EXPECT_DOUBLE_EQ(s.exposed_s, 0.003);
  ASSERT_EQ(s.latencies_s.size(), 2u);
  EXPECT_DOUBLE_EQ(s.algbw(), 4000 / 0.004);
  EXPECT_DOUBLE_EQ(s.busbw(), 4000 / 0.004 * 1.5);
  s.op = CommOp::all_gather;
  EXPECT_DOUBLE_EQ(s.busbw(), 4000 / 0.004 * 0.75);
}

TEST(OpStats, EmptyHasZeroBandwidthAndQuantiles) {
  OpStats s;
  EXPECT_EQ(s.algbw(), 0.0);
  EXPECT_EQ(s.busbw(), 0.0);
  EXPECT_EQ(s.latency_quantile_s(0.5), 0.0);
}

TEST(OpStats, QuantilesInterpolateLinearly) {
  OpStats s;
  for (int i = 100; i >= 1; --i) s.record(0, i * 1e-6, 0);  // 1..100 us, unsorted
  EXPECT_NEAR(s.latency_quantile_s(0.0), 1e-6, 1e-15);
  EXPECT_NEAR(s.latency_quantile_s(1.0), 100e-6, 1e-15);
  EXPECT_NEAR(s.latency_quantile_s(0.5), 50.5e-6, 1e-15);   // between 50 and 51
  EXPECT_NEAR(s.latency_quantile_s(0.99), 99.01e-6, 1e-15);  // 99 + 0.01 * (100 - 99)
  OpStats one;
  one.record(0, 7e-6, 0);
  EXPECT_DOUBLE_EQ(one.latency_quantile_s(0.99), 7e-6);
}

TEST(OpStats, ReservoirBoundsSamplesAndKeepsDistribution) {
  OpStats s;
  const int64_t n = 3 * static_cast<int64_t>(OpStats::kMaxLatencySamples);
  for (int64_t i = 0; i < n; ++i) s.record(1, static_cast<double>(i % 1000), 0);
  EXPECT_EQ(s.calls, n);
  EXPECT_EQ(s.bytes, n);
  EXPECT_EQ(s.latencies_s.size(), OpStats::kMaxLatencySamples);
  EXPECT_NEAR(s.latency_quantile_s(0.5), 500, 15);
  EXPECT_NEAR(s.latency_quantile_s(0.99), 990, 15);
}

TEST(OpStats, MergeAddsEverything) {
  OpStats a, b;
  a.op = b.op = CommOp::reduce_scatter;
  a.group_size = b.group_size = 2;
  a.record(10, 1.0, 0.5);
  b.record(20, 2.0, 2.0);
  b.record(30, 3.0, 1.0);
  a.merge(b);
  EXPECT_EQ(a.calls, 3);
  EXPECT_EQ(a.bytes, 60);
  EXPECT_DOUBLE_EQ(a.total_s, 6.0);
  EXPECT_DOUBLE_EQ(a.exposed_s, 3.5);
  EXPECT_EQ(a.latencies_s.size(), 3u);
  EXPECT_DOUBLE_EQ(a.latency_quantile_s(0.5), 2.0);
}

TEST(OpStats, MergeOfFullReservoirsWeighsByCalls) {
  OpStats a, b;
  const size_t cap = OpStats::kMaxLatencySamples;
  for (size_t i = 0; i < 3 * cap; ++i) a.record(0, 1.0, 0);
  for (size_t i = 0; i < cap; ++i) b.record(0, 2.0, 0);
  a.merge(b);
  EXPECT_EQ(a.calls, static_cast<int64_t>(4 * cap));
  ASSERT_EQ(a.latencies_s.size(), cap);
  size_t ones = 0;
  for (double x : a.latencies_s) ones += x == 1.0;
  EXPECT_EQ(ones, cap * 3 / 4);
}

TEST(CommStats, EntriesTotalsMergeReset) {
  CommStats s;
  s.entry("tp", CommOp::all_reduce, 2).record(100, 0.1, 0.1);
  s.entry("tp", CommOp::all_reduce, 2).record(100, 0.1, 0.1);
  s.entry("dp", CommOp::reduce_scatter, 4).record(400, 0.2, 0.05);
  ASSERT_NE(s.find("tp", CommOp::all_reduce), nullptr);
  EXPECT_EQ(s.find("tp", CommOp::all_reduce)->calls, 2);
  EXPECT_EQ(s.find("tp", CommOp::all_reduce)->group_size, 2);
  EXPECT_EQ(s.find("tp", CommOp::all_gather), nullptr);
  EXPECT_EQ(s.calls(), 3);
  EXPECT_EQ(s.calls("tp"), 2);
  EXPECT_EQ(s.bytes("dp"), 400);
  EXPECT_EQ(s.bytes(), 600);
  EXPECT_DOUBLE_EQ(s.total_s("tp"), 0.2);
  EXPECT_DOUBLE_EQ(s.exposed_s(), 0.25);

  CommStats t;
  t.entry("tp", CommOp::all_reduce, 2).record(50, 0.05, 0.05);
  t.entry("pp", CommOp::send, 2).record(8, 0.01, 0.01);
  s.merge(t);
  EXPECT_EQ(s.find("tp", CommOp::all_reduce)->calls, 3);
  EXPECT_EQ(s.find("tp", CommOp::all_reduce)->bytes, 250);
  EXPECT_EQ(s.find("pp", CommOp::send)->calls, 1);
  EXPECT_EQ(s.entries().size(), 3u);

  s.reset();
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.calls(), 0);
}

TEST(CommStats, JsonAndTable) {
  CommStats s;
  s.entry("dp", CommOp::all_reduce, 4).record(1 << 20, 0.001, 0.001);
  nlohmann::json j = s;
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["group"], "dp");
  EXPECT_EQ(j[0]["op"], "all_reduce");
  EXPECT_EQ(j[0]["group_size"], 4);
  EXPECT_EQ(j[0]["calls"], 1);
  EXPECT_EQ(j[0]["bytes"], 1 << 20);
  EXPECT_DOUBLE_EQ(j[0]["algbw_Bps"].get<double>(), (1 << 20) / 0.001);
  EXPECT_DOUBLE_EQ(j[0]["busbw_Bps"].get<double>(), (1 << 20) / 0.001 * 1.5);
  const std::string table = s.table();
  EXPECT_NE(table.find("all_reduce"), std::string::npos);
  EXPECT_NE(table.find("1.0 MiB"), std::string::npos);
}

TEST(CommOp, NamesAreDistinct) {
  for (int i = 0; i < kNumCommOps; ++i)
    for (int k = i + 1; k < kNumCommOps; ++k)
      EXPECT_NE(comm_op_name(static_cast<CommOp>(i)), comm_op_name(static_cast<CommOp>(k)));
}

}  // namespace
}  // namespace meshtrain
