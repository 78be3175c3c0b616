// How well a system file predicts measured layouts (`meshtrain tune --replay
// FILES --check-model`): each layout's measured median beside the model's
// tokens/s, the relative error, the rms log error and Spearman's rank
// correlation between predicted and measured (what a planner needs: the
// order of the layouts, not their scale).
//
// Cross-validation (--cross-validate K): the layouts, in key order, are
// dealt into K folds (layout i to fold i mod K); each fold is predicted by
// the system refitted (refit.h) to the other folds only, and the figures are
// computed over the pooled out-of-fold predictions, so no layout is scored
// by a fit that saw it.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/tune/refit.h"

namespace meshtrain::tune {

struct ModelCheck {
  struct Row {
    std::string key;
    double measured = 0, predicted = 0;
    int fold = -1;  // -1 without cross-validation
  };
  std::vector<Row> rows;  // in the order of the layouts given
  double rms_log_error = 0, median_abs_error = 0, max_abs_error = 0, spearman = 0;
  std::vector<Factors> fold_factors;  // the refit of each fold (cross-validation)
};

ModelCheck check_model(const ModelConfig& m, const perf::SystemSpec& s, int ranks, const std::vector<Measured>& layouts);

// Throws Error for folds < 2 or more folds than layouts.
ModelCheck cross_validate(const ModelConfig& m, const perf::SystemSpec& base, int ranks,
                          const std::vector<Measured>& layouts, int folds);

}  // namespace meshtrain::tune
