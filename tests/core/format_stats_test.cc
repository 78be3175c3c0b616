#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/format.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/core/text.h"

namespace meshtrain {
namespace {

TEST(Format, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024), "3.0 GiB");
  EXPECT_EQ(format_bytes(-2048), "-2.0 KiB");
}

TEST(Text, AWordIsBoundedByNonAlphanumerics) {
  EXPECT_TRUE(has_word("deepspeed-mics", "mics"));
  EXPECT_TRUE(has_word("mics", "mics"));
  EXPECT_TRUE(has_word("dynamics; mics (8)", "mics"));  // the second occurrence
  EXPECT_FALSE(has_word("fluid dynamics", "mics"));
  EXPECT_FALSE(has_word("micsx", "mics"));
  EXPECT_FALSE(has_word("", "mics"));
}

TEST(Format, RateAndDuration) {
  EXPECT_EQ(format_rate(12.3e9), "12.30 GB/s");
  EXPECT_EQ(format_rate(500), "500 B/s");
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(187), "3m07s");
  EXPECT_EQ(format_duration(7500), "2h05m");
}

TEST(Stats, MedianAndQuantile) {
  EXPECT_EQ(median_of({}), 0.0);
  EXPECT_EQ(median_of({3, 1, 2}), 2.0);
  EXPECT_EQ(median_of({4, 1, 2, 3}), 2.5);
  EXPECT_EQ(quantile_of({0, 10}, 0.25), 2.5);
  EXPECT_EQ(quantile_of({5, 1, 9}, 1.0), 9.0);
}

// Spearman: 1 for any increasing relation, -1 for a decreasing one, ties at
// their mean rank, 0 where a sample is constant or too short.
TEST(Stats, Spearman) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 100, 1000, 10000}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ranks (0, 1.5, 1.5, 3) against (0, 1, 2, 3): 4.5 / sqrt(4.5 x 5).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / std::sqrt(4.5 * 5), 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);  // 1 - 6 x 4 / (5 x 24)
  EXPECT_DOUBLE_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0.0);
  EXPECT_DOUBLE_EQ(spearman({1}, {1}), 0.0);
}

}  // namespace
}  // namespace meshtrain
