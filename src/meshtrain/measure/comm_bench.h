// The pure parts of `meshtrain bench comm`: the message sizes, the element
// counts each operation uses for a size, and the latency-bandwidth fit.
//
// Sizes follow nccl-tests: the "size" of an all-reduce or broadcast is its
// buffer, of an all-gather or reduce-scatter the full (gathered) buffer, of a
// send/recv the message; algbw = size / time, busbw = algbw x factor with
// the factors of comm/comm_stats.h (busbw_factor).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/comm_stats.h"

namespace meshtrain {

enum class BenchOp { all_reduce, all_gather, reduce_scatter, broadcast, sendrecv };
constexpr BenchOp kAllBenchOps[] = {BenchOp::all_reduce, BenchOp::all_gather, BenchOp::reduce_scatter,
                                    BenchOp::broadcast, BenchOp::sendrecv};
std::string_view bench_op_name(BenchOp op);
BenchOp parse_bench_op(std::string_view name);  // throws Error on unknown
// The CommOp whose bus factor applies (sendrecv: send).
CommOp bench_comm_op(BenchOp op);

// "4096", "64K", "64KiB", "256M", "1G" (binary multiples) -> bytes. Throws
// Error on anything else.
int64_t parse_bytes(std::string_view s);

// min, 2 min, 4 min, ... up to max (inclusive if reached); min >= 1.
std::vector<int64_t> bench_sizes(int64_t min_bytes, int64_t max_bytes);

// Elements of `elem_bytes` per rank that op uses for a nominal `bytes` over
// n ranks: the buffer for all-reduce, broadcast and sendrecv, a 1/n share
// for all-gather and reduce-scatter; at least 1. actual_bytes() is the size
// then really moved (rounding), which the bench reports.
int64_t bench_count_per_rank(BenchOp op, int64_t bytes, int n, int elem_bytes);
int64_t bench_actual_bytes(BenchOp op, int64_t count_per_rank, int n, int elem_bytes);

// time = alpha + bytes / beta, fitted by least squares on relative errors
// (weights 1/time^2, so small and large messages count alike), with
// alpha >= 0 and 1/beta >= 0 (a term the free fit makes negative is held at 0).
struct AlphaBeta {
  double alpha_s = 0;     // latency
  double beta_Bps = 0;    // asymptotic algorithm bandwidth (bytes / s); 0 if the fit has no slope
  double rel_rms = 0;     // root mean square of (fit - time) / time
  int points = 0;
};
struct SizeTime {
  double bytes = 0, time_s = 0;
};
AlphaBeta fit_alpha_beta(const std::vector<SizeTime>& points);

// The fit in the performance model's terms (perf/collective.h: a ring of
// `steps` message steps, time = steps x latency + bytes x factor / bandwidth):
// {"alpha_s", "beta_Bps", "bus_beta_Bps" (beta x bus factor), "steps",
//  "latency_per_step_s" (alpha / steps), "rel_rms", "points"}.
nlohmann::json alpha_beta_json(const AlphaBeta& f, BenchOp op, int n);

}  // namespace meshtrain
