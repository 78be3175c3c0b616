#include "meshtrain/tune/tune_space.h"

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/tune/trial.h"

namespace meshtrain::tune {

int TuneSpace::find(const std::string& key) const {
  for (size_t i = 0; i < points.size(); ++i)
    if (points[i].key == key) return static_cast<int>(i);
  return -1;
}

TuneSpace make_tune_space(const ModelConfig& m, const SearchSpace& space, int ranks, int gbs,
                          const perf::SystemSpec* system) {
  TuneSpace s;
  perf::PerfCache cache;
  for (const ParallelConfig& p : enumerate(m, space, ranks, gbs, ranks)) {
    try {
      validate(m, p, ranks);
    } catch (const Error&) {
      ++s.invalid;
      continue;
    }
    TunePoint t;
    t.config = p;
    t.key = layout_key(p);
    if (s.find(t.key) >= 0) continue;
    if (system) {
      const perf::Prediction r = perf::predict(m, p, *system, ranks, {}, &cache);
      t.predicted = true;
      t.predicted_fits = r.fits;
      t.predicted_tokens_per_s = r.tokens_per_s;
    }
    t.features = Eigen::VectorXd(8);
    t.features << std::log2(p.tp), std::log2(p.pp), std::log2(p.vpp), p.zero_stage, std::log2(p.micro_batch_size),
        static_cast<double>(p.recompute), p.sequence_parallel ? 1.0 : 0.0, std::log2(p.shard_replicas());
    s.points.push_back(std::move(t));
  }
  check(!s.points.empty(), "the search space holds no valid layout for {} ranks ({} combinations refused)", ranks,
        s.invalid);
  // Scale each feature to [0, 1] over the space.
  const Eigen::Index d = s.points[0].features.size();
  for (Eigen::Index k = 0; k < d; ++k) {
    double lo = s.points[0].features(k), hi = lo;
    for (const TunePoint& t : s.points) {
      lo = std::min(lo, t.features(k));
      hi = std::max(hi, t.features(k));
    }
    for (TunePoint& t : s.points) t.features(k) = hi > lo ? (t.features(k) - lo) / (hi - lo) : 0.0;
  }
  return s;
}

}  // namespace meshtrain::tune
