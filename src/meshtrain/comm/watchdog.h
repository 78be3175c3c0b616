// Watchdog: ends the job when a communication call blocks too long, so a
// lost peer or a mismatched collective fails loudly instead of hanging.
//
// A Communicator arms the watchdog when a call starts to block (a blocking
// collective, send or receive, or a Request's wait()) and disarms it when the
// call returns; arming and disarming are a few relaxed atomic stores. A
// background thread checks a few times per timeout; if one call has been
// armed for more than the timeout it prints
//   [rank R] error: <op> on group '<group>' (<bytes> bytes) has been blocked
//   for <t> s, over the <timeout> s limit (MESHTRAIN_COMM_TIMEOUT_S); aborting
// and calls MPI_Abort(MPI_COMM_WORLD, 1). That call comes from the watchdog's
// own thread while the main thread sits inside MPI: strictly that needs
// MPI_THREAD_MULTIPLE, but the process is being torn down, and Open MPI ends
// the job this way under plain MPI_Init too.
//
// One thread arms at a time (a Communicator is used by one thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "meshtrain/comm/comm_stats.h"
#include "meshtrain/core/clock.h"

namespace meshtrain {

class Watchdog {
 public:
  static constexpr double kDefaultTimeoutS = 30.0;
  // MESHTRAIN_COMM_TIMEOUT_S when set to a number, else `fallback`.
  // A value <= 0 disables the watchdog.
  static double timeout_from_env(double fallback = kDefaultTimeoutS);

  // Starts the thread unless timeout_s <= 0.
  explicit Watchdog(double timeout_s = timeout_from_env());
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  bool enabled() const { return timeout_s_ > 0; }

  // `group` must outlive the armed call (a Communicator's name does).
  void arm(CommOp op, const char* group, int64_t bytes) {
    op_.store(static_cast<int>(op), std::memory_order_relaxed);
    group_.store(group, std::memory_order_relaxed);
    bytes_.store(bytes, std::memory_order_relaxed);
    since_ns_.store(now_ns(), std::memory_order_release);
  }
  void disarm() { since_ns_.store(0, std::memory_order_release); }

 private:
  void run();
  [[noreturn]] void fire(double waited_s);

  double timeout_s_;
  std::atomic<int64_t> since_ns_{0};  // 0: nothing blocked
  std::atomic<int> op_{0};
  std::atomic<const char*> group_{""};
  std::atomic<int64_t> bytes_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace meshtrain
