#include "meshtrain/tune/model_check.h"

#include <algorithm>
#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/perf/predict.h"

namespace meshtrain::tune {

namespace {

void summarize(ModelCheck& c) {
  std::vector<double> measured, predicted, abs_err;
  double sq = 0;
  for (const ModelCheck::Row& r : c.rows) {
    measured.push_back(r.measured);
    predicted.push_back(r.predicted);
    abs_err.push_back(std::fabs(r.predicted / r.measured - 1));
    sq += std::pow(std::log(r.measured / r.predicted), 2);
  }
  c.rms_log_error = c.rows.empty() ? 0 : std::sqrt(sq / c.rows.size());
  c.median_abs_error = median_of(abs_err);
  c.max_abs_error = abs_err.empty() ? 0 : *std::max_element(abs_err.begin(), abs_err.end());
  c.spearman = spearman(predicted, measured);
}

}  // namespace

ModelCheck check_model(const ModelConfig& m, const perf::SystemSpec& s, int ranks, const std::vector<Measured>& layouts) {
  ModelCheck c;
  perf::PerfCache cache;
  for (const Measured& l : layouts)
    c.rows.push_back({l.key, l.tokens_per_s, perf::predict(m, l.config, s, ranks, {}, &cache).tokens_per_s});
  summarize(c);
  return c;
}

ModelCheck cross_validate(const ModelConfig& m, const perf::SystemSpec& base, int ranks,
                          const std::vector<Measured>& layouts, int folds) {
  check(folds >= 2 && folds <= static_cast<int>(layouts.size()),
        "--cross-validate needs 2 to {} folds (one layout at least in each; got {})", layouts.size(), folds);
  std::vector<size_t> order(layouts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return layouts[a].key < layouts[b].key; });
  std::vector<int> fold_of(layouts.size());
  for (size_t i = 0; i < order.size(); ++i) fold_of[order[i]] = static_cast<int>(i % folds);
  ModelCheck c;
  c.rows.resize(layouts.size());
  perf::PerfCache cache;
  for (int k = 0; k < folds; ++k) {
    std::vector<Measured> train;
    for (size_t i = 0; i < layouts.size(); ++i)
      if (fold_of[i] != k) train.push_back(layouts[i]);
    const Refit fit = refit_system(m, base, ranks, train);
    c.fold_factors.push_back(fit.factors);
    for (size_t i = 0; i < layouts.size(); ++i)
      if (fold_of[i] == k)
        c.rows[i] = {layouts[i].key, layouts[i].tokens_per_s,
                     perf::predict(m, layouts[i].config, fit.system, ranks, {}, &cache).tokens_per_s, k};
  }
  summarize(c);
  return c;
}

}  // namespace meshtrain::tune
