// Calibration from bench output: the peak is the per-thread peak times a
// rank's cores (at least one; more ranks than cores time-share them), the matmul curve is carried over, and the link's per-size
// efficiency makes the ring formula reproduce every measured all-reduce.
#include "meshtrain/perf/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.h"

namespace meshtrain::perf {
namespace {

nlohmann::json gemm_output() {
  return {{"bench", "gemm"},
          {"model", {{"name", "bench"}}},
          {"peak", {{"fp32", {{"tflops", 0.2}, {"tflops_per_thread", 0.1}}},
                    {"bf16", {{"tflops", 0.4}, {"tflops_per_thread", 0.2}}}}},
          {"system_hint",
           {{"matmul_efficiency_fp32", {{32, 0.3}, {384, 0.8}}}, {"matmul_efficiency_bf16", {{32, 0.2}, {384, 1.3}}}}}};
}

// On n ranks: all-reduce at 20 us per step and 2 GB/s bus bandwidth,
// slower in the middle sizes (a cache effect no alpha-beta line has);
// all-gather at 4 GB/s (a transport may run operations at different
// speeds); sendrecv at 10 us and 3 GB/s.
nlohmann::json comm_output(int n) {
  nlohmann::json ar = nlohmann::json::array(), ag = nlohmann::json::array(), sr = nlohmann::json::array();
  const double f = 2.0 * (n - 1) / n;
  for (double b = 8; b <= (64 << 20); b *= 4) {
    const double slow = (b > 1e5 && b < 1e7) ? 1.6 : 1.0;
    ar.push_back({{"bytes", b}, {"time_s", 2 * (n - 1) * 20e-6 + b * f / 2e9 * slow}});
    ag.push_back({{"bytes", b}, {"time_s", (n - 1) * 20e-6 + b * f / 2 / 4e9}});
    sr.push_back({{"bytes", b}, {"time_s", 10e-6 + b / 3e9}});
  }
  return {{"bench", "comm"},
          {"group", "world"},
          {"group_size", n},
          {"results", {{"all_reduce", {{"points", ar}}}, {"all_gather", {{"points", ag}}}, {"sendrecv", {{"points", sr}}}}}};
}

SystemSpec base() { return load_system_spec("local"); }

TEST(Calibrate, PeakIsPerThreadPeakTimesCoresPerRank) {
  // 4 cores, 2 ranks: two cores' threads per rank; no time sharing.
  const SystemSpec two = calibrate_system(base(), gemm_output(), nullptr, HostInfo{2, 4, 16.0 * (1 << 30)});
  EXPECT_DOUBLE_EQ(two.compute.peak_tflops_fp32, 0.1 * 2);
  EXPECT_EQ(two.cores_per_node, 0);
  EXPECT_FALSE(two.oversubscribed(2));
  // 2 cores, 4 ranks: each rank computes at one core's peak and the four
  // time-share the two cores (cores_per_node).
  const SystemSpec s = calibrate_system(base(), gemm_output(), nullptr, HostInfo{4, 2, 16.0 * (1 << 30)});
  EXPECT_DOUBLE_EQ(s.compute.peak_tflops_fp32, 0.1);
  EXPECT_DOUBLE_EQ(s.compute.peak_tflops_bf16, 0.2);
  EXPECT_EQ(s.cores_per_node, 2);
  EXPECT_TRUE(s.oversubscribed(4));
  EXPECT_EQ(nlohmann::json(s).get<SystemSpec>().cores_per_node, 2);  // round-trips
  EXPECT_EQ(s.devices_per_node, 4);
  EXPECT_DOUBLE_EQ(s.memory.hbm_bytes, 4.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(s.compute.matmul_efficiency_fp32(384), 0.8);
  EXPECT_DOUBLE_EQ(s.compute.matmul_efficiency_bf16(384), 1.0);  // held at most 1
  EXPECT_NE(s.sources.at("peak_tflops").find("bench gemm"), std::string::npos);
}

TEST(Calibrate, LinkReproducesEveryMeasuredOperation) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    const nlohmann::json comm = comm_output(n);
    const SystemSpec s = calibrate_system(base(), nullptr, comm, HostInfo{n, 2, 0});
    ASSERT_EQ(s.links.size(), 1u);
    EXPECT_EQ(s.links[0].span, n);
    // The fastest operation (all-gather, 4 GB/s) sets the bandwidth; the
    // latency is taken as 0.9 of the smallest time per step, so a little
    // above 4.
    EXPECT_NEAR(s.links[0].bandwidth_gbs, 4.0, 0.1);
    EXPECT_TRUE(s.links[0].op_efficiency[int(LinkOp::all_gather)].has_value());
    EXPECT_TRUE(s.links[0].op_efficiency[int(LinkOp::p2p)].has_value());
    EXPECT_FALSE(s.links[0].op_efficiency[int(LinkOp::reduce_scatter)].has_value());  // not measured
    const std::vector<CommCheck> rows = check_comm(s, comm);
    ASSERT_EQ(rows.size(), 3 * comm["results"]["all_reduce"]["points"].size());
    for (const CommCheck& c : rows) EXPECT_NEAR(c.predicted_s / c.measured_s, 1.0, 1e-9) << c.op << " " << c.bytes;
    for (const LinkOp op : {LinkOp::all_reduce, LinkOp::all_gather, LinkOp::p2p})
      for (const auto& [x, y] : s.links[0].efficiency_of(op).points()) {
        EXPECT_GT(y, 0);
        EXPECT_LE(y, 1);
      }
    // The file round-trips through JSON with its per-operation curves.
    const SystemSpec back = nlohmann::json(s).get<SystemSpec>();
    for (const CommCheck& c : check_comm(back, comm)) EXPECT_NEAR(c.predicted_s / c.measured_s, 1.0, 1e-9);
  }
}

TEST(Calibrate, WrongFilesAreRejected) {
  EXPECT_THROW(calibrate_system(base(), comm_output(2), nullptr, HostInfo{2, 2, 0}), Error);
  EXPECT_THROW(calibrate_system(base(), nullptr, gemm_output(), HostInfo{2, 2, 0}), Error);
  nlohmann::json tp = comm_output(2);
  tp["group"] = "tp";
  EXPECT_THROW(calibrate_system(base(), nullptr, tp, HostInfo{2, 2, 0}), Error);
  EXPECT_THROW(calibrate_system(base(), nullptr, comm_output(2), HostInfo{4, 2, 0}), Error);  // 2 ranks measured
}

}  // namespace
}  // namespace meshtrain::perf
