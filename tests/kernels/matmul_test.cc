// matmul_forward / matmul_backward against a double-precision reference,
// finite differences, accumulate semantics, odd shapes, bf16, determinism.
#include "meshtrain/kernels/matmul.h"

#include <fmt/format.h>

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

// out[M,N] = inp[M,K] W[N,K]^T + bias
vecd ref_matmul(const vecd& inp, const vecd& w, const vecd* bias, int M, int K, int N) {
  vecd out(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = bias ? (*bias)[n] : 0.0;
      for (int k = 0; k < K; ++k) s += inp[m * K + k] * w[n * K + k];
      out[m * N + n] = s;
    }
  return out;
}

struct Shape {
  int M, K, N;
};

class MatmulShapes : public ::testing::TestWithParam<Shape> {};

// Float forward vs double reference: rtol 1e-5 with a floor of 10% of
// max|out| (fp32 rounding of K-term sums with cancellation).
constexpr double kFloor = 0.1;
TEST_P(MatmulShapes, ForwardMatchesDoubleReference) {
  const auto [M, K, N] = GetParam();
  const vecf inp = randn(size_t(M) * K, 1), w = randn(size_t(N) * K, 2), b = randn(N, 3);
  for (bool with_bias : {false, true}) {
    vecf out(size_t(M) * N, 123.0f);
    matmul_forward(out.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, M, K, N);
    const vecd bd = to_double(b);
    const vecd ref = ref_matmul(to_double(inp), to_double(w), with_bias ? &bd : nullptr, M, K, N);
    EXPECT_TRUE(close(out, ref, 1e-5, kFloor)) << "bias " << with_bias;
  }
}

// Backward with accumulation: dweight/dbias start from random values and
// must end at start + gradient; dinp overwritten or accumulated. Compared
// with the exact gradients of loss = sum(out * G), rtol 1e-5 (floor as above).
TEST_P(MatmulShapes, BackwardAccumulatesExactGradients) {
  const auto [M, K, N] = GetParam();
  const vecf inp = randn(size_t(M) * K, 4), w = randn(size_t(N) * K, 5), g = randn(size_t(M) * N, 6);
  const vecf dw0 = randn(size_t(N) * K, 7), db0 = randn(N, 8), dx0 = randn(size_t(M) * K, 9);
  // exact gradients in double
  vecd dx(size_t(M) * K, 0.0), dw(size_t(N) * K, 0.0), db(N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const double gv = g[m * N + n];
      db[n] += gv;
      for (int k = 0; k < K; ++k) {
        dx[m * K + k] += gv * w[n * K + k];
        dw[n * K + k] += gv * inp[m * K + k];
      }
    }
  for (bool acc : {false, true}) {
    vecf dinp = dx0, dweight = dw0, dbias = db0;
    matmul_backward(dinp.data(), dweight.data(), dbias.data(), g.data(), inp.data(), w.data(), M, K, N, acc);
    vecd ex = dx, ew = dw, eb = db;
    for (size_t i = 0; i < ex.size(); ++i) ex[i] += acc ? dx0[i] : 0.0;
    for (size_t i = 0; i < ew.size(); ++i) ew[i] += dw0[i];
    for (size_t i = 0; i < eb.size(); ++i) eb[i] += db0[i];
    EXPECT_TRUE(close(dinp, ex, 1e-5, kFloor)) << "dinp, accumulate " << acc;
    EXPECT_TRUE(close(dweight, ew, 1e-5, kFloor)) << "dweight";
    EXPECT_TRUE(close(dbias, eb, 1e-5, kFloor)) << "dbias";
  }
  // nullptr dinp and dbias are skipped; dweight still accumulates.
  vecf dweight = dw0;
  matmul_backward<float>(nullptr, dweight.data(), nullptr, g.data(), inp.data(), w.data(), M, K, N, false);
  vecd ew = dw;
  for (size_t i = 0; i < ew.size(); ++i) ew[i] += dw0[i];
  EXPECT_TRUE(close(dweight, ew, 1e-5, kFloor));
}

// bf16 kernels vs the fp32 kernels on the same (bf16-representable) inputs:
// rtol 2e-2 (floor 1e-2 of max). Weight/bias gradients are fp32 in both.
TEST_P(MatmulShapes, Bf16MatchesFloat) {
  const auto [M, K, N] = GetParam();
  const vecf inp = round_bf16(randn(size_t(M) * K, 10)), w = round_bf16(randn(size_t(N) * K, 11));
  const vecf b = round_bf16(randn(N, 12)), g = round_bf16(randn(size_t(M) * N, 13));
  vecf out(size_t(M) * N);
  matmul_forward(out.data(), inp.data(), w.data(), b.data(), M, K, N);
  std::vector<bf16> out16(out.size());
  const auto inp16 = to_bf16(inp), w16 = to_bf16(w), b16 = to_bf16(b), g16 = to_bf16(g);
  matmul_forward(out16.data(), inp16.data(), w16.data(), b16.data(), M, K, N);
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));

  const vecf dx0 = round_bf16(randn(size_t(M) * K, 14)), dw0 = randn(size_t(N) * K, 15), db0 = randn(N, 16);
  vecf dinp = dx0, dweight = dw0, dbias = db0;
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), g.data(), inp.data(), w.data(), M, K, N, true);
  std::vector<bf16> dinp16 = to_bf16(dx0);
  vecf dweight16 = dw0, dbias16 = db0;
  matmul_backward(dinp16.data(), dweight16.data(), dbias16.data(), g16.data(), inp16.data(), w16.data(), M, K, N,
                  true);
  EXPECT_TRUE(close(from_bf16(dinp16), dinp, 2e-2));
  EXPECT_TRUE(close(dweight16, dweight, 2e-2));
  EXPECT_TRUE(close(dbias16, dbias, 2e-2));
}

// Two identical calls give bitwise identical results; the primitive cache
// does not grow on repeated shapes.
TEST_P(MatmulShapes, DeterministicAndCached) {
  const auto [M, K, N] = GetParam();
  const vecf inp = randn(size_t(M) * K, 17), w = randn(size_t(N) * K, 18), b = randn(N, 19);
  const vecf g = randn(size_t(M) * N, 20);
  auto once = [&] {
    vecf out(size_t(M) * N), dinp(size_t(M) * K), dw(size_t(N) * K, 0.0f), db(N, 0.0f);
    matmul_forward(out.data(), inp.data(), w.data(), b.data(), M, K, N);
    matmul_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), M, K, N, false);
    return std::vector<vecf>{out, dinp, dw, db};
  };
  const auto r1 = once();
  const size_t cached = matmul_cache_size();
  const auto r2 = once();
  EXPECT_EQ(matmul_cache_size(), cached);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_TRUE(bitwise_equal(r1[i], r2[i])) << "output " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulShapes,
                         ::testing::Values(Shape{1, 1, 1}, Shape{5, 7, 3}, Shape{17, 33, 19}, Shape{64, 48, 80},
                                           Shape{130, 97, 67}, Shape{257, 64, 300},
                                           Shape{33, 40, 8192 + 300}),  // weight gradient in 2 blocks
                         [](const auto& info) {
                           return fmt::format("{}x{}x{}", info.param.M, info.param.K, info.param.N);
                         });

// Finite differences of loss = sum(out * G) with the double reference,
// every element of inp, weight and bias; rtol 1e-3 (floor 1e-2 of max).
TEST(Matmul, GradientMatchesFiniteDifferences) {
  const int M = 6, K = 9, N = 5;
  const vecf inp = randn(M * K, 21), w = randn(N * K, 22), b = randn(N, 23), g = randn(M * N, 24);
  vecd xi = to_double(inp), xw = to_double(w), xb = to_double(b);
  const vecd gd = to_double(g);
  auto loss = [&] { return dot(ref_matmul(xi, xw, &xb, M, K, N), gd); };
  vecf dinp(M * K), dw(N * K, 0.0f), db(N, 0.0f);
  matmul_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), M, K, N, false);
  auto si = grad_check(loss, xi, dinp, 1000);
  auto sw = grad_check(loss, xw, dw, 1000);
  auto sb = grad_check(loss, xb, db, 1000);
  EXPECT_TRUE(close(si.kernel, si.numeric, 1e-3));
  EXPECT_TRUE(close(sw.kernel, sw.numeric, 1e-3));
  EXPECT_TRUE(close(sb.kernel, sb.numeric, 1e-3));
}

// dbias is a deterministic column sum: identical for 1 and 2 threads.
TEST(Matmul, BiasGradientIndependentOfThreadCount) {
  const int M = 1000, K = 8, N = 70;
  const vecf inp = randn(M * K, 25), w = randn(N * K, 26), g = randn(M * N, 27);
  vecf db1(N, 0.0f), db2(N, 0.0f);
  with_threads(1, [&] {
    matmul_backward<float>(nullptr, nullptr, db1.data(), g.data(), inp.data(), w.data(), M, K, N, false);
  });
  with_threads(2, [&] {
    matmul_backward<float>(nullptr, nullptr, db2.data(), g.data(), inp.data(), w.data(), M, K, N, false);
  });
  EXPECT_TRUE(bitwise_equal(db1, db2));
}

}  // namespace
}  // namespace meshtrain::kernels
