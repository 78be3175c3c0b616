// Order statistics of measured samples (step times, bandwidths, errors).
#pragma once

#include <vector>

namespace meshtrain {

// 0 for an empty sample; the mean of the two middle values for an even count.
double median_of(std::vector<double> v);
// Quantile q in [0, 1] with linear interpolation between order statistics.
double quantile_of(std::vector<double> v, double q);
// Spearman's rank correlation of paired samples (ties get their mean rank);
// 0 when fewer than two pairs or either sample is constant.
double spearman_of(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace meshtrain
