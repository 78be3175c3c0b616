// FLOP counts: exact values on small shapes.
#include "meshtrain/kernels/flops.h"

#include <gtest/gtest.h>

namespace meshtrain::kernels {
namespace {

static_assert(matmul_forward_flops(2, 3, 4) == 48);

TEST(Flops, Matmul) {
  EXPECT_EQ(matmul_forward_flops(2, 3, 4), 48);
  EXPECT_EQ(matmul_backward_flops(2, 3, 4, true), 96);
  EXPECT_EQ(matmul_backward_flops(2, 3, 4, false), 48);
  EXPECT_EQ(matmul_forward_flops(2048, 384, 50304), int64_t{2} * 2048 * 384 * 50304);
}

TEST(Flops, Attention) {
  // B=2, T=4, H=3, hd=5: dense pairs 16, causal pairs 10.
  EXPECT_EQ(attention_pairs(4, false), 16);
  EXPECT_EQ(attention_pairs(4, true), 10);
  EXPECT_EQ(attention_forward_flops(2, 4, 3, 5, false), 4 * 2 * 3 * 5 * 16);
  EXPECT_EQ(attention_forward_flops(2, 4, 3, 5, true), 4 * 2 * 3 * 5 * 10);
  EXPECT_EQ(attention_backward_flops(2, 4, 3, 5, false), 10 * 2 * 3 * 5 * 16);
  EXPECT_EQ(attention_backward_flops(2, 4, 3, 5, true), 10 * 2 * 3 * 5 * 10);
  EXPECT_EQ(attention_forward_flops(1, 1, 1, 64, true), 256);
  // bench shape: B=8, T=256, H=6, hd=64
  EXPECT_EQ(attention_forward_flops(8, 256, 6, 64, false), int64_t{4} * 8 * 6 * 64 * 256 * 256);
  EXPECT_EQ(attention_forward_flops(8, 256, 6, 64, true), int64_t{4} * 8 * 6 * 64 * 256 * 257 / 2);
  EXPECT_EQ(2 * attention_backward_flops(8, 256, 6, 64, true), 5 * attention_forward_flops(8, 256, 6, 64, true));
}

TEST(Flops, Elementwise) {
  EXPECT_EQ(layernorm_forward_flops(3, 5), 8 * 15);
  EXPECT_EQ(layernorm_backward_flops(3, 5), 13 * 15);
  EXPECT_EQ(gelu_forward_flops(7), 56);
  EXPECT_EQ(gelu_backward_flops(7), 112);
  EXPECT_EQ(crossentropy_forward_flops(2, 10), 80);
  EXPECT_EQ(crossentropy_backward_flops(2, 10), 80);
  EXPECT_EQ(residual_flops(9), 9);
  EXPECT_EQ(position_embedding_forward_flops(4, 6), 24);
  EXPECT_EQ(embedding_backward_flops(4, 6), 24);
}

}  // namespace
}  // namespace meshtrain::kernels
