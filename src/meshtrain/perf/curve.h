// Curve: a measured quantity as a function of a size (matmul efficiency over
// the smaller matrix dimension, collective efficiency over message bytes).
// Points are (x, y) with x > 0; y between points is interpolated linearly in
// log2(x), and held constant beyond the first and last point. A curve with
// one point is a constant; an empty curve is the constant 1.
#pragma once

#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace meshtrain::perf {

class Curve {
 public:
  Curve() = default;
  explicit Curve(double constant) : points_{{1.0, constant}} {}
  // Throws Error when x is not positive and strictly increasing.
  explicit Curve(std::vector<std::pair<double, double>> points);

  double operator()(double x) const;
  const std::vector<std::pair<double, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<double, double>> points_;
};

// JSON: a number (constant) or [[x, y], ...].
void from_json(const nlohmann::json& j, Curve& c);
void to_json(nlohmann::json& j, const Curve& c);

}  // namespace meshtrain::perf
