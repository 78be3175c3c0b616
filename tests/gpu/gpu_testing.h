// Helpers for the GPU kernel tests: each test compares a GPU kernel with the
// CPU kernel (itself checked against double precision in tests/kernels) on
// the same inputs, and is skipped, saying why, where no GPU is visible.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../kernels/testing.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/gpu/runtime_api.h"

#define MT_REQUIRE_GPU()                                                                               \
  do {                                                                                                 \
    if (::meshtrain::gpu::device_count() == 0)                                                         \
      GTEST_SKIP() << "no GPU visible (" << ::meshtrain::gpu::no_device_reason() << ")";               \
    ::meshtrain::gpu::init(0);                                                                         \
  } while (0)

namespace mt_test {

// A device copy of a host vector.
template <class T>
class DeviceVec {
 public:
  explicit DeviceVec(const std::vector<T>& h)
      : n_(h.size()), buf_(meshtrain::MemCategory::workspace, h.size() * sizeof(T), false, meshtrain::Device::cuda) {
    meshtrain::gpu::copy(buf_.data(), h.data(), n_ * sizeof(T));
  }
  explicit DeviceVec(size_t n)
      : n_(n), buf_(meshtrain::MemCategory::workspace, n * sizeof(T), true, meshtrain::Device::cuda) {}
  T* get() const { return buf_.as<T>(); }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    meshtrain::gpu::copy(h.data(), buf_.data(), n_ * sizeof(T));
    return h;
  }

 private:
  size_t n_;
  meshtrain::Buffer buf_;
};

// float view of either storage type, for close().
inline vecf as_float(const vecf& v) { return v; }
inline vecf as_float(const std::vector<bf16>& v) { return from_bf16(v); }

template <class T> std::vector<T> make(const vecf& v);
template <> inline vecf make<float>(const vecf& v) { return v; }
template <> inline std::vector<bf16> make<bf16>(const vecf& v) { return to_bf16(v); }

// Tolerance of a T-valued output: fp32 `f32`, bf16 a little over one bf16
// rounding (2^-8 relative) when the fp32 values before rounding differ.
template <class T> constexpr double tol(double f32) {
  return std::is_same_v<T, float> ? f32 : 1.6e-2;
}

// The double-precision value of a matmul, out[i, j] = sum_l a[i, l] b(l, j)
// + addend(i, j), from the (bf16-rounded) inputs as floats: a is [I, L]
// row-major and b(l, j) = b[l * b_l + j * b_j] (W as [J, L]: b_l = 1,
// b_j = L). With the product and the sum of |terms| of each element, which
// bound the roundings two correct backends may differ by.
struct MatmulReference {
  std::vector<double> product, terms_abs_sum, exact;
};
template <class Addend>
MatmulReference matmul_reference(const vecf& a, const vecf& b, int I, int L, int J, size_t b_l, size_t b_j,
                                 Addend addend) {
  MatmulReference r;
  const size_t n = size_t(I) * J;
  r.product.resize(n), r.terms_abs_sum.resize(n), r.exact.resize(n);
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < J; ++j) {
      double sum = 0, abs_sum = 0;
      for (int l = 0; l < L; ++l) {
        const double t = double(a[size_t(i) * L + l]) * b[size_t(l) * b_l + size_t(j) * b_j];
        sum += t, abs_sum += std::fabs(t);
      }
      const size_t e = size_t(i) * J + j;
      r.product[e] = sum, r.terms_abs_sum[e] = abs_sum, r.exact[e] = sum + addend(i, j);
    }
  return r;
}

// A bf16 matmul output (out = product + addend: a bias, or the output
// accumulated into) against its double-precision value. Allowed: a bf16
// rounding (2^-8 relative) of the product and one of the result -- cuBLASLt
// may round the product to bf16 before the epilogue's add, oneDNN after it
// -- plus 2^-20 of the sum of |terms| (fp32 accumulation in either order; a
// dot product that cancels to near zero keeps that absolute error). 10%
// margin.
inline ::testing::AssertionResult within_bf16_matmul_rounding(const vecf& actual, const MatmulReference& ref) {
  double worst = -1.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tol =
        1.1 * (0x1p-8 * (std::fabs(ref.product[i]) + std::fabs(ref.exact[i])) + 0x1p-20 * ref.terms_abs_sum[i]) + 1e-30;
    const double excess = std::isfinite(actual[i]) ? std::fabs(actual[i] - ref.exact[i]) / tol : 1e300;
    if (excess > worst) worst = excess, worst_i = i;
  }
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst_i << ": " << actual[worst_i] << " vs exact "
                                       << ref.exact[worst_i] << " (product " << ref.product[worst_i]
                                       << ", sum of |terms| " << ref.terms_abs_sum[worst_i] << "; error " << worst
                                       << " x tolerance)";
}

}  // namespace mt_test
