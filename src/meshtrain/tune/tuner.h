// The tuning loop of `meshtrain tune`: ask the strategy for a layout, run it
// as a trial, append the trial to the results file, repeat until the trial
// budget (and the time budget, if any) is spent or no layout is left.
//
// Resume: the trials already in the results file (of layouts of this space)
// count against the budget and are handed to the strategy as observations;
// none is run again.
//
// Noise: a layout's figure is the median of its measurements. When a
// layout's first trial lands above the best figure of another layout, or
// within `repeat_band` below it, the next trial measures it again: a new
// best is confirmed before it is believed (the highest of many noisy single
// runs is biased upward, the winner's curse), and the choice between two
// close layouts does not rest on one noisy run. A repeat counts against the
// budget.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/tune/strategy.h"
#include "meshtrain/tune/trial_source.h"

namespace meshtrain::tune {

struct TuneOptions {
  std::string strategy = "model";
  int budget_trials = 8;
  double budget_s = 0;        // 0: no time budget
  uint64_t seed = 1;
  double beta = -1;           // UCB weight; < 0: 2 for bo, 1 for model
  double repeat_band = 0.03;  // 0: never repeat
  std::string results;        // results file; empty: none
  std::string commit;         // recorded in every trial
};

struct TuneOutcome {
  std::vector<Trial> trials;  // the resumed ones first
  int resumed = 0;
  int ignored = 0;            // records of the results file outside this space
  int best = -1;              // index into the space; -1 when no trial ran ok
  double best_tokens_per_s = 0;
  int best_measurements = 0;
  double loop_s = 0;          // wall time of this call's loop
  double trials_s = 0;        // of which inside trials
  double decide_s = 0;        // of which choosing (the strategy)
};

using TrialCallback = std::function<void(const Trial& t, int number, bool repeat)>;

TuneOutcome run_tune(const TuneSpace& space, TrialSource& source, const TuneOptions& o,
                     const TrialCallback& on_trial = {});

// {strategy, seed, budget_trials, trials, best: {key, config, tokens_per_s,
// measurements}, resumed, loop_s, trials_s, overhead_s, decide_s}.
nlohmann::json tune_json(const TuneSpace& space, const TuneOptions& o, const TuneOutcome& r);

// Strategies compared on recorded measurements (ReplayTrials): for each
// strategy, budget and seed, the regret 1 - truth(found) / truth(best),
// where found is the layout the run reports as best and truth the median of
// the recorded figures. Returns {true_best, strategies: [{strategy, budget,
// regrets, mean, median, worst, within: fraction of seeds with regret <=
// `within`}]}.
nlohmann::json evaluate_strategies(const TuneSpace& space, const std::vector<std::string>& replay_files,
                                   const std::vector<std::string>& strategies, const std::vector<int>& budgets,
                                   int seeds, const TuneOptions& base, double within);

}  // namespace meshtrain::tune
