// GELU (forward vs double reference, backward by finite differences,
// aliasing, bf16) and the residual additions.
#include "meshtrain/kernels/gelu.h"
#include "meshtrain/kernels/residual.h"

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

double ref_gelu(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

vecf gelu_inputs() {
  vecf x = randn(997, 1, 2.0f);
  for (float v : {0.0f, -0.0f, 1e-6f, -1e-6f, 3.0f, -3.0f, 6.0f, -6.0f, 9.5f, -9.5f, 20.0f, -20.0f, 60.0f, -60.0f})
    x.push_back(v);
  return x;
}

// Forward vs double reference: rtol 1e-5 (floor 1e-4 of max|out|).
TEST(Gelu, ForwardMatchesDoubleReference) {
  const vecf x = gelu_inputs();
  vecf out(x.size());
  gelu_forward(out.data(), x.data(), x.size());
  vecd ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = ref_gelu(x[i]);
  EXPECT_TRUE(close(out, ref, 1e-5, 1e-4));
  // in place
  vecf y = x;
  gelu_forward(y.data(), y.data(), y.size());
  EXPECT_TRUE(bitwise_equal(y, out));
}

// Backward vs central differences of the double reference for every element
// (loss = sum(gelu(x) * G)); rtol 1e-3 (floor 1e-3 of max). dinp may alias dout.
TEST(Gelu, GradientMatchesFiniteDifferences) {
  const vecf x = gelu_inputs(), g = randn(x.size(), 2);
  vecf dx(x.size());
  gelu_backward(dx.data(), x.data(), g.data(), x.size());
  vecd num(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-5;
    num[i] = g[i] * (ref_gelu(double(x[i]) + h) - ref_gelu(double(x[i]) - h)) / (2 * h);
  }
  EXPECT_TRUE(close(dx, num, 1e-3, 1e-3));
  vecf inplace = g;
  gelu_backward(inplace.data(), x.data(), inplace.data(), x.size());
  EXPECT_TRUE(bitwise_equal(inplace, dx));
}

// bf16 vs fp32 on identical inputs: rtol 2e-2 (floor 1e-2 of max).
TEST(Gelu, Bf16MatchesFloat) {
  const vecf x = round_bf16(gelu_inputs()), g = round_bf16(randn(x.size(), 3));
  vecf out(x.size()), dx(x.size());
  gelu_forward(out.data(), x.data(), x.size());
  gelu_backward(dx.data(), x.data(), g.data(), x.size());
  const auto x16 = to_bf16(x), g16 = to_bf16(g);
  std::vector<bf16> out16(x.size()), dx16(x.size());
  gelu_forward(out16.data(), x16.data(), x.size());
  gelu_backward(dx16.data(), x16.data(), g16.data(), x.size());
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));
  EXPECT_TRUE(close(from_bf16(dx16), dx, 2e-2));
}

// Residual: out = a + b (also in place), acc += x; fp32 exact, bf16 within
// one rounding (rtol 2e-2 vs fp32).
TEST(Residual, ForwardAndAccumulate) {
  const size_t n = 1001;
  const vecf a = round_bf16(randn(n, 4)), b = round_bf16(randn(n, 5));
  vecf out(n);
  residual_forward(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
  vecf acc = a;
  residual_forward(acc.data(), acc.data(), b.data(), n);
  EXPECT_TRUE(bitwise_equal(acc, out));
  acc = a;
  add_inplace(acc.data(), b.data(), n);
  EXPECT_TRUE(bitwise_equal(acc, out));

  const auto a16 = to_bf16(a), b16 = to_bf16(b);
  std::vector<bf16> out16(n), acc16 = a16;
  residual_forward(out16.data(), a16.data(), b16.data(), n);
  add_inplace(acc16.data(), b16.data(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out16[i].bits, bf16(a[i] + b[i]).bits);
    ASSERT_EQ(acc16[i].bits, bf16(a[i] + b[i]).bits);
  }
}

}  // namespace
}  // namespace meshtrain::kernels
