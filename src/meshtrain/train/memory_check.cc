#include "meshtrain/train/memory_check.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/perf/perf_cache.h"

namespace meshtrain {

namespace {

constexpr int kItems = 6;

std::array<double, kItems> items(const perf::MemoryBytes& b) {
  return {b.parameters, b.gradients, b.optimizer, b.activations, b.comm_buffers, b.workspace};
}
perf::MemoryBytes from_items(const std::array<double, kItems>& v) {
  return perf::MemoryBytes{v[0], v[1], v[2], v[3], v[4], v[5]};
}
constexpr const char* kItemNames[kItems] = {"parameters", "gradients", "optimizer states",
                                           "activations", "communication buffers", "workspace"};

// What would shrink the largest item, given the layout: ZeRO stage 3 - i
// shards item i (parameters 3, gradients 2, optimizer states 1) over DP.
std::string hint(int largest, const TrainOptions& o) {
  const ParallelConfig& p = o.parallel;
  std::string h;
  if (p.dp > 1 && largest <= 2 && p.zero_stage < 3 - largest)
    h = fmt::format("--zero-stage {}, ", 3 - largest);
  else if (largest == 3 && p.recompute != Recompute::full)
    h = "--recompute-granularity full, ";
  if (largest == 3 && p.micro_batch_size > 1) h += "a smaller --micro-batch-size, ";
  return "try " + h + "more ranks on more nodes (tensor or pipeline parallelism) or a smaller model";
}

}  // namespace

perf::MemoryBytes rank_peak_memory(const TrainOptions& o, int rank) {
  const perf::SystemSpec bare;  // no reserved bytes, no fragmentation: the engine's own allocations
  perf::PerfCache cache;
  perf::PerfOptions engine;  // the engine's runtime, with its ZeRO-3 prefetch as set
  engine.zero.prefetch_units = o.zero_prefetch ? 1 : 0;
  perf::MemoryBytes b = perf::stage_memory(o.model, o.parallel, bare, coord_of(o.parallel, rank).pp, cache, engine);
  // --async-save keeps a host copy of the rank's checkpoint shard between
  // saves: its weights and optimizer state (an upper bound: a ZeRO rank
  // writes only the part it owns), counted with the workspace.
  if (o.async_save && !o.save_dir.empty()) b.workspace += b.parameters + b.optimizer;
  return b;
}

std::string node_memory_verdict(const perf::MemoryBytes& node_need, const perf::MemoryBytes& worst_rank,
                                int ranks_on_node, const AvailableMemory& available, const TrainOptions& o) {
  if (available.source.empty() || node_need.total() <= double(available.bytes)) return "";
  const std::array<double, kItems> v = items(worst_rank);
  const int largest = int(std::max_element(v.begin(), v.end()) - v.begin());
  const std::string ranks = ranks_on_node > 1 ? fmt::format(" ({} ranks, up to {} each)", ranks_on_node,
                                                            format_bytes(worst_rank.total()))
                                              : "";
  return fmt::format("not enough memory: the run needs {} on this node{}, {} available ({}); largest item: {} {}; "
                     "{} (--no-memory-check runs anyway)",
                     format_bytes(node_need.total()), ranks, format_bytes(double(available.bytes)), available.source,
                     kItemNames[largest], format_bytes(v[largest]), hint(largest, o));
}

void check_node_memory(const TrainOptions& o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int ranks_on_node = 1;
  MPI_Comm_size(node, &ranks_on_node);
  const std::array<double, kItems> mine = items(rank_peak_memory(o, rank));
  std::vector<std::array<double, kItems>> all(ranks_on_node);
  MPI_Allgather(mine.data(), kItems, MPI_DOUBLE, all.data(), kItems, MPI_DOUBLE, node);
  MPI_Comm_free(&node);
  std::array<double, kItems> sum{};
  for (const auto& r : all)
    for (int i = 0; i < kItems; ++i) sum[i] += r[i];
  const auto worst = std::max_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return from_items(a).total() < from_items(b).total();
  });
  const std::string verdict =
      node_memory_verdict(from_items(sum), from_items(*worst), ranks_on_node, node_available_memory(), o);
  check(verdict.empty(), "{}", verdict);
}

}  // namespace meshtrain
