// Helpers for the kernel tests: deterministic random tensors, bf16 rounding,
// tolerance checks against double-precision references, central
// differences.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/rng.h"

namespace mt_test {

using meshtrain::bf16;
using vecf = std::vector<float>;
using vecd = std::vector<double>;

inline vecf randn(size_t n, uint64_t seed, float scale = 1.0f, float shift = 0.0f) {
  vecf v(n);
  for (size_t i = 0; i < n; ++i) v[i] = shift + scale * meshtrain::normal01(seed, 17, i);
  return v;
}

inline vecd to_double(const vecf& v) { return vecd(v.begin(), v.end()); }

inline std::vector<bf16> to_bf16(const vecf& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16(v[i]);
  return out;
}
inline vecf from_bf16(const std::vector<bf16>& v) {
  vecf out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
  return out;
}
// The same values rounded to the nearest bf16 (so float and bf16 kernels see
// identical inputs).
inline vecf round_bf16(const vecf& v) { return from_bf16(to_bf16(v)); }

// Checks |actual - expected| <= rtol * (|expected| + floor_frac * max|expected|)
// element by element and reports the worst element.
template <class A, class E>
::testing::AssertionResult close(const std::vector<A>& actual, const std::vector<E>& expected, double rtol,
                                 double floor_frac = 1e-2) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  double emax = 0.0;
  for (const auto& e : expected) emax = std::max(emax, std::fabs(static_cast<double>(e)));
  double worst = -1.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    const double tol = rtol * (std::fabs(e) + floor_frac * emax);
    const double excess = std::isfinite(a) ? std::fabs(a - e) / (tol > 0 ? tol : 1e-300) : 1e300;
    if (excess > worst) {
      worst = excess;
      worst_i = i;
    }
  }
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst_i << ": " << static_cast<double>(actual[worst_i])
                                       << " vs " << static_cast<double>(expected[worst_i]) << " (error "
                                       << worst << " x tolerance, rtol " << rtol << ", max|expected| " << emax
                                       << ")";
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Indices 0..n-1 if n <= max_count, else max_count distinct-ish indices
// spread over the range (a fixed stride pattern plus the two ends).
inline std::vector<size_t> sample(size_t n, size_t max_count) {
  std::vector<size_t> idx;
  if (n <= max_count) {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  for (size_t k = 0; k < max_count; ++k) idx.push_back(k * (n - 1) / (max_count - 1));
  return idx;
}

// Central difference of a scalar loss with respect to x[i], in double.
inline double central_difference(const std::function<double()>& loss, double& xi, double h = 1e-5) {
  const double saved = xi;
  xi = saved + h;
  const double up = loss();
  xi = saved - h;
  const double down = loss();
  xi = saved;
  return (up - down) / (2 * h);
}

// Numerical gradients of `loss` w.r.t. the sampled elements of x; returns
// (kernel values at those indices, numerical values) for a `close` check.
struct GradSample {
  vecf kernel;
  vecd numeric;
};
inline GradSample grad_check(const std::function<double()>& loss, vecd& x, const vecf& kernel_grad,
                             size_t max_count, double h = 1e-5) {
  GradSample s;
  for (size_t i : sample(x.size(), max_count)) {
    s.kernel.push_back(kernel_grad[i]);
    s.numeric.push_back(central_difference(loss, x[i], h));
  }
  return s;
}

inline double dot(const vecd& a, const vecd& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Runs f with the given number of OpenMP threads, then restores the old one.
template <class F>
void with_threads(int n, F&& f) {
  const int old = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(old);
}

}  // namespace mt_test
