#include <gtest/gtest.h>

#include "meshtrain/core/format.h"
#include "meshtrain/core/stats.h"

namespace meshtrain {
namespace {

TEST(Format, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024), "3.0 GiB");
  EXPECT_EQ(format_bytes(-2048), "-2.0 KiB");
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

}  // namespace
}  // namespace meshtrain
