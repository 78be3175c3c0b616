#include "meshtrain/perf/curve.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain::perf {

Curve::Curve(std::vector<std::pair<double, double>> points) : points_(std::move(points)) {
  for (size_t i = 0; i < points_.size(); ++i) {
    check(points_[i].first > 0, "curve point x must be positive (got {})", points_[i].first);
    if (i > 0)
      check(points_[i].first > points_[i - 1].first, "curve points must have increasing x ({} after {})",
            points_[i].first, points_[i - 1].first);
  }
}

double Curve::operator()(double x) const {
  if (points_.empty()) return 1.0;
  if (x <= points_.front().first) return points_.front().second;
  if (x >= points_.back().first) return points_.back().second;
  size_t i = 1;
  while (points_[i].first < x) ++i;
  const auto& [x0, y0] = points_[i - 1];
  const auto& [x1, y1] = points_[i];
  const double t = (std::log2(x) - std::log2(x0)) / (std::log2(x1) - std::log2(x0));
  return y0 + t * (y1 - y0);
}

void from_json(const nlohmann::json& j, Curve& c) {
  if (j.is_number()) {
    c = Curve(j.get<double>());
    return;
  }
  check(j.is_array(), "a curve is a number or a list of [x, y] pairs");
  std::vector<std::pair<double, double>> pts;
  for (const auto& p : j) {
    check(p.is_array() && p.size() == 2, "a curve point is a pair [x, y]");
    pts.emplace_back(p[0].get<double>(), p[1].get<double>());
  }
  c = Curve(std::move(pts));
}

void to_json(nlohmann::json& j, const Curve& c) {
  j = nlohmann::json::array();
  for (const auto& [x, y] : c.points()) j.push_back({x, y});
}

}  // namespace meshtrain::perf
