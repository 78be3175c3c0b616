#include "meshtrain/comm/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <mpi.h>

namespace meshtrain {

double Watchdog::timeout_from_env(double fallback) {
  const char* v = std::getenv("MESHTRAIN_COMM_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  return (end != v && *end == '\0') ? t : fallback;
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
    // Half the limit is enough when a peer is known to be stopped or silent.
    const NodePeers* p = peers_.load(std::memory_order_acquire);
    if (waited > timeout_s_ / 2 && p && !p->stopped_peers(timeout_s_ / 2).empty()) fire(waited);
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
    if (peers.empty())
      peers = p->sees_other_nodes() ? "every rank on this node and the neighbouring nodes' leaders are alive (a "
                                      "mismatched call, or a silent rank on a node further away)"
              : p->size() > 1       ? "every rank on this node is in communication (a mismatched call, or the "
                                      "silent rank is on another node)"
                                    : "the silent rank is on another node";
    peers = "; " + peers;
  }
  const std::string limit = waited_s > timeout_s_ ? fmt::format("over the {:g} s limit", timeout_s_)
                                                  : fmt::format("half the {:g} s limit, waiting for a silent peer",
                                                                timeout_s_);
  std::fprintf(stderr, "[rank %d] error: %s on group '%s' (%lld bytes) has been blocked for %.1f s, %s "
               "(MESHTRAIN_COMM_TIMEOUT_S)%s; aborting\n",
               rank, name.c_str(), group_.load(std::memory_order_relaxed),
               static_cast<long long>(bytes_.load(std::memory_order_relaxed)), waited_s, limit.c_str(),
               peers.c_str());
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
