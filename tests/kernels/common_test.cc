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

}  // namespace
}  // namespace meshtrain::kernels::cpu
