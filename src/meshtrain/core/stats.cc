#include "meshtrain/core/stats.h"

#include <algorithm>
#include <cmath>

namespace meshtrain {

double median_of(std::vector<double> v) { return quantile_of(std::move(v), 0.5); }

double quantile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace meshtrain
