// Communication statistics: for every (group, operation) pair, how many calls
// were made, how many bytes they moved, how long they took and how much of
// that time the caller waited.
//
// Definitions (nccl-tests' conventions, so figures compare with theirs):
//   bytes    the "size" of each call: the buffer of an all-reduce or a
//            broadcast, the full (gathered) buffer of an all-gather or a
//            reduce-scatter, the message of a send or receive.
//   total_s  the sum of call latencies. A blocking call's latency is the time
//            inside it; a non-blocking call's is from posting it to the end of
//            the wait() that observed its completion.
//   exposed_s the time the caller was blocked: the whole call for blocking
//            forms; posting plus waiting for non-blocking forms.
//   algbw    bytes / total_s (bytes per second).
//   busbw    algbw x factor(op, n) with n the group size: all-reduce
//            2(n-1)/n; all-gather and reduce-scatter (n-1)/n; broadcast,
//            send and receive 1; barrier 0.
// Blocking and non-blocking forms are separate operations ("all_reduce" and
// "iall_reduce") because only the first has a meaningful bandwidth.
//
// Latencies are kept per call up to kMaxLatencySamples per entry; beyond
// that a uniform reservoir sample of that size is kept, so percentiles stay
// representative over long runs while memory stays bounded.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace meshtrain {

enum class CommOp : uint8_t {
  all_reduce, reduce_scatter, all_gather, broadcast, send, recv, barrier,
  iall_reduce, ireduce_scatter, iall_gather, isend, irecv,
};
constexpr int kNumCommOps = 12;
std::string_view comm_op_name(CommOp op);

// nccl-tests' bus bandwidth factor for `op` over a group of n ranks.
double busbw_factor(CommOp op, int n);

// The record of one (group, operation) pair.
struct OpStats {
  static constexpr size_t kMaxLatencySamples = size_t{1} << 16;

  CommOp op = CommOp::all_reduce;
  int group_size = 0;
  int64_t calls = 0;
  int64_t bytes = 0;
  double total_s = 0;
  double exposed_s = 0;
  std::vector<double> latencies_s;  // one per call, or a reservoir sample

  // Adds one call. Allocation-free except for amortised sample growth.
  void record(int64_t call_bytes, double latency_s, double exposed);
  // Adds another record of the same operation.
  void merge(const OpStats& o);

  double algbw() const { return total_s > 0 ? static_cast<double>(bytes) / total_s : 0.0; }
  double busbw() const { return algbw() * busbw_factor(op, group_size); }
  // The q-quantile (0 <= q <= 1) of the recorded latencies, interpolated
  // linearly between order statistics; 0 when nothing was recorded.
  double latency_quantile_s(double q) const;
};

// Statistics of many groups: a value that can be copied, merged and reset.
class CommStats {
 public:
  struct Key {
    std::string group;
    CommOp op;
    auto operator<=>(const Key&) const = default;
  };

  // The entry of (group, op), created empty with `group_size` if absent.
  OpStats& entry(std::string_view group, CommOp op, int group_size);
  // The entry of (group, op), or nullptr.
  const OpStats* find(std::string_view group, CommOp op) const;
  const std::map<Key, OpStats>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  // Adds every entry of `o` to the matching entry here.
  void merge(const CommStats& o);
  void reset() { entries_.clear(); }

  // Sums over every operation of one group ("" sums over all groups).
  int64_t calls(std::string_view group = "") const;
  int64_t bytes(std::string_view group = "") const;
  double total_s(std::string_view group = "") const;
  double exposed_s(std::string_view group = "") const;

  // A table for people: one line per entry with calls, size, time, exposed
  // time, p50/p99 latency, algbw and busbw.
  std::string table() const;

 private:
  std::map<Key, OpStats> entries_;
};

// [{"group","op","group_size","calls","bytes","total_s","exposed_s",
//   "p50_s","p99_s","algbw_Bps","busbw_Bps"}, ...]
void to_json(nlohmann::json& j, const CommStats& s);

}  // namespace meshtrain
