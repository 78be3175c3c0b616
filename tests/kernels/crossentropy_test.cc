// Vocabulary-parallel cross-entropy: one rank and 2 / 4 simulated
// tensor-parallel ranks against a double reference, padding masked,
// finite differences, in-place backward, bf16, determinism.
#include "meshtrain/kernels/crossentropy.h"

#include <limits>

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

struct RefCE {
  vecd loss, dlogits;  // dlogits [N, Vp], padding 0
};
// logits [N, Vp] (padded), real columns < V.
RefCE ref_ce(const vecd& logits, const std::vector<int32_t>& tgt, double scale, int N, int Vp, int V) {
  RefCE r{vecd(N), vecd(size_t(N) * Vp, 0.0)};
  for (int n = 0; n < N; ++n) {
    const double* x = &logits[size_t(n) * Vp];
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < V; ++j) m = std::max(m, x[j]);
    double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp(x[j] - m);
    r.loss[n] = std::log(s) + m - x[tgt[n]];
    for (int j = 0; j < V; ++j) r.dlogits[size_t(n) * Vp + j] = (std::exp(x[j] - m) / s - (j == tgt[n])) * scale;
  }
  return r;
}

struct Result {
  vecf loss, dlogits;
};

// The protocol as `tp` ranks run it: each holds Vp/tp columns; row maxima
// combined by max, sum-exp and target logits by sum, as the all-reduces do.
template <class T>
Result run_tp(const vecf& logits, const std::vector<int32_t>& tgt, float scale, int N, int Vp, int V, int tp) {
  const int Vl = Vp / tp;
  std::vector<std::vector<T>> shard(tp, std::vector<T>(size_t(N) * Vl));
  for (int r = 0; r < tp; ++r)
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < Vl; ++j) shard[r][size_t(n) * Vl + j] = static_cast<T>(logits[size_t(n) * Vp + r * Vl + j]);
  auto n_valid = [&](int r) { return std::clamp(V - r * Vl, 0, Vl); };
  vecf gmax(N, -std::numeric_limits<float>::infinity()), gsum(N, 0.0f), gtl(N, 0.0f);
  for (int r = 0; r < tp; ++r) {
    vecf m(N);
    crossentropy_row_max(m.data(), shard[r].data(), N, Vl, n_valid(r));
    for (int n = 0; n < N; ++n) gmax[n] = std::max(gmax[n], m[n]);
  }
  for (int r = 0; r < tp; ++r) {
    vecf s(N), tl(N);
    crossentropy_sumexp(s.data(), tl.data(), shard[r].data(), gmax.data(), tgt.data(), N, Vl, r * Vl, n_valid(r));
    for (int n = 0; n < N; ++n) {
      gsum[n] += s[n];
      gtl[n] += tl[n];
    }
  }
  Result res{vecf(N), vecf(size_t(N) * Vp)};
  crossentropy_loss(res.loss.data(), gmax.data(), gsum.data(), gtl.data(), N);
  for (int r = 0; r < tp; ++r) {
    // in place: dlogits overwrite the logits shard
    crossentropy_backward(shard[r].data(), shard[r].data(), gmax.data(), gsum.data(), tgt.data(), scale, N, Vl,
                          r * Vl, n_valid(r));
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < Vl; ++j)
        res.dlogits[size_t(n) * Vp + r * Vl + j] = static_cast<float>(shard[r][size_t(n) * Vl + j]);
  }
  return res;
}

struct Problem {
  int N, Vp, V;
  vecf logits;
  std::vector<int32_t> tgt;
  float scale;
};
Problem make_problem(int N, int Vp, int V, uint64_t seed) {
  Problem p{N, Vp, V, randn(size_t(N) * Vp, seed, 3.0f), {}, 1.0f / static_cast<float>(N)};
  for (int n = 0; n < N; ++n) {
    p.tgt.push_back(static_cast<int32_t>((n * 11 + seed) % V));
    // padding columns hold large values that must be ignored
    for (int j = V; j < Vp; ++j) p.logits[size_t(n) * Vp + j] = 1e4f;
  }
  p.tgt[0] = V - 1;  // the last real column
  return p;
}

// 1, 2 and 4 ranks (vocabulary 37 padded to 48: the last rank of 4 holds one
// real column; vocabulary 30 padded to 48: the last rank of 4 holds none)
// against the double reference: loss and dlogits rtol 1e-5 (floor 1e-2 of
// max); padding gradients exactly 0; all splits agree within 1e-6.
TEST(CrossEntropy, TensorParallelSplitsMatchDoubleReference) {
  for (int V : {37, 30}) {
    const Problem p = make_problem(6, 48, V, 1);
    const RefCE ref = ref_ce(to_double(p.logits), p.tgt, p.scale, p.N, p.Vp, p.V);
    const Result one = run_tp<float>(p.logits, p.tgt, p.scale, p.N, p.Vp, p.V, 1);
    for (int tp : {1, 2, 4}) {
      const Result r = run_tp<float>(p.logits, p.tgt, p.scale, p.N, p.Vp, p.V, tp);
      EXPECT_TRUE(close(r.loss, ref.loss, 1e-5)) << "V " << V << " tp " << tp;
      EXPECT_TRUE(close(r.dlogits, ref.dlogits, 1e-5)) << "V " << V << " tp " << tp;
      EXPECT_TRUE(close(r.loss, one.loss, 1e-6));
      EXPECT_TRUE(close(r.dlogits, one.dlogits, 1e-6));
      for (int n = 0; n < p.N; ++n)
        for (int j = V; j < p.Vp; ++j) ASSERT_EQ(r.dlogits[size_t(n) * p.Vp + j], 0.0f);
    }
  }
}

// A long row (chunked sums): V = 5000 real of 5120, 2 ranks; rtol 1e-5.
TEST(CrossEntropy, LongRowsMatchDoubleReference) {
  const Problem p = make_problem(5, 5120, 5000, 2);
  const RefCE ref = ref_ce(to_double(p.logits), p.tgt, p.scale, p.N, p.Vp, p.V);
  const Result r = run_tp<float>(p.logits, p.tgt, p.scale, p.N, p.Vp, p.V, 2);
  EXPECT_TRUE(close(r.loss, ref.loss, 1e-5));
  EXPECT_TRUE(close(r.dlogits, ref.dlogits, 1e-5));
}

// Finite differences of scale * sum_n loss_n (double reference) for every
// real logit, against the 4-rank backward: rtol 1e-3 (floor 1e-2 of max).
TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  const Problem p = make_problem(4, 48, 37, 3);
  vecd x = to_double(p.logits);
  auto loss = [&] {
    const RefCE r = ref_ce(x, p.tgt, p.scale, p.N, p.Vp, p.V);
    double s = 0;
    for (double l : r.loss) s += l;
    return s * p.scale;
  };
  const Result r = run_tp<float>(p.logits, p.tgt, p.scale, p.N, p.Vp, p.V, 4);
  GradSample g;
  for (int n = 0; n < p.N; ++n)
    for (int j = 0; j < p.V; ++j) {
      const size_t i = size_t(n) * p.Vp + j;
      g.kernel.push_back(r.dlogits[i]);
      g.numeric.push_back(central_difference(loss, x[i]));
    }
  EXPECT_TRUE(close(g.kernel, g.numeric, 1e-3));
}

// bf16 vs fp32 on identical inputs, 2 ranks: loss rtol 2e-2, dlogits rtol
// 2e-2 (floor 1e-2 of max).
TEST(CrossEntropy, Bf16MatchesFloat) {
  Problem p = make_problem(8, 256, 250, 4);
  p.logits = round_bf16(p.logits);
  const Result f = run_tp<float>(p.logits, p.tgt, p.scale, p.N, p.Vp, p.V, 2);
  const Result b = run_tp<bf16>(p.logits, p.tgt, p.scale, p.N, p.Vp, p.V, 2);
  EXPECT_TRUE(close(b.loss, f.loss, 2e-2));
  EXPECT_TRUE(close(b.dlogits, f.dlogits, 2e-2));
}

// Out-of-place and in-place backward agree bitwise; repeated runs too.
TEST(CrossEntropy, InPlaceAndDeterministic) {
  const Problem p = make_problem(16, 1024, 1000, 5);
  const int N = p.N, V = p.Vp;
  vecf m(N), s(N), tl(N), loss(N);
  crossentropy_row_max(m.data(), p.logits.data(), N, V, p.V);
  crossentropy_sumexp(s.data(), tl.data(), p.logits.data(), m.data(), p.tgt.data(), N, V, 0, p.V);
  crossentropy_loss(loss.data(), m.data(), s.data(), tl.data(), N);
  vecf d(p.logits.size()), d2(p.logits.size()), inplace = p.logits;
  crossentropy_backward(d.data(), p.logits.data(), m.data(), s.data(), p.tgt.data(), p.scale, N, V, 0, p.V);
  crossentropy_backward(d2.data(), p.logits.data(), m.data(), s.data(), p.tgt.data(), p.scale, N, V, 0, p.V);
  crossentropy_backward(inplace.data(), inplace.data(), m.data(), s.data(), p.tgt.data(), p.scale, N, V, 0, p.V);
  EXPECT_TRUE(bitwise_equal(d, d2));
  EXPECT_TRUE(bitwise_equal(d, inplace));
  const Result r1 = run_tp<float>(p.logits, p.tgt, p.scale, N, V, p.V, 4);
  const Result r2 = run_tp<float>(p.logits, p.tgt, p.scale, N, V, p.V, 4);
  EXPECT_TRUE(bitwise_equal(r1.loss, r2.loss) && bitwise_equal(r1.dlogits, r2.dlogits));
}

}  // namespace
}  // namespace meshtrain::kernels
