// The pure parts of `meshtrain sweep`: the grid of knobs, the configurations
// it expands to (each checked with validate() before anything is launched),
// the row a run's report becomes, the CSV, and the per-knob analysis of
// `sweep --summarize` (docs/MEASUREMENT.md, "Sweeps").
//
// Knobs (grid syntax "tp=1,2,4;pp=1,2;zero=0,1,2,3;mbs=1,2;..."):
//   tp         --tensor-model-parallel-size
//   pp         --pipeline-model-parallel-size
//   zero       --zero-stage
//   mbs        --micro-batch-size
//   recompute  --recompute-granularity none|selective|full
//   schedule   --pipeline-schedule gpipe|1f1b|interleaved (interleaved: with
//              vpp model chunks per stage, --num-layers-per-virtual-pipeline-stage)
//   vpp        model chunks per stage for the interleaved schedule (default 2)
//   sp         --sequence-parallel when 1 (0|1)
//   bf16       --bf16 when 1 (0|1)
//   gbs        --global-batch-size (overrides the sweep's own)
// DP is world / (TP x PP) for each configuration.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

struct Knob {
  std::string name;
  std::vector<std::string> values;  // in grid order; the first is the baseline
};
using Grid = std::vector<Knob>;

// Throws Error naming the problem (unknown knob, empty list, repeated knob,
// a value the knob does not take).
Grid parse_grid(std::string_view spec);

struct SweepSpec {
  std::string model = "tiny";   // --model as given to train
  ModelConfig model_config;     // the preset with the shape flags of `extra` applied
  int ranks = 1;
  int global_batch_size = 0;    // 0: ranks x the largest micro-batch size of the grid
  int iters = 5;
  Grid grid;
  std::vector<std::string> extra;  // further train flags, passed through
};

struct SweepPoint {
  std::string name;                          // "tp2_pp1_zero1_mbs2"
  std::vector<std::pair<std::string, std::string>> knobs;  // grid order
  ParallelConfig parallel;
  bool valid = true;
  std::string reason;                        // why not, from validate()
  std::vector<std::string> train_args;       // the knob flags for `meshtrain train`
};

// The model a sweep runs: the preset, then any shape flag of `extra`
// (--num-layers, --hidden-size, ... as `train` takes them).
ModelConfig sweep_model(const std::string& model, const std::vector<std::string>& extra);

// Every combination of the grid, first knob slowest, validated.
std::vector<SweepPoint> expand_sweep(const SweepSpec& s);

// One flat row from a run's report (`report` may be null for a run that
// produced none): the knobs, dp, status and the headline figures.
nlohmann::json sweep_row(const SweepPoint& p, const std::string& status, const std::string& reason,
                         const nlohmann::json& report);

// The CSV columns, in order, for a grid; and the CSV itself.
std::vector<std::string> sweep_columns(const Grid& g);
std::string rows_to_csv(const std::vector<nlohmann::json>& rows, const std::vector<std::string>& columns);

// Metrics the summary compares (column name, label).
struct SummaryMetric {
  std::string column, label;
};
const std::vector<SummaryMetric>& summary_metrics();

// For each knob and each of its values but the first: over the pairs of
// successful runs that differ only in that knob (value vs the first value),
// the median, min and max ratio of each metric, and the number of pairs.
nlohmann::json summarize_sweep(const Grid& g, const std::vector<nlohmann::json>& rows);
std::string summary_text(const nlohmann::json& summary);

// Grid as JSON and back (stored in sweep.json).
nlohmann::json grid_json(const Grid& g);
Grid grid_from_json(const nlohmann::json& j);

}  // namespace meshtrain
