// The one clock of meshtrain. now_s() and now_ns() read
// std::chrono::steady_clock: monotonic, and on Linux the same clock
// (CLOCK_MONOTONIC) in every process of a host, so timestamps of ranks on one
// node line up. Communication events, kernel timers, the watchdog, traces and
// the training loop all use it.
#pragma once

#include <chrono>
#include <cstdint>

namespace meshtrain {

// Seconds since the steady clock's epoch.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Nanoseconds since the same epoch (integer: for atomics and sums).
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Measures from construction (or restart()) to now.
class Stopwatch {
 public:
  Stopwatch() : start_(now_s()) {}
  void restart() { start_ = now_s(); }
  double start_s() const { return start_; }
  double elapsed_s() const { return now_s() - start_; }

 private:
  double start_;
};

// Adds the seconds between its construction and destruction to `total`:
//   { ScopedTimer t(stats.forward_s); run_forward(); }
class ScopedTimer {
 public:
  explicit ScopedTimer(double& total) : total_(total), start_(now_s()) {}
  ~ScopedTimer() { total_ += now_s() - start_; }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double& total_;
  double start_;
};

}  // namespace meshtrain
