// The layouts a tune searches: every valid combination of a SearchSpace for
// a world of `ranks` (search_space.h enumerates, validate() filters), each
// with the performance model's prediction when a system is given, and a
// feature vector for the Gaussian processes: log2 tp, log2 pp, log2 vpp,
// zero stage, log2 micro-batch, recompute (0 none, 1 selective, 2 full),
// sequence parallelism (0/1), each scaled to [0, 1] over the space (a knob
// the space fixes is 0 everywhere).
#pragma once

#include <string>
#include <vector>

#include <Eigen/Dense>

#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/search_space.h"

namespace meshtrain::tune {

struct TunePoint {
  ParallelConfig config;
  std::string key;                 // layout_key(config)
  bool predicted = false;          // the model was asked
  bool predicted_fits = true;
  double predicted_tokens_per_s = 0;
  Eigen::VectorXd features;
};

struct TuneSpace {
  std::vector<TunePoint> points;   // enumeration order (the grid's order)
  int invalid = 0;                 // combinations validate() refused
  int find(const std::string& key) const;  // index, or -1
};

// `system` may be null: no predictions (the model strategy then refuses).
TuneSpace make_tune_space(const ModelConfig& m, const SearchSpace& space, int ranks, int global_batch_size,
                          const perf::SystemSpec* system);

}  // namespace meshtrain::tune
