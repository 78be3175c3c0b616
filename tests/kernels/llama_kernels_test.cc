// RMSNorm, SwiGLU and rotary position embedding: forward against double
// references, backward by finite differences of a double loss
// sum(out * G), bf16 against fp32 on identical inputs.
#include "meshtrain/kernels/layernorm.h"
#include "meshtrain/kernels/rmsnorm.h"
#include "meshtrain/kernels/rope.h"
#include "meshtrain/kernels/swiglu.h"

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

vecd ref_rmsnorm(const vecd& x, const vecd& w, int N, int C, double eps = 1e-5) {
  vecd out(x.size());
  for (int n = 0; n < N; ++n) {
    double sq = 0;
    for (int c = 0; c < C; ++c) sq += x[n * C + c] * x[n * C + c];
    const double s = 1.0 / std::sqrt(sq / C + eps);
    for (int c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * s * w[c];
  }
  return out;
}

// Forward rtol 1e-5; gradients of every element of inp and weight, both
// = and += for dinp and += for dweight, rtol 1e-3 (floor 1e-2 of max).
TEST(RmsNorm, ForwardAndGradientMatchDoubleReference) {
  for (auto [N, C] : {std::pair{7, 37}, std::pair{40, 64}}) {
    const vecf x = randn(size_t(N) * C, 1, 1.5f, 0.3f), w = randn(C, 2), g = randn(size_t(N) * C, 3);
    vecf out(x.size()), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kLayerNormEps);
    vecd xd = to_double(x), wd = to_double(w);
    EXPECT_TRUE(close(out, ref_rmsnorm(xd, wd, N, C), 1e-5));
    const vecd gd = to_double(g);
    auto loss = [&] { return dot(ref_rmsnorm(xd, wd, N, C), gd); };
    const vecf dx0 = randn(x.size(), 4), dw0 = randn(C, 5);
    for (bool acc : {false, true}) {
      vecf dx = dx0, dw = dw0;
      rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, C, acc);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] -= acc ? dx0[i] : 0.0f;
      for (int i = 0; i < C; ++i) dw[i] -= dw0[i];
      const GradSample sx = grad_check(loss, xd, dx, 1000), sw = grad_check(loss, wd, dw, 1000);
      EXPECT_TRUE(close(sx.kernel, sx.numeric, 1e-3)) << "dinp " << N << "x" << C << " acc " << acc;
      EXPECT_TRUE(close(sw.kernel, sw.numeric, 1e-3)) << "dweight " << N << "x" << C;
    }
  }
}

// bf16 against fp32 on bf16-representable inputs: rtol 2e-2; and 1 vs 2
// threads give the same bits.
TEST(RmsNorm, Bf16MatchesFloatAndIsDeterministic) {
  const int N = 70, C = 48;
  const vecf x = round_bf16(randn(size_t(N) * C, 6)), w = round_bf16(randn(C, 7)), g = round_bf16(randn(x.size(), 8));
  vecf out(x.size()), rstd(N), dx(x.size()), dw(C, 0.0f);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kLayerNormEps);
  rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, C, false);
  const auto x16 = to_bf16(x), w16 = to_bf16(w), g16 = to_bf16(g);
  std::vector<bf16> out16(x.size()), dx16(x.size());
  vecf rstd16(N), dw16(C, 0.0f);
  rmsnorm_forward(out16.data(), rstd16.data(), x16.data(), w16.data(), N, C, kLayerNormEps);
  rmsnorm_backward(dx16.data(), dw16.data(), g16.data(), x16.data(), w16.data(), rstd16.data(), N, C, false);
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));
  EXPECT_TRUE(close(from_bf16(dx16), dx, 2e-2));
  EXPECT_TRUE(close(dw16, dw, 2e-2));
  vecf dw1(C, 0.0f), dw2(C, 0.0f), dx1(x.size()), dx2(x.size());
  with_threads(1, [&] { rmsnorm_backward(dx1.data(), dw1.data(), g.data(), x.data(), w.data(), rstd.data(), N, C, false); });
  with_threads(2, [&] { rmsnorm_backward(dx2.data(), dw2.data(), g.data(), x.data(), w.data(), rstd.data(), N, C, false); });
  EXPECT_TRUE(bitwise_equal(dw1, dw2));
  EXPECT_TRUE(bitwise_equal(dx1, dx2));
}

// The epsilon reaches the kernel: with eps = 0.5 on rows of mean square
// about 0.1 the output is the closed form x / sqrt(mean(x^2) + 0.5) * w
// (rtol 1e-5), which differs from the default eps's by far more than that.
TEST(RmsNorm, EpsilonEntersAsTheClosedFormSays) {
  const int N = 9, C = 24;
  const vecf x = randn(size_t(N) * C, 21, 0.3f), w = randn(C, 22);
  vecf out(x.size()), out_default(x.size()), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 0.5f);
  rmsnorm_forward(out_default.data(), nullptr, x.data(), w.data(), N, C, kLayerNormEps);
  const vecd xd = to_double(x), wd = to_double(w);
  EXPECT_TRUE(close(out, ref_rmsnorm(xd, wd, N, C, 0.5), 1e-5));
  EXPECT_FALSE(close(out, ref_rmsnorm(xd, wd, N, C, 1e-5), 1e-2));
  EXPECT_TRUE(close(out_default, ref_rmsnorm(xd, wd, N, C, 1e-5), 1e-5));
  for (int n = 0; n < N; ++n) {
    double sq = 0;
    for (int c = 0; c < C; ++c) sq += xd[n * C + c] * xd[n * C + c];
    EXPECT_NEAR(rstd[n], 1.0 / std::sqrt(sq / C + 0.5), 1e-5 * rstd[n]);
  }
}

vecd ref_swiglu(const vecd& x, int N, int F) {
  vecd out(size_t(N) * F);
  for (int n = 0; n < N; ++n)
    for (int f = 0; f < F; ++f) {
      const double a = x[size_t(n) * 2 * F + f], u = x[size_t(n) * 2 * F + F + f];
      out[size_t(n) * F + f] = a / (1 + std::exp(-a)) * u;
    }
  return out;
}

// Forward rtol 1e-5, every input gradient by finite differences rtol 1e-3,
// bf16 against fp32 rtol 2e-2. Inputs span saturation (|a| up to ~12).
TEST(SwiGlu, ForwardAndGradientMatchDoubleReference) {
  const int N = 9, F = 21;
  const vecf x = randn(size_t(N) * 2 * F, 9, 3.0f), g = randn(size_t(N) * F, 10);
  vecf out(g.size()), dx(x.size(), 5.0f);
  swiglu_forward(out.data(), x.data(), N, F);
  swiglu_backward(dx.data(), x.data(), g.data(), N, F);
  vecd xd = to_double(x);
  EXPECT_TRUE(close(out, ref_swiglu(xd, N, F), 1e-5));
  const vecd gd = to_double(g);
  const GradSample s = grad_check([&] { return dot(ref_swiglu(xd, N, F), gd); }, xd, dx, 1000);
  EXPECT_TRUE(close(s.kernel, s.numeric, 1e-3));
  const vecf xr = round_bf16(x), gr = round_bf16(g);
  vecf o32(out.size()), d32(x.size());
  swiglu_forward(o32.data(), xr.data(), N, F);
  swiglu_backward(d32.data(), xr.data(), gr.data(), N, F);
  const auto x16 = to_bf16(xr), g16 = to_bf16(gr);
  std::vector<bf16> o16(out.size()), d16(x.size());
  swiglu_forward(o16.data(), x16.data(), N, F);
  swiglu_backward(d16.data(), x16.data(), g16.data(), N, F);
  EXPECT_TRUE(close(from_bf16(o16), o32, 2e-2));
  EXPECT_TRUE(close(from_bf16(d16), d32, 2e-2));
}

struct RopeDims {
  int B, S, G, R, hd;
  size_t size() const { return size_t(B) * S * G * (R + 2) * hd; }
};
// The kernels' cos/sin table [S, hd] at inv_freq[i] = base^(-2i/hd).
vecf rope_table(const RopeDims& d, double base) {
  const int half = d.hd / 2;
  vecf t(size_t(d.S) * d.hd);
  for (int p = 0; p < d.S; ++p)
    for (int i = 0; i < half; ++i) {
      const double th = p * std::pow(base, -2.0 * i / d.hd);
      t[size_t(p) * d.hd + i] = float(std::cos(th));
      t[size_t(p) * d.hd + half + i] = float(std::sin(th));
    }
  return t;
}
vecd ref_rope(vecd x, const RopeDims& d, double base) {
  const int half = d.hd / 2;
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.S; ++t)
      for (int g = 0; g < d.G; ++g)
        for (int v = 0; v <= d.R; ++v) {
          double* p = x.data() + (((size_t(b) * d.S + t) * d.G + g) * (d.R + 2) + v) * d.hd;
          for (int i = 0; i < half; ++i) {
            const double th = t * std::pow(base, -2.0 * i / d.hd), x1 = p[i], x2 = p[i + half];
            p[i] = x1 * std::cos(th) - x2 * std::sin(th);
            p[i + half] = x2 * std::cos(th) + x1 * std::sin(th);
          }
        }
  return x;
}

// Forward against the double reference (values untouched, rtol 1e-5 with
// positions up to 40 at base 10000 and 500000); the backward against finite
// differences of every element (rtol 1e-3); forward then backward is the
// identity (a rotation's transpose is its inverse); bf16 rtol 2e-2.
TEST(Rope, ForwardAndGradientMatchDoubleReference) {
  for (const double base : {10000.0, 500000.0}) {
    const RopeDims d{2, 40, 2, 2, 8};
    const vecf cs = rope_table(d, base);
    const vecf x = randn(d.size(), 11), g = randn(d.size(), 12);
    vecf y = x;
    rope_forward(y.data(), cs.data(), d.B, d.S, d.G, d.R, d.hd);
    vecd xd = to_double(x);
    EXPECT_TRUE(close(y, ref_rope(xd, d, base), 1e-5));
    vecf dx = g;
    rope_backward(dx.data(), cs.data(), d.B, d.S, d.G, d.R, d.hd);
    const vecd gd = to_double(g);
    const GradSample s = grad_check([&] { return dot(ref_rope(xd, d, base), gd); }, xd, dx, 2000);
    EXPECT_TRUE(close(s.kernel, s.numeric, 1e-3)) << base;
    rope_backward(y.data(), cs.data(), d.B, d.S, d.G, d.R, d.hd);
    EXPECT_TRUE(close(y, to_double(x), 1e-5)) << base;
    std::vector<bf16> y16 = to_bf16(round_bf16(x));
    vecf y32 = round_bf16(x);
    rope_forward(y16.data(), cs.data(), d.B, d.S, d.G, d.R, d.hd);
    rope_forward(y32.data(), cs.data(), d.B, d.S, d.G, d.R, d.hd);
    EXPECT_TRUE(close(from_bf16(y16), y32, 2e-2));
  }
}

}  // namespace
}  // namespace meshtrain::kernels
