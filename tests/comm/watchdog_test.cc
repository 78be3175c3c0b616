#include "meshtrain/comm/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace meshtrain {
namespace {

TEST(Watchdog, TimeoutFromEnvironment) {
  ::unsetenv("MESHTRAIN_COMM_TIMEOUT_S");
  EXPECT_EQ(Watchdog::timeout_from_env(), Watchdog::kDefaultTimeoutS);
  EXPECT_EQ(Watchdog::timeout_from_env(7), 7);
  ::setenv("MESHTRAIN_COMM_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(Watchdog::timeout_from_env(), 2.5);
  ::setenv("MESHTRAIN_COMM_TIMEOUT_S", "soon", 1);
  EXPECT_EQ(Watchdog::timeout_from_env(), Watchdog::kDefaultTimeoutS);
  ::setenv("MESHTRAIN_COMM_TIMEOUT_S", "0", 1);
  EXPECT_EQ(Watchdog::timeout_from_env(), 0);
  ::unsetenv("MESHTRAIN_COMM_TIMEOUT_S");
}

TEST(Watchdog, DisabledStartsNoThreadAndShortCallsDoNotFire) {
  Watchdog off(0);
  EXPECT_FALSE(off.enabled());
  off.arm(CommOp::all_reduce, "tp", 4);
  off.disarm();

  // Calls shorter than the timeout, and time spent disarmed, never fire.
  Watchdog w(0.3);
  EXPECT_TRUE(w.enabled());
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
  while (std::chrono::steady_clock::now() < end) {
    w.arm(CommOp::recv, "pp", 16);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.disarm();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace
}  // namespace meshtrain
