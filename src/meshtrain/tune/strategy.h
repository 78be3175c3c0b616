// Search strategies: which layout of a TuneSpace to try next, given what the
// trials so far measured. Each returns an index of an untried point (never
// one already measured or failed), or -1 when none is left.
//   grid    the space in enumeration order
//   random  uniformly among the untried (seeded)
//   bo      Gaussian-process Bayesian optimisation: `init` random trials, then
//           the untried point of highest UCB (mean + beta sd) of a GP fitted
//           to log tokens/s, centred and scaled to unit variance; a failed
//           trial counts as the worst measured value minus log 2. The GP's
//           length scale maximises the marginal likelihood over
//           {0.25, 0.5, 1, 2}; noise variance 0.01 (of the unit scale).
//   model   the performance model as the prior: layouts it says do not fit
//           are skipped; the first trial is its best prediction; then a GP
//           fitted to r = log(measured / predicted) corrects the prediction:
//           the mean of r is the model's overall scale (a machine the system
//           file misjudges by a constant factor changes no ranking), and the
//           GP, with that mean as its prior mean, models how layouts deviate
//           from it (prior sd 0.3, noise sd 0.05: trust the model's ranking
//           until trials disagree; a failed trial as the lowest r minus
//           log 2). The next trial is the untried point of highest
//           log predicted + mean r + UCB of the deviation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/tune/tune_space.h"

namespace meshtrain::tune {

// What the trials so far found, per point of the space.
struct Observations {
  std::vector<std::vector<double>> tokens_per_s;  // every ok measurement of each point
  std::vector<bool> failed;                       // a trial of it failed (oom, crash, time-out)
  explicit Observations(size_t n) : tokens_per_s(n), failed(n, false) {}
  bool tried(size_t i) const { return failed[i] || !tokens_per_s[i].empty(); }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual int next(const TuneSpace& space, const Observations& obs) = 0;
};

const std::vector<std::string>& strategy_names();  // grid, random, bo, model
// Throws Error for an unknown name, or `model` without predictions.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const TuneSpace& space, uint64_t seed,
                                        double beta = 2.0);

}  // namespace meshtrain::tune
