// Causal attention: forward against a naive double-precision reference
// (full softmax with the causal mask), backward by finite differences and
// against a double analytic backward, bf16, determinism.
#include "meshtrain/kernels/attention.h"

#include <fmt/format.h>

#include <limits>

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

struct Dims {
  int B, T, H, hd;
};
std::string name(const Dims& d) { return fmt::format("B{}T{}H{}hd{}", d.B, d.T, d.H, d.hd); }

size_t qkv_index(const Dims& d, int b, int t, int h, int which, int e) {
  return ((((size_t(b) * d.T + t) * d.H + h) * 3 + which) * d.hd) + e;
}
size_t out_index(const Dims& d, int b, int t, int h, int e) {
  return ((size_t(b) * d.T + t) * d.H + h) * d.hd + e;
}

struct RefAttn {
  vecd out, lse;
};
RefAttn ref_forward(const vecd& qkv, const Dims& d) {
  RefAttn r{vecd(size_t(d.B) * d.T * d.H * d.hd), vecd(size_t(d.B) * d.H * d.T)};
  const double scale = 1.0 / std::sqrt(double(d.hd));
  vecd s(d.T);
  for (int b = 0; b < d.B; ++b)
    for (int h = 0; h < d.H; ++h)
      for (int i = 0; i < d.T; ++i) {
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j <= i; ++j) {
          double acc = 0;
          for (int e = 0; e < d.hd; ++e) acc += qkv[qkv_index(d, b, i, h, 0, e)] * qkv[qkv_index(d, b, j, h, 1, e)];
          s[j] = acc * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(s[j] - m);
        for (int e = 0; e < d.hd; ++e) {
          double o = 0;
          for (int j = 0; j <= i; ++j) o += std::exp(s[j] - m) / sum * qkv[qkv_index(d, b, j, h, 2, e)];
          r.out[out_index(d, b, i, h, e)] = o;
        }
        r.lse[(size_t(b) * d.H + h) * d.T + i] = m + std::log(sum);
      }
  return r;
}

// Analytic backward in double (the textbook softmax backward, full P).
vecd ref_backward(const vecd& qkv, const vecd& dout, const Dims& d) {
  vecd dqkv(qkv.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(d.hd));
  const int T = d.T;
  vecd P(size_t(T) * T), dP(size_t(T) * T);
  for (int b = 0; b < d.B; ++b)
    for (int h = 0; h < d.H; ++h) {
      auto q = [&](int t, int e) { return qkv[qkv_index(d, b, t, h, 0, e)]; };
      auto k = [&](int t, int e) { return qkv[qkv_index(d, b, t, h, 1, e)]; };
      auto v = [&](int t, int e) { return qkv[qkv_index(d, b, t, h, 2, e)]; };
      auto g = [&](int t, int e) { return dout[out_index(d, b, t, h, e)]; };
      for (int i = 0; i < T; ++i) {
        double m = -1e300, sum = 0;
        for (int j = 0; j <= i; ++j) {
          double acc = 0;
          for (int e = 0; e < d.hd; ++e) acc += q(i, e) * k(j, e);
          P[i * T + j] = acc * scale;
          m = std::max(m, P[i * T + j]);
        }
        for (int j = 0; j <= i; ++j) sum += (P[i * T + j] = std::exp(P[i * T + j] - m));
        double D = 0;
        for (int j = 0; j <= i; ++j) {
          P[i * T + j] /= sum;
          double acc = 0;
          for (int e = 0; e < d.hd; ++e) acc += g(i, e) * v(j, e);
          dP[i * T + j] = acc;
          D += P[i * T + j] * acc;
        }
        for (int j = 0; j <= i; ++j) {
          const double ds = P[i * T + j] * (dP[i * T + j] - D) * scale;
          for (int e = 0; e < d.hd; ++e) {
            dqkv[qkv_index(d, b, i, h, 0, e)] += ds * k(j, e);
            dqkv[qkv_index(d, b, j, h, 1, e)] += ds * q(i, e);
            dqkv[qkv_index(d, b, j, h, 2, e)] += P[i * T + j] * g(i, e);
          }
        }
      }
    }
  return dqkv;
}

vecf make_qkv(const Dims& d, uint64_t seed) { return randn(size_t(d.B) * d.T * d.H * 3 * d.hd, seed, 1.0f); }

class AttentionShapes : public ::testing::TestWithParam<Dims> {};

// Forward out and lse vs the double reference: rtol 1e-5 (floor 1e-2 of
// max); lse rtol 1e-5.
TEST_P(AttentionShapes, ForwardMatchesDoubleReference) {
  const Dims d = GetParam();
  const vecf qkv = make_qkv(d, 1);
  vecf out(size_t(d.B) * d.T * d.H * d.hd), lse(size_t(d.B) * d.H * d.T);
  attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd);
  const RefAttn r = ref_forward(to_double(qkv), d);
  EXPECT_TRUE(close(out, r.out, 1e-5));
  EXPECT_TRUE(close(lse, r.lse, 1e-5));
}

// Backward vs the double analytic backward on every element: rtol 1e-4
// (floor 1e-2 of max).
TEST_P(AttentionShapes, BackwardMatchesDoubleReference) {
  const Dims d = GetParam();
  const vecf qkv = make_qkv(d, 2), g = randn(size_t(d.B) * d.T * d.H * d.hd, 3);
  vecf out(g.size()), lse(size_t(d.B) * d.H * d.T), dqkv(qkv.size(), 7.0f);
  attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd);
  attention_backward(dqkv.data(), g.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.H, d.hd);
  EXPECT_TRUE(close(dqkv, ref_backward(to_double(qkv), to_double(g), d), 1e-4));
}

// bf16 vs fp32 kernels on identical inputs: rtol 2e-2 (floor 1e-2 of max).
TEST_P(AttentionShapes, Bf16MatchesFloat) {
  const Dims d = GetParam();
  const vecf qkv = round_bf16(make_qkv(d, 4)), g = round_bf16(randn(size_t(d.B) * d.T * d.H * d.hd, 5));
  vecf out(g.size()), lse(size_t(d.B) * d.H * d.T), dqkv(qkv.size());
  attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd);
  // the bf16 backward sees the bf16 forward output; use the same for fp32
  const auto qkv16 = to_bf16(qkv), g16 = to_bf16(g);
  std::vector<bf16> out16(out.size()), dqkv16(qkv.size());
  vecf lse16(lse.size());
  attention_forward(out16.data(), lse16.data(), qkv16.data(), d.B, d.T, d.H, d.hd);
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));
  EXPECT_TRUE(close(lse16, lse, 2e-2));
  const vecf out_r = from_bf16(out16);
  attention_backward(dqkv.data(), g.data(), qkv.data(), out_r.data(), lse16.data(), d.B, d.T, d.H, d.hd);
  attention_backward(dqkv16.data(), g16.data(), qkv16.data(), out16.data(), lse16.data(), d.B, d.T, d.H, d.hd);
  EXPECT_TRUE(close(from_bf16(dqkv16), dqkv, 2e-2));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionShapes,
                         ::testing::Values(Dims{1, 1, 1, 8}, Dims{2, 5, 3, 8}, Dims{1, 64, 2, 16},
                                           Dims{2, 70, 2, 24}, Dims{1, 130, 1, 64}, Dims{1, 200, 2, 40},
                                           Dims{1, 257, 1, 128}),
                         [](const auto& info) { return name(info.param); });

// Finite differences of loss = sum(out * G) (double reference) for every
// element of qkv on a small shape and a sample of 300 on a multi-tile
// shape (T = 130: three query and key blocks, the last partial); rtol 1e-3
// (floor 1e-2 of max).
TEST(Attention, GradientMatchesFiniteDifferences) {
  for (const Dims d : {Dims{2, 5, 2, 8}, Dims{1, 130, 1, 16}}) {
    const vecf qkv = make_qkv(d, 6), g = randn(size_t(d.B) * d.T * d.H * d.hd, 7);
    vecf out(g.size()), lse(size_t(d.B) * d.H * d.T), dqkv(qkv.size());
    attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd);
    attention_backward(dqkv.data(), g.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.H, d.hd);
    vecd x = to_double(qkv);
    const vecd gd = to_double(g);
    auto loss = [&] { return dot(ref_forward(x, d).out, gd); };
    const GradSample s = grad_check(loss, x, dqkv, 300);
    EXPECT_TRUE(close(s.kernel, s.numeric, 1e-3)) << name(d);
  }
}

// Repeated calls and 1 vs 2 threads give bitwise identical out, lse, dqkv.
TEST(Attention, DeterministicAcrossCallsAndThreadCounts) {
  const Dims d{2, 100, 3, 32};
  const vecf qkv = make_qkv(d, 8), g = randn(size_t(d.B) * d.T * d.H * d.hd, 9);
  auto run = [&] {
    vecf out(g.size()), lse(size_t(d.B) * d.H * d.T), dqkv(qkv.size());
    attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd);
    attention_backward(dqkv.data(), g.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.H, d.hd);
    return std::vector<vecf>{out, lse, dqkv};
  };
  std::vector<vecf> a, b, c;
  with_threads(2, [&] { a = run(); b = run(); });
  with_threads(1, [&] { c = run(); });
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << i;
    EXPECT_TRUE(bitwise_equal(a[i], c[i])) << i;
  }
}

// Grouped-query attention: qkv [B, T, G, R + 2, hd] expanded to the
// multi-head layout [B, T, H, 3, hd] (each query head with its group's k, v),
// the form the double references take.
struct GqaDims {
  int B, T, H, G, hd;
  Dims mha() const { return Dims{B, T, H, hd}; }
  int R() const { return H / G; }
  size_t qkv_size() const { return size_t(B) * T * G * (R() + 2) * hd; }
};
size_t gqa_index(const GqaDims& d, int b, int t, int g, int v, int e) {
  return (((size_t(b) * d.T + t) * d.G + g) * (d.R() + 2) + v) * d.hd + e;
}
vecd expand_gqa(const vecd& x, const GqaDims& d) {
  const Dims m = d.mha();
  vecd y(size_t(d.B) * d.T * d.H * 3 * d.hd);
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.T; ++t)
      for (int h = 0; h < d.H; ++h)
        for (int e = 0; e < d.hd; ++e) {
          const int g = h / d.R(), r = h % d.R();
          y[qkv_index(m, b, t, h, 0, e)] = x[gqa_index(d, b, t, g, r, e)];
          y[qkv_index(m, b, t, h, 1, e)] = x[gqa_index(d, b, t, g, d.R(), e)];
          y[qkv_index(m, b, t, h, 2, e)] = x[gqa_index(d, b, t, g, d.R() + 1, e)];
        }
  return y;
}
// The gradient of the expanded tensor folded back: k and v gradients of a
// group summed over its query heads.
vecd fold_gqa(const vecd& dy, const GqaDims& d) {
  const Dims m = d.mha();
  vecd dx(d.qkv_size(), 0.0);
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.T; ++t)
      for (int h = 0; h < d.H; ++h)
        for (int e = 0; e < d.hd; ++e) {
          const int g = h / d.R(), r = h % d.R();
          dx[gqa_index(d, b, t, g, r, e)] += dy[qkv_index(m, b, t, h, 0, e)];
          dx[gqa_index(d, b, t, g, d.R(), e)] += dy[qkv_index(m, b, t, h, 1, e)];
          dx[gqa_index(d, b, t, g, d.R() + 1, e)] += dy[qkv_index(m, b, t, h, 2, e)];
        }
  return dx;
}

// GQA forward and backward against the multi-head double references on the
// expanded tensor (every element; forward rtol 1e-5, backward 1e-4), and
// finite differences of the GQA loss (sample of 300, rtol 1e-3). Shapes
// cover multi-query (G = 1), R = 2 and 4, and several tiles (T = 130).
TEST(Attention, GroupedQueryMatchesExpandedMultiHead) {
  for (const GqaDims d : {GqaDims{2, 5, 4, 2, 8}, GqaDims{1, 70, 4, 1, 16}, GqaDims{1, 130, 8, 2, 16}}) {
    const vecf qkv = randn(d.qkv_size(), 11), g = randn(size_t(d.B) * d.T * d.H * d.hd, 12);
    vecf out(g.size()), lse(size_t(d.B) * d.H * d.T), dqkv(qkv.size(), 3.0f);
    attention_forward(out.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd, d.G);
    attention_backward(dqkv.data(), g.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.H, d.hd, d.G);
    const std::string n = fmt::format("{} G{}", name(d.mha()), d.G);
    const vecd xe = expand_gqa(to_double(qkv), d);
    const RefAttn r = ref_forward(xe, d.mha());
    EXPECT_TRUE(close(out, r.out, 1e-5)) << n;
    EXPECT_TRUE(close(lse, r.lse, 1e-5)) << n;
    EXPECT_TRUE(close(dqkv, fold_gqa(ref_backward(xe, to_double(g), d.mha()), d), 1e-4)) << n;
    vecd x = to_double(qkv);
    const vecd gd = to_double(g);
    auto loss = [&] { return dot(ref_forward(expand_gqa(x, d), d.mha()).out, gd); };
    const GradSample s = grad_check(loss, x, dqkv, 300);
    EXPECT_TRUE(close(s.kernel, s.numeric, 1e-3)) << n;
  }
}

// G == H is the multi-head kernel, bit for bit; bf16 GQA against fp32 on the
// same inputs (rtol 2e-2).
TEST(Attention, GroupedQueryDegeneratesAndBf16) {
  const Dims d{2, 70, 4, 16};
  const vecf qkv = make_qkv(d, 13), g = randn(size_t(d.B) * d.T * d.H * d.hd, 14);
  vecf o1(g.size()), o2(g.size()), l1(size_t(d.B) * d.H * d.T), l2(l1.size()), d1(qkv.size()), d2(qkv.size());
  attention_forward(o1.data(), l1.data(), qkv.data(), d.B, d.T, d.H, d.hd);
  attention_forward(o2.data(), l2.data(), qkv.data(), d.B, d.T, d.H, d.hd, d.H);
  attention_backward(d1.data(), g.data(), qkv.data(), o1.data(), l1.data(), d.B, d.T, d.H, d.hd);
  attention_backward(d2.data(), g.data(), qkv.data(), o2.data(), l2.data(), d.B, d.T, d.H, d.hd, d.H);
  EXPECT_TRUE(bitwise_equal(o1, o2));
  EXPECT_TRUE(bitwise_equal(d1, d2));
  const GqaDims q{1, 70, 4, 2, 16};
  const vecf x = round_bf16(randn(q.qkv_size(), 15)), gq = round_bf16(randn(size_t(q.T) * q.H * q.hd, 16));
  vecf out(gq.size()), lse(size_t(q.H) * q.T), dx(x.size());
  std::vector<bf16> out16(out.size()), dx16(x.size());
  vecf lse16(lse.size());
  const auto x16 = to_bf16(x), g16 = to_bf16(gq);
  attention_forward(out16.data(), lse16.data(), x16.data(), q.B, q.T, q.H, q.hd, q.G);
  attention_forward(out.data(), lse.data(), x.data(), q.B, q.T, q.H, q.hd, q.G);
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));
  const vecf out_r = from_bf16(out16);
  attention_backward(dx.data(), gq.data(), x.data(), out_r.data(), lse16.data(), q.B, q.T, q.H, q.hd, q.G);
  attention_backward(dx16.data(), g16.data(), x16.data(), out16.data(), lse16.data(), q.B, q.T, q.H, q.hd, q.G);
  EXPECT_TRUE(close(from_bf16(dx16), dx, 2e-2));
}

}  // namespace
}  // namespace meshtrain::kernels
