#include "meshtrain/tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/tune/results_file.h"

namespace meshtrain::tune {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The point with the highest median measurement, or -1.
int best_point(const Observations& obs, int exclude = -1) {
  int best = -1;
  double v = 0;
  for (size_t i = 0; i < obs.tokens_per_s.size(); ++i) {
    if (static_cast<int>(i) == exclude || obs.tokens_per_s[i].empty()) continue;
    const double m = median_of(obs.tokens_per_s[i]);
    if (best < 0 || m > v) best = static_cast<int>(i), v = m;
  }
  return best;
}

void observe(Observations& obs, int i, const Trial& t) {
  if (t.ok())
    obs.tokens_per_s[i].push_back(t.tokens_per_s);
  else
    obs.failed[i] = true;
}

// The point to measure again after point i's trial, or -1.
int repeat_of(const Observations& obs, int i, double band) {
  if (band <= 0 || obs.tokens_per_s[i].size() != 1) return -1;
  const int other = best_point(obs, i);
  if (other < 0) return -1;
  const double ratio = obs.tokens_per_s[i][0] / median_of(obs.tokens_per_s[other]);
  return ratio >= 1 - band ? i : -1;
}

}  // namespace

TuneOutcome run_tune(const TuneSpace& space, TrialSource& source, const TuneOptions& o, const TrialCallback& cb) {
  check(o.budget_trials > 0 || o.budget_s > 0, "give a budget: --budget-trials K and/or --budget-seconds S");
  TuneOptions opt = o;
  if (opt.beta < 0) opt.beta = opt.strategy == "model" ? 1.0 : 2.0;
  const auto strategy = make_strategy(opt.strategy, space, opt.seed, opt.beta);
  TuneOutcome r;
  Observations obs(space.points.size());
  if (!opt.results.empty()) {
    drop_partial_line(opt.results);
    for (Trial& t : read_results(opt.results)) {
      const int i = space.find(t.key);
      if (i < 0) {
        ++r.ignored;
        continue;
      }
      observe(obs, i, t);
      r.trials.push_back(std::move(t));
    }
    r.resumed = static_cast<int>(r.trials.size());
  }
  const int budget = opt.budget_trials > 0 ? opt.budget_trials : 1 << 30;
  const auto t0 = Clock::now();
  int pending_repeat = -1;
  while (static_cast<int>(r.trials.size()) < budget && (opt.budget_s <= 0 || since(t0) < opt.budget_s)) {
    const auto d0 = Clock::now();
    const bool repeat = pending_repeat >= 0;
    const int i = repeat ? pending_repeat : strategy->next(space, obs);
    r.decide_s += since(d0);
    if (i < 0) break;
    const TunePoint& p = space.points[i];
    const auto s0 = Clock::now();
    Trial t = source.run(p);
    r.trials_s += since(s0);
    t.strategy = repeat ? opt.strategy + " (repeat)" : opt.strategy;
    t.commit = opt.commit;
    if (p.predicted) t.predicted_tokens_per_s = p.predicted_tokens_per_s;
    if (!opt.results.empty()) append_result(opt.results, t);
    observe(obs, i, t);
    r.trials.push_back(t);
    if (cb) cb(t, static_cast<int>(r.trials.size()), repeat);
    pending_repeat = repeat ? -1 : repeat_of(obs, i, opt.repeat_band);
  }
  r.loop_s = since(t0);
  r.best = best_point(obs);
  if (r.best >= 0) {
    r.best_tokens_per_s = median_of(obs.tokens_per_s[r.best]);
    r.best_measurements = static_cast<int>(obs.tokens_per_s[r.best].size());
  }
  return r;
}

nlohmann::json tune_json(const TuneSpace& space, const TuneOptions& o, const TuneOutcome& r) {
  nlohmann::json j;
  j["strategy"] = o.strategy;
  j["seed"] = o.seed;
  j["budget_trials"] = o.budget_trials;
  j["budget_seconds"] = o.budget_s;
  j["repeat_band"] = o.repeat_band;
  j["space"] = {{"layouts", space.points.size()}, {"invalid", space.invalid}};
  j["trials"] = r.trials;
  j["resumed"] = r.resumed;
  j["ignored"] = r.ignored;
  if (r.best >= 0)
    j["best"] = {{"key", space.points[r.best].key},
                 {"config", space.points[r.best].config},
                 {"tokens_per_s", r.best_tokens_per_s},
                 {"measurements", r.best_measurements}};
  else
    j["best"] = nullptr;
  j["loop_s"] = r.loop_s;
  j["trials_s"] = r.trials_s;
  j["overhead_s"] = r.loop_s - r.trials_s;
  j["decide_s"] = r.decide_s;
  return j;
}

nlohmann::json evaluate_strategies(const TuneSpace& space, const std::vector<std::string>& files,
                                   const std::vector<std::string>& strategies, const std::vector<int>& budgets,
                                   int seeds, const TuneOptions& base, double within) {
  check(seeds > 0, "--seeds must be positive");
  const ReplayTrials truth(files, 0, 0);
  double best = 0;
  std::string best_key;
  int missing = 0;
  for (const TunePoint& p : space.points) {
    if (!truth.has(p.key)) ++missing;
    if (truth.truth(p.key) > best) best = truth.truth(p.key), best_key = p.key;
  }
  check(missing == 0, "the replay files lack {} of the {} layouts of the space", missing, space.points.size());
  check(best > 0, "no layout of the replay files ran ok");
  nlohmann::json out{{"true_best", {{"key", best_key}, {"tokens_per_s", best}}}, {"seeds", seeds},
                     {"within", within}, {"strategies", nlohmann::json::array()}};
  for (const std::string& s : strategies)
    for (int b : budgets) {
      std::vector<double> regrets;
      std::vector<int> distinct;
      double decide_s = 0;
      for (int seed = 1; seed <= seeds; ++seed) {
        ReplayTrials replay(files, 1000003ull * seed + b, 0);
        TuneOptions o = base;
        o.strategy = s;
        o.budget_trials = b;
        o.budget_s = 0;
        o.seed = seed;
        o.results.clear();
        const TuneOutcome r = run_tune(space, replay, o);
        regrets.push_back(r.best < 0 ? 1.0 : 1 - truth.truth(space.points[r.best].key) / best);
        decide_s += r.decide_s;
      }
      int ok = 0;
      for (double g : regrets) ok += g <= within;
      double mean = 0;
      for (double g : regrets) mean += g / regrets.size();
      out["strategies"].push_back({{"strategy", s},
                                   {"budget", b},
                                   {"regrets", regrets},
                                   {"mean", mean},
                                   {"median", median_of(regrets)},
                                   {"worst", *std::max_element(regrets.begin(), regrets.end())},
                                   {"within", double(ok) / regrets.size()},
                                   {"decide_s_per_run", decide_s / seeds}});
    }
  return out;
}

}  // namespace meshtrain::tune
