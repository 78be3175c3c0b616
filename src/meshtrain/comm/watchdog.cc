#include "meshtrain/comm/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <mpi.h>

namespace meshtrain {

double Watchdog::timeout_from_env(double fallback) {
  const char* v = std::getenv("MESHTRAIN_COMM_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  return (end != v && *end == '\0') ? t : fallback;
}

int64_t Watchdog::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Watchdog::Watchdog(double timeout_s) : timeout_s_(timeout_s) {
  if (enabled()) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  // Check about ten times per timeout, at most once per second.
  const auto period = std::chrono::duration<double>(std::min(1.0, timeout_s_ / 10.0));
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (NodePeers* p = peers_.load(std::memory_order_acquire)) {
      p->beat();
      if (const std::string who = p->dead_peer(); !who.empty()) fire_dead_peer(who);
    }
    const int64_t since = since_ns_.load(std::memory_order_acquire);
    if (since == 0) continue;
    const double waited = static_cast<double>(now_ns() - since) * 1e-9;
    if (waited > timeout_s_) fire(waited);
  }
}

void Watchdog::fire(double waited_s) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto op = static_cast<CommOp>(op_.load(std::memory_order_relaxed));
  const std::string name(comm_op_name(op));
  // Which peer keeps this rank waiting, as far as this node can tell.
  std::string peers;
  if (const NodePeers* p = peers_.load(std::memory_order_acquire)) {
    peers = p->silent_peers(timeout_s_ / 2);
    peers = peers.empty() ? (p->size() > 1 ? "; every rank on this node is in communication (a mismatched call, "
                                             "or the silent rank is on another node)"
                                           : "; the silent rank is on another node")
                          : "; on this node: " + peers;
  }
  std::fprintf(stderr,
               "[rank %d] error: %s on group '%s' (%lld bytes) has been blocked for %.1f s, "
               "over the %g s limit (MESHTRAIN_COMM_TIMEOUT_S)%s; aborting\n",
               rank, name.c_str(), group_.load(std::memory_order_relaxed),
               static_cast<long long>(bytes_.load(std::memory_order_relaxed)), waited_s, timeout_s_, peers.c_str());
  std::fflush(stderr);
  NodePeers::leave();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void Watchdog::fire_dead_peer(const std::string& who) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "[rank %d] error: %s; aborting\n", rank, who.c_str());
  std::fflush(stderr);
  NodePeers::leave();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace meshtrain
