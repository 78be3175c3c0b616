// The kernels' internal element conversion and exp approximation.
#include "meshtrain/kernels/cpu/common.h"

#include <limits>

#include "testing.h"

namespace meshtrain::kernels::cpu {
namespace {

// st<bf16> is bit-identical to meshtrain::bf16's conversion (round to
// nearest even, NaN stays NaN), on special values and a sweep of bit
// patterns; ld is exact.
TEST(KernelCommon, Bf16ConversionMatchesCore) {
  std::vector<float> vals = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f, 1.01171875f, 3.4e38f, -3.4e38f, 1e-40f,
                             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  for (uint32_t u = 0; u < 0xffffffffu - 65521u * 7; u += 65521u * 7) vals.push_back(std::bit_cast<float>(u));
  for (float v : vals) {
    ASSERT_EQ(st<bf16>(v).bits, bf16(v).bits) << v;
    const bf16 b(v);
    const float back = ld(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(back), std::bit_cast<uint32_t>(static_cast<float>(b)));
  }
}

// exp_approx: relative error below 5e-7 on [-87, 88] against std::exp in
// double; 0 below -87 and for -inf.
TEST(KernelCommon, ExpApproxAccuracy) {
  double worst = 0.0;
  for (int i = 0; i <= 400000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 400000.0f;
    const double e = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(exp_approx(x) - e) / e);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(exp_approx(-87.5f), 0.0f);
  EXPECT_EQ(exp_approx(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
}

// The vector helpers agree with the scalar ones: bf16 vector store
// bit-identical to st<bf16>, vector load exact, vexp within 1 ulp-ish
// (rtol 1e-6) of exp_approx, tree sum and max, partial loads and stores.
TEST(KernelCommon, VectorHelpersMatchScalar) {
  std::vector<float> vals;
  for (uint32_t u = 0; u < 0xffffffffu - 40009u * 13; u += 40009u * 13) vals.push_back(std::bit_cast<float>(u));
  vals.resize(vals.size() / kVL * kVL);
  std::vector<bf16> out(vals.size());
  for (size_t i = 0; i < vals.size(); i += kVL) vstore(out.data() + i, vload(vals.data() + i));
  for (size_t i = 0; i < vals.size(); ++i) ASSERT_EQ(out[i].bits, st<bf16>(vals[i]).bits) << vals[i];
  std::vector<float> back(vals.size());
  for (size_t i = 0; i < vals.size(); i += kVL) vstore(back.data() + i, vload(out.data() + i));
  for (size_t i = 0; i < vals.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(ld(out[i])));

  alignas(64) float x[kVL];
  for (int i = 0; i < kVL; ++i) x[i] = -90.0f + 11.7f * static_cast<float>(i);
  const vfloat e = vexp(vload(x));
  for (int i = 0; i < kVL; ++i) EXPECT_NEAR(e[i], exp_approx(x[i]), 1e-6 * exp_approx(x[i])) << x[i];
  EXPECT_EQ(e[0], 0.0f);  // x = -90

  float sum = 0.0f, mx = -1e30f;
  for (int i = 0; i < kVL; ++i) {
    x[i] = static_cast<float>((i * 7) % kVL) - 3.5f;
    sum += x[i];
    mx = std::max(mx, x[i]);
  }
  EXPECT_EQ(hsum(vload(x)), sum);
  EXPECT_EQ(hmax(vload(x)), mx);

  const vfloat p = vload_partial(x, 3, -1.0f);
  for (int i = 0; i < kVL; ++i) EXPECT_EQ(p[i], i < 3 ? x[i] : -1.0f);
  std::vector<bf16> part(kVL, bf16(5.0f));
  vstore_partial(part.data(), p, 3);
  for (int i = 0; i < kVL; ++i) EXPECT_EQ(static_cast<float>(part[i]), i < 3 ? x[i] : 5.0f);
}

}  // namespace
}  // namespace meshtrain::kernels::cpu
