#include "meshtrain/comm/comm_stats.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/format.h"
#include "meshtrain/core/rng.h"

namespace meshtrain {

std::string_view comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::all_reduce: return "all_reduce";
    case CommOp::reduce_scatter: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
    case CommOp::broadcast: return "broadcast";
    case CommOp::send: return "send";
    case CommOp::recv: return "recv";
    case CommOp::barrier: return "barrier";
    case CommOp::iall_reduce: return "iall_reduce";
    case CommOp::ireduce_scatter: return "ireduce_scatter";
    case CommOp::iall_gather: return "iall_gather";
    case CommOp::isend: return "isend";
    case CommOp::irecv: return "irecv";
  }
  return "?";
}

double busbw_factor(CommOp op, int n) {
  if (n <= 0) return 0.0;
  switch (op) {
    case CommOp::all_reduce:
    case CommOp::iall_reduce: return 2.0 * (n - 1) / n;
    case CommOp::reduce_scatter:
    case CommOp::ireduce_scatter:
    case CommOp::all_gather:
    case CommOp::iall_gather: return static_cast<double>(n - 1) / n;
    case CommOp::broadcast:
    case CommOp::send:
    case CommOp::recv:
    case CommOp::isend:
    case CommOp::irecv: return 1.0;
    case CommOp::barrier: return 0.0;
  }
  return 0.0;
}

void OpStats::record(int64_t call_bytes, double latency_s, double exposed) {
  ++calls;
  bytes += call_bytes;
  total_s += latency_s;
  exposed_s += exposed;
  if (latencies_s.size() < kMaxLatencySamples) {
    latencies_s.push_back(latency_s);
  } else {
    // Reservoir sampling (Algorithm R) with a counter-based random index.
    const uint64_t j = splitmix64(static_cast<uint64_t>(calls)) % static_cast<uint64_t>(calls);
    if (j < kMaxLatencySamples) latencies_s[j] = latency_s;
  }
}

namespace {

// k elements of v spread evenly over it.
void append_strided(std::vector<double>& out, const std::vector<double>& v, size_t k) {
  k = std::min(k, v.size());
  for (size_t i = 0; i < k; ++i) out.push_back(v[i * v.size() / k]);
}

}  // namespace

void OpStats::merge(const OpStats& o) {
  group_size = std::max(group_size, o.group_size);
  if (latencies_s.size() + o.latencies_s.size() <= kMaxLatencySamples) {
    latencies_s.insert(latencies_s.end(), o.latencies_s.begin(), o.latencies_s.end());
  } else {
    // Keep each side's share of the sample proportional to its calls.
    const double share = static_cast<double>(calls) / static_cast<double>(calls + o.calls);
    const size_t mine = static_cast<size_t>(std::llround(share * kMaxLatencySamples));
    std::vector<double> merged;
    merged.reserve(kMaxLatencySamples);
    append_strided(merged, latencies_s, mine);
    append_strided(merged, o.latencies_s, kMaxLatencySamples - std::min(mine, latencies_s.size()));
    latencies_s = std::move(merged);
  }
  calls += o.calls;
  bytes += o.bytes;
  total_s += o.total_s;
  exposed_s += o.exposed_s;
}

double OpStats::latency_quantile_s(double q) const {
  if (latencies_s.empty()) return 0.0;
  std::vector<double> v = latencies_s;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

OpStats& CommStats::entry(std::string_view group, CommOp op, int group_size) {
  auto [it, inserted] = entries_.try_emplace(Key{std::string(group), op});
  if (inserted) {
    it->second.op = op;
    it->second.group_size = group_size;
  }
  return it->second;
}

const OpStats* CommStats::find(std::string_view group, CommOp op) const {
  auto it = entries_.find(Key{std::string(group), op});
  return it == entries_.end() ? nullptr : &it->second;
}

void CommStats::merge(const CommStats& o) {
  for (const auto& [key, s] : o.entries_) entry(key.group, key.op, s.group_size).merge(s);
}

namespace {

template <typename F>
auto sum_over(const std::map<CommStats::Key, OpStats>& entries, std::string_view group, F field) {
  decltype(field(OpStats{})) total{};
  for (const auto& [key, s] : entries)
    if (group.empty() || key.group == group) total += field(s);
  return total;
}

}  // namespace

int64_t CommStats::calls(std::string_view group) const {
  return sum_over(entries_, group, [](const OpStats& s) { return s.calls; });
}
int64_t CommStats::bytes(std::string_view group) const {
  return sum_over(entries_, group, [](const OpStats& s) { return s.bytes; });
}
double CommStats::total_s(std::string_view group) const {
  return sum_over(entries_, group, [](const OpStats& s) { return s.total_s; });
}
double CommStats::exposed_s(std::string_view group) const {
  return sum_over(entries_, group, [](const OpStats& s) { return s.exposed_s; });
}

std::string CommStats::table() const {
  std::string out = fmt::format("{:<10} {:<16} {:>4} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n",
                                "group", "op", "n", "calls", "avg size", "total s", "exposed s", "p50 us",
                                "p99 us", "max us", "algbw", "busbw");
  for (const auto& [key, s] : entries_) {
    const double avg = s.calls > 0 ? static_cast<double>(s.bytes) / static_cast<double>(s.calls) : 0.0;
    out += fmt::format("{:<10} {:<16} {:>4} {:>8} {:>11} {:>10.4f} {:>10.4f} {:>10.1f} {:>10.1f} {:>10.1f} {:>9} {:>9}\n",
                       key.group, comm_op_name(key.op), s.group_size, s.calls, format_bytes(avg), s.total_s,
                       s.exposed_s, 1e6 * s.latency_quantile_s(0.5), 1e6 * s.latency_quantile_s(0.99),
                       1e6 * s.latency_quantile_s(1.0), fmt::format("{:.2f}GB/s", s.algbw() / 1e9),
                       fmt::format("{:.2f}GB/s", s.busbw() / 1e9));
  }
  return out;
}

void to_json(nlohmann::json& j, const CommStats& s) {
  j = nlohmann::json::array();
  for (const auto& [key, e] : s.entries()) {
    j.push_back({{"group", key.group},
                 {"op", comm_op_name(key.op)},
                 {"group_size", e.group_size},
                 {"calls", e.calls},
                 {"bytes", e.bytes},
                 {"total_s", e.total_s},
                 {"exposed_s", e.exposed_s},
                 {"p50_s", e.latency_quantile_s(0.5)},
                 {"p99_s", e.latency_quantile_s(0.99)},
                 {"algbw_Bps", e.algbw()},
                 {"busbw_Bps", e.busbw()}});
  }
}

}  // namespace meshtrain
