#include "meshtrain/measure/comm_bench.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view bench_op_name(BenchOp op) {
  switch (op) {
    case BenchOp::all_reduce: return "all_reduce";
    case BenchOp::all_gather: return "all_gather";
    case BenchOp::reduce_scatter: return "reduce_scatter";
    case BenchOp::broadcast: return "broadcast";
    case BenchOp::sendrecv: return "sendrecv";
  }
  return "?";
}

BenchOp parse_bench_op(std::string_view name) {
  for (BenchOp op : kAllBenchOps)
    if (bench_op_name(op) == name) return op;
  throw Error(fmt::format("unknown operation '{}' (all_reduce, all_gather, reduce_scatter, broadcast, sendrecv)",
                          name));
}

CommOp bench_comm_op(BenchOp op) {
  switch (op) {
    case BenchOp::all_reduce: return CommOp::all_reduce;
    case BenchOp::all_gather: return CommOp::all_gather;
    case BenchOp::reduce_scatter: return CommOp::reduce_scatter;
    case BenchOp::broadcast: return CommOp::broadcast;
    case BenchOp::sendrecv: return CommOp::send;
  }
  return CommOp::send;
}

int64_t parse_bytes(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  check(i > 0 && i <= 18, "'{}' is not a size in bytes (e.g. 8, 64K, 256M, 1G)", s);
  int64_t v = std::stoll(std::string(s.substr(0, i)));
  std::string unit(s.substr(i));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    shift = 30;
  else
    throw Error(fmt::format("'{}' is not a size in bytes (e.g. 8, 64K, 256M, 1G)", s));
  check(v <= (int64_t{1} << (62 - shift)), "size '{}' is too large", s);
  return v << shift;
}

std::vector<int64_t> bench_sizes(int64_t min_bytes, int64_t max_bytes) {
  check(min_bytes >= 1, "--min-bytes must be at least 1 (got {})", min_bytes);
  check(max_bytes >= min_bytes, "--max-bytes {} is below --min-bytes {}", max_bytes, min_bytes);
  std::vector<int64_t> out;
  for (int64_t b = min_bytes; b <= max_bytes; b *= 2) out.push_back(b);
  return out;
}

int64_t bench_count_per_rank(BenchOp op, int64_t bytes, int n, int elem_bytes) {
  const int64_t elems = bytes / elem_bytes;
  const bool sharded = op == BenchOp::all_gather || op == BenchOp::reduce_scatter;
  return std::max<int64_t>(1, sharded ? elems / n : elems);
}

int64_t bench_actual_bytes(BenchOp op, int64_t count_per_rank, int n, int elem_bytes) {
  const bool sharded = op == BenchOp::all_gather || op == BenchOp::reduce_scatter;
  return count_per_rank * elem_bytes * (sharded ? n : 1);
}

AlphaBeta fit_alpha_beta(const std::vector<SizeTime>& pts) {
  AlphaBeta f;
  f.points = static_cast<int>(pts.size());
  // Minimise sum w (a + b x - t)^2 with w = 1 / t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const SizeTime& p : pts) {
    if (p.time_s <= 0) continue;
    const double w = 1.0 / (p.time_s * p.time_s);
    sw += w, sx += w * p.bytes, sy += w * p.time_s, sxx += w * p.bytes * p.bytes, sxy += w * p.bytes * p.time_s;
  }
  const double det = sw * sxx - sx * sx;
  double a = 0, b = 0;
  if (sw > 0 && std::abs(det) > 1e-30 * sw * sxx) {
    b = (sw * sxy - sx * sy) / det;
    a = (sy - b * sx) / sw;
  } else if (sw > 0) {
    a = sy / sw;
  }
  // Physical constraints: a negative latency or bandwidth is refitted with
  // that term held at zero.
  if (a < 0 && sxx > 0) {
    a = 0;
    b = sxy / sxx;
  }
  if (b < 0 && sw > 0) {
    b = 0;
    a = sy / sw;
  }
  f.alpha_s = a;
  f.beta_Bps = b > 0 ? 1.0 / b : 0.0;
  double se = 0;
  int n = 0;
  for (const SizeTime& p : pts) {
    if (p.time_s <= 0) continue;
    const double r = (a + b * p.bytes - p.time_s) / p.time_s;
    se += r * r;
    ++n;
  }
  f.rel_rms = n > 0 ? std::sqrt(se / n) : 0.0;
  return f;
}

nlohmann::json alpha_beta_json(const AlphaBeta& f, BenchOp op, int n) {
  // Message steps of a ring (perf/collective.h): all-reduce 2(n-1), all-gather
  // and reduce-scatter n-1, broadcast (pipelined chain) and sendrecv 1.
  int steps = 1;
  if (op == BenchOp::all_reduce) steps = 2 * (n - 1);
  if (op == BenchOp::all_gather || op == BenchOp::reduce_scatter) steps = n - 1;
  steps = std::max(1, steps);
  return {{"alpha_s", f.alpha_s},
          {"beta_Bps", f.beta_Bps},
          {"bus_beta_Bps", f.beta_Bps * busbw_factor(bench_comm_op(op), n)},
          {"steps", steps},
          {"latency_per_step_s", f.alpha_s / steps},
          {"rel_rms", f.rel_rms},
          {"points", f.points}};
}

}  // namespace meshtrain
