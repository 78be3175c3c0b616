// GPU against CPU: GELU, residual adds, casts, bias + residual rows,
// gradient accumulation, squared norm, multi-tensor AdamW. Odd sizes so that
// no vector width or block size divides them. Tolerances: fp32 1e-5
// relative (the CPU's exp is a polynomial within 5e-7); bf16 1.6e-2 (two
// bf16 roundings); AdamW 1e-6 with a floor of 10% of the largest value (the
// device fuses multiply-adds); squared norm 1e-10 (double sums in another order).
#include <limits>
#include <memory>

#include "meshtrain/kernels/adamw.h"
#include "meshtrain/kernels/gelu.h"
#include "meshtrain/kernels/gpu/kernels.h"
#include "meshtrain/kernels/residual.h"
#include "meshtrain/kernels/tensor_ops.h"

#include "gpu_testing.h"

namespace meshtrain {
namespace {

using namespace mt_test;

template <class T> class GpuElementwise : public ::testing::Test {};
using Types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(GpuElementwise, Types);

TYPED_TEST(GpuElementwise, GeluMatchesCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  for (size_t n : {size_t{1}, size_t{37}, size_t{100003}}) {
    const auto x = make<T>(randn(n, 1, 3.0f)), dy = make<T>(randn(n, 2));
    std::vector<T> y(n), dx(n);
    kernels::gelu_forward(y.data(), x.data(), n);
    kernels::gelu_backward(dx.data(), x.data(), dy.data(), n);
    DeviceVec<T> gx(x), gdy(dy), gy(n), gdx(n);
    gpu::gelu_forward(gy.get(), gx.get(), n);
    gpu::gelu_backward(gdx.get(), gx.get(), gdy.get(), n);
    EXPECT_TRUE(close(as_float(gy.host()), as_float(y), tol<T>(1e-5))) << "forward n=" << n;
    EXPECT_TRUE(close(as_float(gdx.host()), as_float(dx), tol<T>(1e-5))) << "backward n=" << n;
  }
}

TYPED_TEST(GpuElementwise, ResidualAndBiasMatchCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  const int64_t rows = 13, cols = 257;
  const size_t n = rows * cols;
  const auto a = make<T>(randn(n, 3)), b = make<T>(randn(n, 4)), bias = make<T>(randn(cols, 5));
  std::vector<T> sum(n), acc = a, rowsum = a;
  kernels::residual_forward(sum.data(), a.data(), b.data(), n);
  kernels::add_inplace(acc.data(), b.data(), n);
  kernels::bias_residual_add(rowsum.data(), bias.data(), b.data(), rows, cols);
  DeviceVec<T> ga(a), gb(b), gbias(bias), gsum(n), gacc(a), grow(a);
  gpu::residual_forward(gsum.get(), ga.get(), gb.get(), n);
  gpu::add_inplace(gacc.get(), gb.get(), n);
  gpu::bias_residual_add(grow.get(), gbias.get(), gb.get(), rows, cols);
  EXPECT_TRUE(close(as_float(gsum.host()), as_float(sum), tol<T>(1e-6)));
  EXPECT_TRUE(close(as_float(gacc.host()), as_float(acc), tol<T>(1e-6)));
  EXPECT_TRUE(close(as_float(grow.host()), as_float(rowsum), tol<T>(1e-6)));
  // Bias only (no residual): the tensor-parallel row layer's case.
  std::vector<T> bias_only = a;
  kernels::bias_residual_add<T>(bias_only.data(), bias.data(), nullptr, rows, cols);
  DeviceVec<T> gbo(a);
  gpu::bias_residual_add<T>(gbo.get(), gbias.get(), nullptr, rows, cols);
  EXPECT_TRUE(close(as_float(gbo.host()), as_float(bias_only), tol<T>(1e-6)));
}

TEST(GpuTensorOps, ConvertRoundsLikeTheHost) {
  MT_REQUIRE_GPU();
  vecf x = randn(4099, 6, 100.0f);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = 1.0f + 1.0f / 256;  // a tie: rounds to even
  x[3] = std::numeric_limits<float>::infinity();
  const auto expected = to_bf16(x);
  DeviceVec<float> gx(x);
  DeviceVec<bf16> gy(x.size());
  gpu::convert(gy.get(), gx.get(), x.size());
  std::vector<bf16> y = gy.host();
  EXPECT_TRUE(bitwise_equal(y, expected));
  DeviceVec<float> back(x.size());
  gpu::convert(back.get(), gy.get(), x.size());
  EXPECT_TRUE(bitwise_equal(back.host(), from_bf16(expected)));
}

TEST(GpuTensorOps, AccumulateAndSquaredNorm) {
  MT_REQUIRE_GPU();
  for (size_t n : {size_t{1}, size_t{999}, size_t{1} << 20 | 7}) {
    const vecf a = randn(n, 7), b = randn(n, 8);
    vecf acc = a;
    kernels::accumulate(acc.data(), b.data(), n);
    DeviceVec<float> ga(a), gb(b);
    gpu::accumulate(ga.get(), gb.get(), n);
    EXPECT_TRUE(bitwise_equal(ga.host(), acc)) << "n=" << n;  // one fp32 add each: exact
    const double cpu = kernels::squared_norm(acc.data(), n), dev = gpu::squared_norm(ga.get(), n);
    EXPECT_NEAR(dev, cpu, 1e-10 * cpu) << "n=" << n;
    EXPECT_EQ(dev, gpu::squared_norm(ga.get(), n)) << "the same sum twice";
  }
}

TEST(GpuAdamW, MultiTensorMatchesCpu) {
  MT_REQUIRE_GPU();
  // 40 tensors (two launches of up to 32), sizes from 1 to ~70k, some
  // without decay, half with a bf16 copy.
  const int count = 40;
  std::vector<vecf> w, m, v, g;
  std::vector<std::vector<bf16>> lp;
  for (int t = 0; t < count; ++t) {
    const size_t n = 1 + (size_t(t) * 7919) % 70001;
    w.push_back(randn(n, 100 + t));
    m.push_back(randn(n, 200 + t, 0.1f));
    vecf vv = randn(n, 300 + t, 0.01f);
    for (float& x : vv) x = x * x;
    v.push_back(vv);
    g.push_back(randn(n, 400 + t));
    lp.emplace_back(n);
  }
  std::vector<std::unique_ptr<DeviceVec<float>>> dw, dm, dv, dg;
  std::vector<std::unique_ptr<DeviceVec<bf16>>> dl;
  std::vector<kernels::AdamWTensor> host(count), dev(count);
  for (int t = 0; t < count; ++t) {
    dw.push_back(std::make_unique<DeviceVec<float>>(w[t]));
    dm.push_back(std::make_unique<DeviceVec<float>>(m[t]));
    dv.push_back(std::make_unique<DeviceVec<float>>(v[t]));
    dg.push_back(std::make_unique<DeviceVec<float>>(g[t]));
    dl.push_back(std::make_unique<DeviceVec<bf16>>(lp[t].size()));
    const float wd = t % 3 ? 0.1f : 0.0f;
    const bool low = t % 2;
    host[t] = {w[t].data(), m[t].data(), v[t].data(), g[t].data(), low ? lp[t].data() : nullptr,
               int64_t(w[t].size()), wd};
    dev[t] = {dw[t]->get(), dm[t]->get(), dv[t]->get(), dg[t]->get(), low ? dl[t]->get() : nullptr,
              int64_t(w[t].size()), wd};
  }
  kernels::AdamWStep s;
  s.lr = 3e-3f, s.grad_scale = 0.7f, s.bc1 = 1 - 0.9f * 0.9f * 0.9f, s.bc2 = 1 - 0.95f * 0.95f * 0.95f;
  kernels::adamw_multi_tensor(host.data(), count, s);
  gpu::adamw_multi_tensor(dev.data(), count, s);
  // The device contracts a * b + c into one FMA, the portable CPU build does
  // not: m, v and w are differences of terms up to the largest value, so the
  // floor is a fp32 rounding of that (1e-7 of max|expected|), not of each
  // result (m = 0.9 m + 0.07 g lands near zero for some elements).
  for (int t = 0; t < count; ++t) {
    EXPECT_TRUE(close(dw[t]->host(), w[t], 1e-6, 0.1)) << "w of tensor " << t;
    EXPECT_TRUE(close(dm[t]->host(), m[t], 1e-6, 0.1)) << "m of tensor " << t;
    EXPECT_TRUE(close(dv[t]->host(), v[t], 1e-6, 0.1)) << "v of tensor " << t;
    if (t % 2) {
      EXPECT_TRUE(close(from_bf16(dl[t]->host()), from_bf16(lp[t]), 8e-3)) << "bf16 copy " << t;
    }
  }
}

}  // namespace
}  // namespace meshtrain
