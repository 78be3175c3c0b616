// Fitted and cross-validated accuracy of the published-run validation.
//
// The efficiency fit (docs/PERFORMANCE-MODEL.md, "Fitting the efficiency
// data"): two parameters per system on a grid, everything else in the system
// file fixed:
//   emax   the matmul efficiency curve eff(d) = emax x d / (d + 128) over
//          the smallest GEMM dimension, tabulated at d = 32 ... 16384;
//          0.40 ... 0.90 by 0.05;
//   flash  flash_attention_efficiency, 0.15 ... 0.7.
// The objective over the fitted rows is mean squared relative error
// + 0.5 x (max relative error)^2; grid points at which a published
// (not out-of-memory) row does not fit are excluded while any other exists.
//
// Leave-one-source-out (cross_validate_by_source): for every source (the
// row's `source` column) and every system it has rows of, the system's two
// parameters are fitted on that system's rows from the other sources and
// the source's rows are predicted with them. A system with no rows outside
// the source is predicted with the point fitted on every other source's
// rows of every system (a transfer across hardware), and the source lists it
// in `pooled`. Each (system, grid point) is evaluated once and every fold
// selects from those evaluations.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/tune/validate.h"

namespace meshtrain::tune {

struct EfficiencyPoint {
  double emax = 0, flash = 0;
};

std::vector<EfficiencyPoint> efficiency_grid();
void set_efficiency(perf::SystemSpec& s, const EfficiencyPoint& p);

struct EfficiencyFit {
  std::string system;
  EfficiencyPoint best;
  ErrorSummary errors;  // in-sample, at `best`
};

// One fit per system over all of its rows.
std::vector<EfficiencyFit> fit_efficiency(const RunRows& runs);

struct SourceFold {
  std::string source;
  ErrorSummary errors;                                // its rows, held out
  std::map<std::string, EfficiencyPoint> fitted;      // system -> point used
  std::vector<std::string> pooled;                    // systems fitted across hardware
};

struct CrossValidation {
  Validation held_out;              // every row predicted with its source held out
  std::vector<SourceFold> sources;  // by source name
};

CrossValidation cross_validate_by_source(const RunRows& runs);

nlohmann::json cross_validation_json(const CrossValidation& cv);

}  // namespace meshtrain::tune
