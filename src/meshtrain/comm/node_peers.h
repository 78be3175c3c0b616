// NodePeers: what the ranks of one node know of each other without
// communicating, so that a failure names the rank that caused it. Each rank
// owns one slot of a table in memory its node's ranks share (a /dev/shm file,
// unlinked once every rank has mapped it, so nothing is left behind): its
// world rank, its process id, a heartbeat its watchdog thread advances, and
// since when its main thread has been blocked in communication (0: not
// blocked). From the table a rank tells, for each peer on its node:
//   died     the process is gone (or a zombie);
//   stopped  the process is stopped (SIGSTOP, a debugger), or its heartbeat
//            has not moved for `silent_s`;
//   busy     it has not been in a communication call for `silent_s` while
//            others wait for it (hung in a computation, or far behind).
// The watchdog (watchdog.h) adds this to its message when a call blocks too
// long, and reports a dead peer itself; the SIGTERM a launcher sends every
// rank when one died is answered with a line naming the dead rank.
// Ranks on other nodes are seen through the node leaders' heartbeat ring
// (node_ring.h): a neighbouring node's leader that died or went silent is
// named the same way (its other ranks are named by their own node).
//
// A node is what MPI_COMM_TYPE_SHARED groups, split further into groups of
// MESHTRAIN_RANKS_PER_NODE consecutive ranks when that is set (1: every rank
// counts as a node of its own, to test the ring on one machine).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/comm/node_ring.h"

namespace meshtrain {

class NodePeers {
 public:
  // Collective over `world`. Without shared memory the table is empty
  // (every query answers "" and the rest is a no-op).
  explicit NodePeers(MPI_Comm world);
  ~NodePeers();  // leaves the table first: a rank that ended normally is not "dead"
  NodePeers(const NodePeers&) = delete;
  NodePeers& operator=(const NodePeers&) = delete;

  int size() const { return size_; }  // ranks on this node

  // This rank: a heartbeat (watchdog thread) and its communication state.
  void beat();
  // steady_ns: when a blocking call started (steady clock), 0 when it ended.
  void set_blocked_since(int64_t steady_ns);

  // "rank 3 (pid 1234) died" for the first dead peer, "" if none.
  std::string dead_peer() const;
  // Every peer that is dead, stopped or busy for more than silent_s, one
  // clause each, "; "-separated, after "on this node: " or "on another
  // node: "; "" if none.
  std::string silent_peers(double silent_s) const;
  // Only the peers that are stopped (or, on another node, sent no heartbeat)
  // for more than silent_s: the ones a blocked call is surely waiting for.
  std::string stopped_peers(double silent_s) const;
  bool sees_other_nodes() const { return ring_ && ring_->active(); }

  // Installs a SIGTERM handler that, when a peer on this node has died,
  // prints "[rank R] error: rank K (pid P) died; the launcher is ending the
  // job" before this process ends with the default action. One table per
  // process takes part (the last made).
  void name_dead_peer_on_sigterm();

  // This process leaves every table (its slot reads as gone, not dead) and
  // says goodbye on the ring: called before a deliberate MPI_Abort, so that
  // peers do not report the aborting rank as the one that died.
  // Async-signal-safe.
  static void leave();

  struct alignas(64) Slot {
    std::atomic<int64_t> beat_ns{0};
    std::atomic<int64_t> blocked_since_ns{0};
    std::atomic<int64_t> idle_since_ns{0};  // end of the last communication call
    std::atomic<int32_t> pid{0};  // 0: not (or no longer) taking part
    int32_t world_rank = -1;
  };

 private:
  std::string local_peers(double silent_s, bool stopped_only) const;
  Slot* slots_ = nullptr;
  Slot* mine_ = nullptr;
  std::unique_ptr<NodeRing> ring_;
  int size_ = 0;
  size_t bytes_ = 0;
};

}  // namespace meshtrain
