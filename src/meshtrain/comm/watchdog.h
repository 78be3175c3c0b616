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
// followed by what the node's table of peers (node_peers.h) says of the
// ranks on this node that are dead, stopped or outside communication, and
// the heartbeat ring of the neighbouring nodes' leaders:
//   ...; on this node: rank 1 (pid 4242) is stopped (silent for 31 s)
//   ...; on another node: rank 8 (pid 77, host b) has sent no heartbeat for 16 s ...
// and calls MPI_Abort(MPI_COMM_WORLD, 1). When such a stopped or silent peer
// is known, half the timeout is enough. A peer that died (on this node, or a
// neighbouring node's leader) is reported within a period, whether or not a
// call is blocked:
//   [rank R] error: rank K (pid P) died; aborting That call comes from the watchdog's
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
#include <string>
#include <thread>

#include "meshtrain/comm/comm_stats.h"
#include "meshtrain/comm/node_peers.h"
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

  // The node's table, kept up to date and read on a time-out. Set once,
  // before the first call is armed; it must outlive the watchdog.
  void watch_peers(NodePeers* peers) { peers_.store(peers, std::memory_order_release); }

  // `group` must outlive the armed call (a Communicator's name does).
  void arm(CommOp op, const char* group, int64_t bytes) {
    op_.store(static_cast<int>(op), std::memory_order_relaxed);
    group_.store(group, std::memory_order_relaxed);
    bytes_.store(bytes, std::memory_order_relaxed);
    const int64_t now = now_ns();
    since_ns_.store(now, std::memory_order_release);
    if (NodePeers* p = peers_.load(std::memory_order_relaxed)) p->set_blocked_since(now);
  }
  void disarm() {
    since_ns_.store(0, std::memory_order_release);
    if (NodePeers* p = peers_.load(std::memory_order_relaxed)) p->set_blocked_since(0);
  }

 private:
  void run();
  [[noreturn]] void fire(double waited_s);
  [[noreturn]] void fire_dead_peer(const std::string& who);

  double timeout_s_;
  std::atomic<int64_t> since_ns_{0};  // 0: nothing blocked
  std::atomic<int> op_{0};
  std::atomic<const char*> group_{""};
  std::atomic<int64_t> bytes_{0};
  std::atomic<NodePeers*> peers_{nullptr};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace meshtrain
