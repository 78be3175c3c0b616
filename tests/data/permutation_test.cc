#include "meshtrain/data/permutation.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace meshtrain::data {
namespace {

TEST(Permutation, IsABijectionForManySizes) {
  for (uint64_t n : {1u, 2u, 3u, 4u, 5u, 7u, 16u, 17u, 100u, 255u, 256u, 257u, 1000u, 4099u}) {
    const Permutation p(n, 42 + n);
    std::vector<int> hits(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = p(i);
      ASSERT_LT(v, n) << "n=" << n;
      ++hits[v];
    }
    for (uint64_t v = 0; v < n; ++v) ASSERT_EQ(hits[v], 1) << "n=" << n << " v=" << v;
  }
}

TEST(Permutation, PureFunctionOfKey) {
  const Permutation a(1000, 7), b(1000, 7), c(1000, 8);
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a(i), b(i));
    same += a(i) == c(i);
  }
  // Two unrelated permutations agree at about one place.
  EXPECT_LT(same, 10);
}

TEST(Permutation, LooksRandom) {
  // For a uniformly random permutation of n, E|p(i) - i| ~ n/3 and the
  // expected number of fixed points is 1.
  const uint64_t n = 3000;
  const Permutation p(n, 123);
  double displacement = 0;
  int fixed = 0, ascents = 0;
  for (uint64_t i = 0; i < n; ++i) {
    displacement += std::fabs(static_cast<double>(p(i)) - static_cast<double>(i));
    fixed += p(i) == i;
    if (i + 1 < n) ascents += p(i + 1) > p(i);
  }
  EXPECT_NEAR(displacement / n, n / 3.0, n * 0.03);
  EXPECT_LT(fixed, 8);
  EXPECT_NEAR(ascents, (n - 1) / 2.0, 120);  // sd ~ sqrt(n/12) = 16
}

}  // namespace
}  // namespace meshtrain::data
