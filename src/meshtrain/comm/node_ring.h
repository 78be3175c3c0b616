// NodeRing: how a rank on another node that died or went silent gets named.
// The node leaders (the first rank of each node, as NodePeers counts nodes)
// form a ring of TCP connections, each connected to the next leader and
// accepting the previous one; every watchdog period a leader sends one byte
// ('h') to both neighbours and reads what they sent. Of a neighbour it tells:
//   died    its connection closed without a goodbye ('b'): the process is
//           gone (its kernel closed the socket), known within one period;
//   silent  no byte for silent_s: stopped (SIGSTOP), hung, or its node down.
// A leader says goodbye when it leaves normally, before a deliberate abort
// and when a signal ends it, so none of these reads as a death. A failure of
// a rank that is not a leader is seen by its node's ranks (node_peers.h).
// Every rank takes part in the collective set-up and learns each leader's
// host, process id and node (for the messages). Where the ring cannot be
// built (one node, no IPv4 address, a connection refused or timing out) it
// is off on every rank: the queries answer "" and the rest is a no-op.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace meshtrain {

class NodeRing {
 public:
  // Collective over `world`; `node` holds this rank's node (local rank 0 is
  // its leader).
  NodeRing(MPI_Comm world, MPI_Comm node, double connect_timeout_s = 10);
  ~NodeRing();  // says goodbye and closes
  NodeRing(const NodeRing&) = delete;
  NodeRing& operator=(const NodeRing&) = delete;

  bool active() const { return fds_[0] >= 0; }  // this rank is a leader in a ring

  // Leader: one heartbeat to each neighbour, and reads theirs (the
  // watchdog's thread, once per period).
  void beat();
  // "rank 4 (pid 99, host b) died (its node's heartbeat connection closed)"
  // for a dead neighbour, "" if none.
  std::string dead_peer() const;
  // Each neighbour silent for more than silent_s, "; "-separated; "" if none.
  std::string silent_peers(double silent_s) const;

  // Async-signal-safe (recv, write): for a signal handler. Reads what the
  // neighbours sent; writes "rank R (pid P, host H) died" into buf (size n)
  // and returns true when one closed its connection without a goodbye.
  bool dead_peer_signal_safe(char* buf, size_t n);
  // Async-signal-safe: sends the goodbye to both neighbours.
  void goodbye();

 private:
  struct Neighbour {
    int world_rank = -1, pid = 0;
    char host[64] = {0};
    std::atomic<int64_t> heard_ns{0};
    std::atomic<int> state{0};  // 0 alive, 1 left (said goodbye), 2 died
  };
  void drain(int i);  // reads neighbour i's socket; async-signal-safe
  int fds_[2] = {-1, -1};  // to the next leader, from the previous one
  Neighbour peers_[2];
};

}  // namespace meshtrain
