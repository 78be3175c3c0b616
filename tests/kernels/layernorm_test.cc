// layernorm_forward / layernorm_backward against a double-precision
// reference and finite differences; accumulation, bf16, determinism.
#include "meshtrain/kernels/layernorm.h"

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

struct RefLN {
  vecd out, mean, rstd;
};
RefLN ref_layernorm(const vecd& x, const vecd& w, const vecd& b, int N, int C, double eps = 1e-5) {
  RefLN r{vecd(size_t(N) * C), vecd(N), vecd(N)};
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + eps);
    for (int c = 0; c < C; ++c) r.out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

// Forward vs double reference, out / mean / rstd: rtol 1e-5 (floor 1e-2 of max).
TEST(LayerNorm, ForwardMatchesDoubleReference) {
  for (auto [N, C] : {std::pair{1, 1}, std::pair{7, 37}, std::pair{33, 384}}) {
    const vecf x = randn(size_t(N) * C, 1, 2.0f, 0.5f), w = randn(C, 2), b = randn(C, 3);
    vecf out(size_t(N) * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kLayerNormEps);
    const RefLN r = ref_layernorm(to_double(x), to_double(w), to_double(b), N, C);
    EXPECT_TRUE(close(out, r.out, 1e-5)) << N << "x" << C;
    EXPECT_TRUE(close(mean, r.mean, 1e-5));
    if (C > 1) {
      EXPECT_TRUE(close(rstd, r.rstd, 1e-5));
    }
    // nullptr statistics are allowed.
    vecf out2(out.size());
    layernorm_forward<float>(out2.data(), nullptr, nullptr, x.data(), w.data(), b.data(), N, C, kLayerNormEps);
    EXPECT_TRUE(bitwise_equal(out, out2));
  }
}

// The epsilon reaches the kernel: eps = 0.5 on rows of variance about 0.09
// gives the closed form (x - mean) / sqrt(var + 0.5) * w + b (rtol 1e-5), far
// from the default eps's output.
TEST(LayerNorm, EpsilonEntersAsTheClosedFormSays) {
  const int N = 9, C = 24;
  const vecf x = randn(size_t(N) * C, 31, 0.3f), w = randn(C, 32), b = randn(C, 33);
  vecf out(x.size()), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 0.5f);
  const RefLN r = ref_layernorm(to_double(x), to_double(w), to_double(b), N, C, 0.5);
  EXPECT_TRUE(close(out, r.out, 1e-5));
  EXPECT_TRUE(close(rstd, r.rstd, 1e-5));
  EXPECT_FALSE(close(out, ref_layernorm(to_double(x), to_double(w), to_double(b), N, C).out, 1e-2));
}

// Finite differences (double reference, loss = sum(out * G)) for every
// element of inp, weight and bias; rtol 1e-3 (floor 1e-2 of max). dweight
// and dbias start from random values (+= semantics); dinp both = and +=.
TEST(LayerNorm, GradientMatchesFiniteDifferences) {
  const int N = 7, C = 37;
  const vecf x = randn(N * C, 4, 1.5f, 0.3f), w = randn(C, 5), b = randn(C, 6), g = randn(N * C, 7);
  vecd xd = to_double(x), wd = to_double(w), bd = to_double(b);
  const vecd gd = to_double(g);
  auto loss = [&] { return dot(ref_layernorm(xd, wd, bd, N, C).out, gd); };
  vecf out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kLayerNormEps);
  const vecf dx0 = randn(N * C, 8), dw0 = randn(C, 9), db0 = randn(C, 10);
  for (bool acc : {false, true}) {
    vecf dx = dx0, dw = dw0, db = db0;
    layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                       C, acc);
    for (int i = 0; i < N * C; ++i) dx[i] -= acc ? dx0[i] : 0.0f;
    for (int i = 0; i < C; ++i) {
      dw[i] -= dw0[i];
      db[i] -= db0[i];
    }
    auto sx = grad_check(loss, xd, dx, 1000);
    auto sw = grad_check(loss, wd, dw, 1000);
    auto sb = grad_check(loss, bd, db, 1000);
    EXPECT_TRUE(close(sx.kernel, sx.numeric, 1e-3)) << "dinp, accumulate " << acc;
    EXPECT_TRUE(close(sw.kernel, sw.numeric, 1e-3)) << "dweight";
    EXPECT_TRUE(close(sb.kernel, sb.numeric, 1e-3)) << "dbias";
  }
}

// bf16 vs fp32 kernels on identical bf16-representable inputs: rtol 2e-2.
TEST(LayerNorm, Bf16MatchesFloat) {
  const int N = 40, C = 96;
  const vecf x = round_bf16(randn(N * C, 11, 1.0f, 0.2f)), w = round_bf16(randn(C, 12));
  const vecf b = round_bf16(randn(C, 13)), g = round_bf16(randn(N * C, 14));
  vecf out(N * C), mean(N), rstd(N), dx(N * C), dw(C, 0.0f), db(C, 0.0f);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kLayerNormEps);
  layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C,
                     false);
  const auto x16 = to_bf16(x), w16 = to_bf16(w), b16 = to_bf16(b), g16 = to_bf16(g);
  std::vector<bf16> out16(N * C), dx16(N * C);
  vecf mean16(N), rstd16(N), dw16(C, 0.0f), db16(C, 0.0f);
  layernorm_forward(out16.data(), mean16.data(), rstd16.data(), x16.data(), w16.data(), b16.data(), N, C,
                    kLayerNormEps);
  layernorm_backward(dx16.data(), dw16.data(), db16.data(), g16.data(), x16.data(), w16.data(), mean16.data(),
                     rstd16.data(), N, C, false);
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));
  EXPECT_TRUE(close(mean16, mean, 2e-2));
  EXPECT_TRUE(close(rstd16, rstd, 2e-2));
  EXPECT_TRUE(close(from_bf16(dx16), dx, 2e-2));
  EXPECT_TRUE(close(dw16, dw, 2e-2));
  EXPECT_TRUE(close(db16, db, 2e-2));
}

// Repeated calls and 1 vs 2 threads give bitwise identical results.
TEST(LayerNorm, DeterministicAcrossCallsAndThreadCounts) {
  const int N = 300, C = 64;
  const vecf x = randn(N * C, 15), w = randn(C, 16), b = randn(C, 17), g = randn(N * C, 18);
  auto run = [&] {
    vecf out(N * C), mean(N), rstd(N), dx(N * C), dw(C, 0.0f), db(C, 0.0f);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kLayerNormEps);
    layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                       C, false);
    return std::vector<vecf>{out, dx, dw, db};
  };
  std::vector<vecf> a, b1, c;
  with_threads(2, [&] { a = run(); b1 = run(); });
  with_threads(1, [&] { c = run(); });
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(a[i], b1[i])) << i;
    EXPECT_TRUE(bitwise_equal(a[i], c[i])) << i;
  }
}

}  // namespace
}  // namespace meshtrain::kernels
