// The step's loose loops as kernels (kernels/tensor_ops.h, kernels/adamw.h)
// against double-precision references.
#include "meshtrain/kernels/tensor_ops.h"

#include "meshtrain/kernels/adamw.h"
#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

TEST(TensorOps, AccumulateConvertSquaredNorm) {
  const size_t n = 1031;
  const vecf a = randn(n, 1), b = randn(n, 2);
  vecf acc = a;
  accumulate(acc.data(), b.data(), n);
  double ref_norm = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(acc[i], a[i] + b[i]);
    ref_norm += double(acc[i]) * acc[i];
  }
  EXPECT_NEAR(squared_norm(acc.data(), n), ref_norm, 1e-12 * ref_norm);
  EXPECT_EQ(squared_norm(acc.data(), 0), 0.0);
  std::vector<bf16> lo(n);
  convert(lo.data(), a.data(), n);
  EXPECT_TRUE(bitwise_equal(lo, to_bf16(a)));
  vecf back(n);
  convert(back.data(), lo.data(), n);
  EXPECT_TRUE(bitwise_equal(back, round_bf16(a)));
}

TEST(TensorOps, BiasResidualAdd) {
  const int64_t rows = 7, cols = 33;
  const vecf out0 = randn(rows * cols, 3), bias = randn(cols, 4), res = randn(rows * cols, 5);
  for (int mode = 0; mode < 4; ++mode) {
    const bool with_bias = mode & 1, with_res = mode & 2;
    vecf out = out0;
    bias_residual_add(out.data(), with_bias ? bias.data() : nullptr, with_res ? res.data() : nullptr, rows, cols);
    vecd ref(out0.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        const size_t i = r * cols + j;
        ref[i] = double(out0[i]) + (with_bias ? bias[j] : 0.0) + (with_res ? res[i] : 0.0);
      }
    EXPECT_TRUE(close(out, ref, 1e-6)) << "mode " << mode;
  }
}

TEST(AdamWMultiTensor, MatchesTheFormulaPerTensor) {
  const std::vector<int64_t> sizes = {1, 17, 1000};
  std::vector<vecf> w, m, v, g;
  std::vector<std::vector<bf16>> lp;
  std::vector<AdamWTensor> list;
  for (size_t t = 0; t < sizes.size(); ++t) {
    w.push_back(randn(sizes[t], 10 + t));
    m.push_back(randn(sizes[t], 20 + t, 0.1f));
    vecf vv = randn(sizes[t], 30 + t, 0.1f);
    for (float& x : vv) x *= x;
    v.push_back(vv);
    g.push_back(randn(sizes[t], 40 + t));
    lp.emplace_back(sizes[t]);
  }
  const std::vector<vecf> w0 = w, m0 = m, v0 = v;
  for (size_t t = 0; t < sizes.size(); ++t)
    list.push_back({w[t].data(), m[t].data(), v[t].data(), g[t].data(), t == 1 ? lp[t].data() : nullptr, sizes[t],
                    t == 0 ? 0.0f : 0.1f});
  AdamWStep s;
  s.lr = 1e-2f, s.grad_scale = 0.5f, s.bc1 = 1 - 0.9f * 0.9f, s.bc2 = 1 - 0.95f * 0.95f;
  adamw_multi_tensor(list.data(), static_cast<int>(list.size()), s);
  for (size_t t = 0; t < sizes.size(); ++t) {
    vecd rw(sizes[t]);
    const double wd = t == 0 ? 0.0 : 0.1;
    for (int64_t i = 0; i < sizes[t]; ++i) {
      const double gi = double(g[t][i]) * s.grad_scale;
      const double mi = s.beta1 * double(m0[t][i]) + (1 - double(s.beta1)) * gi;
      const double vi = s.beta2 * double(v0[t][i]) + (1 - double(s.beta2)) * gi * gi;
      rw[i] = w0[t][i] - s.lr * ((mi / s.bc1) / (std::sqrt(vi / s.bc2) + s.eps) + wd * w0[t][i]);
    }
    EXPECT_TRUE(close(w[t], rw, 1e-5, 1e-3)) << "tensor " << t;
    if (t == 1) {
      EXPECT_TRUE(bitwise_equal(lp[t], to_bf16(w[t])));
    }
  }
}

}  // namespace
}  // namespace meshtrain::kernels
