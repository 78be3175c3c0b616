#include "meshtrain/tune/strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/tune/gaussian_process.h"

namespace meshtrain::tune {

namespace {

std::vector<int> untried(const TuneSpace& s, const Observations& o, bool only_fitting) {
  std::vector<int> out;
  for (size_t i = 0; i < s.points.size(); ++i)
    if (!o.tried(i) && (!only_fitting || s.points[i].predicted_fits)) out.push_back(static_cast<int>(i));
  return out;
}

// The tried points and a value for each: f(median tokens/s) where it ran,
// the lowest such value minus log 2 where it failed.
struct Fitted {
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
};
template <typename F>
Fitted tried_values(const TuneSpace& s, const Observations& o, F value) {
  std::vector<int> idx;
  std::vector<double> v;
  double lowest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < s.points.size(); ++i) {
    if (!o.tried(i)) continue;
    idx.push_back(static_cast<int>(i));
    v.push_back(o.tokens_per_s[i].empty() ? std::nan("") : value(i, median_of(o.tokens_per_s[i])));
    if (std::isfinite(v.back())) lowest = std::min(lowest, v.back());
  }
  if (!std::isfinite(lowest)) lowest = 0;
  Fitted f{Eigen::MatrixXd(idx.size(), s.points[0].features.size()), Eigen::VectorXd(idx.size())};
  for (size_t k = 0; k < idx.size(); ++k) {
    f.X.row(k) = s.points[idx[k]].features.transpose();
    f.y(k) = std::isfinite(v[k]) ? v[k] : lowest - std::log(2.0);
  }
  return f;
}

const std::vector<double> kLengthScales = {0.25, 0.5, 1.0, 2.0};

class GridStrategy : public Strategy {
 public:
  int next(const TuneSpace& s, const Observations& o) override {
    const auto u = untried(s, o, false);
    return u.empty() ? -1 : u.front();
  }
};

class RandomStrategy : public Strategy {
 public:
  explicit RandomStrategy(uint64_t seed) : rng_(seed) {}
  int next(const TuneSpace& s, const Observations& o) override {
    const auto u = untried(s, o, false);
    if (u.empty()) return -1;
    return u[std::uniform_int_distribution<size_t>(0, u.size() - 1)(rng_)];
  }

 protected:
  std::mt19937_64 rng_;
};

class BoStrategy : public RandomStrategy {
 public:
  BoStrategy(uint64_t seed, double beta) : RandomStrategy(seed), beta_(beta) {}
  int next(const TuneSpace& s, const Observations& o) override {
    int tried = 0;
    for (size_t i = 0; i < s.points.size(); ++i) tried += o.tried(i);
    if (tried < kInit) return RandomStrategy::next(s, o);
    const auto u = untried(s, o, false);
    if (u.empty()) return -1;
    Fitted f = tried_values(s, o, [](size_t, double t) { return std::log(t); });
    const double mean = f.y.mean();
    const double sd = f.y.size() > 1 ? std::sqrt((f.y.array() - mean).square().sum() / double(f.y.size() - 1)) : 1.0;
    f.y = (f.y.array() - mean) / (sd > 1e-12 ? sd : 1.0);
    const GaussianProcess gp = fit_gp(f.X, f.y, GpParams{1.0, 1.0, 0.01}, kLengthScales);
    int best = -1;
    double best_score = -std::numeric_limits<double>::infinity();
    for (int i : u) {
      const double a = ucb(gp.predict(s.points[i].features), beta_);
      if (a > best_score) best_score = a, best = i;
    }
    return best;
  }

 private:
  static constexpr int kInit = 2;
  double beta_;
};

class ModelStrategy : public Strategy {
 public:
  explicit ModelStrategy(double beta) : beta_(beta) {}
  int next(const TuneSpace& s, const Observations& o) override {
    const auto u = untried(s, o, true);
    if (u.empty()) return -1;
    Fitted f = tried_values(s, o, [&](size_t i, double t) { return std::log(t / s.points[i].predicted_tokens_per_s); });
    // The model's overall scale is learned as the mean residual; the GP
    // models how layouts deviate from it.
    const double offset = f.y.size() > 0 ? f.y.mean() : 0.0;
    GaussianProcess gp(GpParams{1.0, 0.09, 0.0025});
    if (f.y.size() > 0) gp = fit_gp(f.X, (f.y.array() - offset).matrix(), GpParams{1.0, 0.09, 0.0025}, kLengthScales);
    int best = -1;
    double best_score = -std::numeric_limits<double>::infinity();
    for (int i : u) {
      const double a =
          std::log(s.points[i].predicted_tokens_per_s) + offset + ucb(gp.predict(s.points[i].features), beta_);
      if (a > best_score) best_score = a, best = i;
    }
    return best;
  }

 private:
  double beta_;
};

}  // namespace

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> n = {"grid", "random", "bo", "model"};
  return n;
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const TuneSpace& space, uint64_t seed, double beta) {
  if (name == "grid") return std::make_unique<GridStrategy>();
  if (name == "random") return std::make_unique<RandomStrategy>(seed);
  if (name == "bo") return std::make_unique<BoStrategy>(seed, beta);
  if (name == "model") {
    for (const TunePoint& p : space.points)
      check(p.predicted && p.predicted_tokens_per_s > 0, "the model strategy needs a system (--system) to predict with");
    return std::make_unique<ModelStrategy>(beta);
  }
  throw Error(fmt::format("--strategy takes grid, random, bo or model (got '{}')", name));
}

}  // namespace meshtrain::tune
