#include "meshtrain/core/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace meshtrain {
namespace {

TEST(Clock, NowIsMonotonic) {
  double prev = now_s();
  for (int i = 0; i < 1000; ++i) {
    const double t = now_s();
    EXPECT_GE(t, prev);
    prev = t;
  }
}

TEST(Clock, ScopedTimerAccumulates) {
  double total = 1.0;
  {
    ScopedTimer t(total);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(total, 1.019);
  EXPECT_LT(total, 1.5);
  const double after_one = total;
  { ScopedTimer t(total); }
  EXPECT_GE(total, after_one);
}

TEST(Clock, StopwatchMeasuresFromStart) {
  Stopwatch w;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(w.elapsed_s(), 0.0095);
  w.restart();
  EXPECT_LT(w.elapsed_s(), 0.5);
}

}  // namespace
}  // namespace meshtrain
