#include "meshtrain/comm/node_peers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include <fmt/format.h>

#include "meshtrain/comm/signal_safe.h"
#include "meshtrain/core/clock.h"

namespace meshtrain {

namespace {

// The state letter of /proc/<pid>/stat ('R', 'S', 'T', 'Z', ...); 0 when the
// process is gone. Async-signal-safe (open, read, close).
char process_state(int pid) {
  char path[40] = "/proc/";
  int n = 6;
  char digits[12];
  int d = 0;
  for (int v = pid; v > 0 && d < 11; v /= 10) digits[d++] = char('0' + v % 10);
  while (d > 0) path[n++] = digits[--d];
  std::memcpy(path + n, "/stat", 6);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[256];
  const ssize_t got = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (got <= 0) return 0;
  buf[got] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

bool dead(int pid) {
  const char s = process_state(pid);
  return s == 0 || s == 'Z' || s == 'X';
}

// The table the SIGTERM handler reads.
std::atomic<const NodePeers::Slot*> g_slots{nullptr};
std::atomic<int> g_size{0};
std::atomic<int> g_my_rank{-1};
// This process's slot in the last table made, and its ring.
std::atomic<NodePeers::Slot*> g_mine{nullptr};
std::atomic<NodeRing*> g_ring{nullptr};
std::atomic<bool> g_left{false};  // this process has reported its own failure

// "[rank R] error: <who> died; the launcher is ending the job" for the first
// dead peer on this node, else a neighbouring node's leader that died.
extern "C" void on_sigterm(int sig) {
  using namespace signal_safe;
  const NodePeers::Slot* slots = g_slots.load();
  const int size = g_size.load();
  char who[160] = {0};
  for (int i = 0; slots && i < size && who[0] == '\0'; ++i) {
    const int pid = slots[i].pid.load();
    if (pid == 0 || !dead(pid)) continue;
    size_t k = 0;
    put_str(who, sizeof(who), k, "rank ");
    put_int(who, sizeof(who), k, slots[i].world_rank);
    put_str(who, sizeof(who), k, " (pid ");
    put_int(who, sizeof(who), k, pid);
    put_str(who, sizeof(who), k, ") died");
    who[k] = '\0';
  }
  NodeRing* ring = g_ring.load();
  if (who[0] == '\0' && ring) ring->dead_peer_signal_safe(who, sizeof(who));
  if (who[0] != '\0' && !g_left.load()) {
    char line[256];
    size_t n = 0;
    put_str(line, sizeof(line), n, "[rank ");
    put_int(line, sizeof(line), n, g_my_rank.load());
    put_str(line, sizeof(line), n, "] error: ");
    put_str(line, sizeof(line), n, who);
    put_str(line, sizeof(line), n, "; the launcher is ending the job\n");
    [[maybe_unused]] const ssize_t w = ::write(2, line, n);
  }
  if (ring) ring->goodbye();  // this rank is ended, not dead
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// MESHTRAIN_RANKS_PER_NODE: ranks per node within one shared-memory node (0: all).
int ranks_per_node() {
  const char* v = std::getenv("MESHTRAIN_RANKS_PER_NODE");
  return v && *v ? std::max(0, std::atoi(v)) : 0;
}

}  // namespace

NodePeers::NodePeers(MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
  if (const int per = ranks_per_node(); per > 0) {
    MPI_Comm part = MPI_COMM_NULL;
    MPI_Comm_split(node, local / per, local, &part);
    MPI_Comm_free(&node);
    node = part;
    MPI_Comm_rank(node, &local);
  }
  MPI_Comm_size(node, &size_);
  bytes_ = sizeof(Slot) * size_;
  // The node's first rank makes the file; every rank maps it; then it goes.
  char name[64] = {0};
  int fd = -1;
  if (local == 0) {
    std::snprintf(name, sizeof(name), "/dev/shm/meshtrain-peers-%d-%ld", int(::getpid()), long(std::time(nullptr)));
    fd = ::open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, off_t(bytes_)) != 0) name[0] = '\0';
  }
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, node);
  if (local != 0 && name[0] != '\0') fd = ::open(name, O_RDWR | O_CLOEXEC);
  void* p = fd >= 0 ? ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) ::close(fd);
  int ok = p != MAP_FAILED, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
  MPI_Barrier(node);  // every rank has opened the file
  if (local == 0 && name[0] != '\0') ::unlink(name);
  ring_ = std::make_unique<NodeRing>(world, node);
  if (ring_->active()) g_ring.store(ring_.get());
  MPI_Comm_free(&node);
  if (!all) {
    if (p != MAP_FAILED) ::munmap(p, bytes_);
    size_ = 0;
    MPI_Barrier(world);  // as the other nodes do below
    return;
  }
  slots_ = static_cast<Slot*>(p);
  mine_ = new (&slots_[local]) Slot;  // the file starts zeroed; this rank's slot is its own
  mine_->world_rank = rank;
  mine_->pid.store(int32_t(::getpid()));
  g_mine.store(mine_);
  mine_->idle_since_ns.store(now_ns());
  beat();
  MPI_Barrier(world);  // every slot is filled before anyone reads
}

NodePeers::~NodePeers() {
  if (g_ring.load() == ring_.get()) g_ring.store(nullptr);
  if (g_slots.load() == slots_) g_slots.store(nullptr);
  if (g_mine.load() == mine_) g_mine.store(nullptr);
  if (mine_) mine_->pid.store(0);
  if (slots_) ::munmap(slots_, bytes_);
}

void NodePeers::leave() {
  g_left.store(true);
  if (Slot* s = g_mine.load()) s->pid.store(0);
  if (NodeRing* r = g_ring.load()) r->goodbye();
}

void NodePeers::beat() {
  if (mine_) mine_->beat_ns.store(now_ns(), std::memory_order_relaxed);
  if (ring_) ring_->beat();
}

void NodePeers::set_blocked_since(int64_t ns) {
  if (!mine_) return;
  mine_->blocked_since_ns.store(ns, std::memory_order_relaxed);
  if (ns == 0) mine_->idle_since_ns.store(now_ns(), std::memory_order_relaxed);
}

std::string NodePeers::dead_peer() const {
  for (int i = 0; i < size_; ++i) {
    const int pid = slots_[i].pid.load();
    if (&slots_[i] != mine_ && pid != 0 && dead(pid))
      return fmt::format("rank {} (pid {}) died", slots_[i].world_rank, pid);
  }
  return ring_ ? ring_->dead_peer() : "";
}

namespace {
std::string join_places(const std::string& local, const std::string& remote) {
  std::string out = local.empty() ? "" : "on this node: " + local;
  if (!remote.empty()) out += (out.empty() ? "" : "; ") + ("on another node: " + remote);
  return out;
}
}  // namespace

std::string NodePeers::silent_peers(double silent_s) const {
  return join_places(local_peers(silent_s, false), ring_ ? ring_->silent_peers(silent_s) : "");
}

std::string NodePeers::stopped_peers(double silent_s) const {
  return join_places(local_peers(silent_s, true), ring_ ? ring_->silent_peers(silent_s) : "");
}

std::string NodePeers::local_peers(double silent_s, bool stopped_only) const {
  std::string out;
  const int64_t now = now_ns();
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  for (int i = 0; i < size_; ++i) {
    const Slot& s = slots_[i];
    const int pid = s.pid.load();
    if (&s == mine_ || pid == 0) continue;
    const char state = process_state(pid);
    const double beat_age = double(now - s.beat_ns.load(std::memory_order_relaxed)) * 1e-9;
    const int64_t blocked = s.blocked_since_ns.load(std::memory_order_relaxed);
    const double idle = double(now - s.idle_since_ns.load(std::memory_order_relaxed)) * 1e-9;
    if (state == 0 || state == 'Z' || state == 'X') {
      if (!stopped_only) add(fmt::format("rank {} (pid {}) died", s.world_rank, pid));
    } else if (state == 'T' || state == 't' || beat_age > silent_s)
      add(fmt::format("rank {} (pid {}) is stopped (silent for {:.0f} s)", s.world_rank, pid, beat_age));
    else if (blocked == 0 && idle > silent_s && !stopped_only)
      add(fmt::format("rank {} (pid {}) has made no communication call for {:.0f} s (hung or far behind)",
                      s.world_rank, pid, idle));
  }
  return out;
}

void NodePeers::name_dead_peer_on_sigterm() {
  if (!slots_) return;
  g_size.store(size_);
  g_my_rank.store(mine_->world_rank);
  g_slots.store(slots_);
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace meshtrain
