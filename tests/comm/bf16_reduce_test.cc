#include <gtest/gtest.h>

#include "meshtrain/comm/mpi_types.h"

namespace meshtrain {
namespace {

TEST(Bf16Reduce, SumsThroughFp32AndRounds) {
  const bf16 in[3] = {bf16(1.0f), bf16(-2.5f), bf16(256.0f)};
  bf16 io[3] = {bf16(2.0f), bf16(0.5f), bf16(1.0f)};
  bf16_reduce(ReduceOp::sum, in, io, 3);
  EXPECT_EQ(to_f32(io[0]), 3.0f);
  EXPECT_EQ(to_f32(io[1]), -2.0f);
  EXPECT_EQ(to_f32(io[2]), 256.0f);  // 257 is not a bf16; nearest even is 256
}

TEST(Bf16Reduce, MaxAndMin) {
  const bf16 in[2] = {bf16(1.0f), bf16(-3.0f)};
  bf16 mx[2] = {bf16(2.0f), bf16(-4.0f)};
  bf16 mn[2] = {bf16(2.0f), bf16(-4.0f)};
  bf16_reduce(ReduceOp::max, in, mx, 2);
  bf16_reduce(ReduceOp::min, in, mn, 2);
  EXPECT_EQ(to_f32(mx[0]), 2.0f);
  EXPECT_EQ(to_f32(mx[1]), -3.0f);
  EXPECT_EQ(to_f32(mn[0]), 1.0f);
  EXPECT_EQ(to_f32(mn[1]), -4.0f);
}

TEST(Bf16Reduce, CommutesBitForBit) {
  for (int i = 0; i < 1000; ++i) {
    const bf16 a(0.1f * i - 37.3f), b(1.7f - 0.013f * i * i);
    bf16 ab = b, ba = a;
    bf16_reduce(ReduceOp::sum, &a, &ab, 1);
    bf16_reduce(ReduceOp::sum, &b, &ba, 1);
    EXPECT_EQ(ab.bits, ba.bits);
  }
}

}  // namespace
}  // namespace meshtrain
