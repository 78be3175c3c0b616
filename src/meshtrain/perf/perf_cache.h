// PerfCache: what the cost model computes once and reuses across the
// candidates of a search. Stages of a pipeline differ only by whether they
// hold the embedding (stage 0) or the head (stage pp - 1) and by the layers
// the chunks of those two run (stage_layers.h: the middle stages all run the
// same), so one
// Layout is built per (model, TP, PP, VPP, DP, stage split, stage kind) and
// summarized; schedules
// are built once per (kind, PP, VPP, micro-batches); pipeline simulations
// and the communication-buffer walks of the memory model are memoized on
// their exact inputs. Thread-safe; entries live as long as the cache.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "meshtrain/model/layout.h"
#include "meshtrain/parallel/schedule.h"
#include "meshtrain/perf/pipeline_sim.h"

namespace meshtrain::perf {

// The units one model chunk's forward and backward work on, in the order
// the engine gathers them and reduces their gradients, as indices into
// StageLayout::unit_numel: the embedding's word and position units, the
// blocks by layer, the head's final LayerNorm and the matrix it multiplies
// with (its copy of the tied word embedding, its untied output matrix, or
// on a single stage the embedding's own word unit). Empty where the chunk
// holds no embedding or no head.
struct ChunkUnits {
  std::vector<int> embedding, blocks, head;
};

// Layout::build of one stage, summarized.
struct StageLayout {
  int64_t numel = 0;                  // padded flat size
  std::vector<int> chunk_layers;      // transformer layers of each model chunk (may be 0)
  std::vector<int64_t> chunk_numel;   // padded elements per model chunk
  std::vector<int> chunk_units;       // units (embedding, blocks, head) per chunk
  std::vector<int64_t> unit_numel;    // padded elements of each unit, in Layout order
  std::vector<std::vector<int64_t>> unit_tensors;  // elements of each unit's parameter tensors, in forward order
  std::vector<ChunkUnits> chunk_order;  // per chunk
  std::array<std::array<StateBytes, 2>, 4> state{};  // [zero stage][bf16]
};

class PerfCache {
 public:
  const Schedule& schedule(ScheduleKind kind, int pp, int vpp, int num_micro_batches);
  const StageLayout& stage_layout(const ModelConfig& m, const ParallelConfig& p, int stage);

  // Memoized simulate(schedule(kind, ...), costs).
  const PipelineTimeline& timeline(ScheduleKind kind, int num_micro_batches, const PipelineCosts& costs);

  // Memoized peak of one stage's communication buffers (memory_model.cc's
  // walk), keyed on everything the walk reads: candidates that differ only
  // in recompute or attention kernel share it.
  using CommBufferKey = std::tuple<const StageLayout*, const Schedule*, int, double, int, bool, int, double, double,
                                   bool, int>;  // stage, boundary bytes, ZeRO stage, bf16, shard group, ZeroRuntime
  std::optional<double> comm_buffer_peak(const CommBufferKey& key);
  double remember_comm_buffer_peak(const CommBufferKey& key, double peak);  // returns peak

 private:
  using LayoutKey = std::tuple<std::vector<int64_t>, int>;
  std::mutex mu_;
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<Schedule>> schedules_;
  std::map<LayoutKey, std::unique_ptr<StageLayout>> layouts_;
  std::map<std::vector<double>, std::unique_ptr<PipelineTimeline>> timelines_;
  std::map<CommBufferKey, double> comm_buffer_peaks_;
};

}  // namespace meshtrain::perf
