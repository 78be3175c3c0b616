#include "meshtrain/comm/node_peers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>

#include <fmt/format.h>

namespace meshtrain {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
// This process's slot in the last table made.
std::atomic<NodePeers::Slot*> g_mine{nullptr};

// Appends decimal `v` to buf at n (async-signal-safe).
void put_int(char* buf, size_t& n, long v) {
  char digits[24];
  int d = 0;
  if (v < 0) buf[n++] = '-', v = -v;
  do digits[d++] = char('0' + v % 10), v /= 10;
  while (v > 0 && d < 23);
  while (d > 0) buf[n++] = digits[--d];
}
void put_str(char* buf, size_t& n, const char* s) {
  while (*s) buf[n++] = *s++;
}

extern "C" void on_sigterm(int sig) {
  const NodePeers::Slot* slots = g_slots.load();
  const int size = g_size.load();
  for (int i = 0; slots && i < size; ++i) {
    const int pid = slots[i].pid.load();
    if (pid == 0 || !dead(pid)) continue;
    char line[200];
    size_t n = 0;
    put_str(line, n, "[rank ");
    put_int(line, n, g_my_rank.load());
    put_str(line, n, "] error: rank ");
    put_int(line, n, slots[i].world_rank);
    put_str(line, n, " (pid ");
    put_int(line, n, pid);
    put_str(line, n, ") died; the launcher is ending the job\n");
    [[maybe_unused]] const ssize_t w = ::write(2, line, n);
    break;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

NodePeers::NodePeers(MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
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
  MPI_Comm_free(&node);
  if (!all) {
    if (p != MAP_FAILED) ::munmap(p, bytes_);
    size_ = 0;
    return;
  }
  slots_ = static_cast<Slot*>(p);
  mine_ = new (&slots_[local]) Slot;  // the file starts zeroed; this rank's slot is its own
  mine_->world_rank = rank;
  mine_->pid.store(int32_t(::getpid()));
  g_mine.store(mine_);
  mine_->idle_since_ns.store(steady_ns());
  beat();
  MPI_Barrier(world);  // every slot is filled before anyone reads
}

NodePeers::~NodePeers() {
  if (g_slots.load() == slots_) g_slots.store(nullptr);
  if (g_mine.load() == mine_) g_mine.store(nullptr);
  if (mine_) mine_->pid.store(0);
  if (slots_) ::munmap(slots_, bytes_);
}

void NodePeers::leave() {
  if (Slot* s = g_mine.load()) s->pid.store(0);
}

void NodePeers::beat() {
  if (mine_) mine_->beat_ns.store(steady_ns(), std::memory_order_relaxed);
}

void NodePeers::set_blocked_since(int64_t ns) {
  if (!mine_) return;
  mine_->blocked_since_ns.store(ns, std::memory_order_relaxed);
  if (ns == 0) mine_->idle_since_ns.store(steady_ns(), std::memory_order_relaxed);
}

std::string NodePeers::dead_peer() const {
  for (int i = 0; i < size_; ++i) {
    const int pid = slots_[i].pid.load();
    if (&slots_[i] != mine_ && pid != 0 && dead(pid))
      return fmt::format("rank {} (pid {}) died", slots_[i].world_rank, pid);
  }
  return "";
}

std::string NodePeers::silent_peers(double silent_s) const {
  std::string out;
  const int64_t now = steady_ns();
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  for (int i = 0; i < size_; ++i) {
    const Slot& s = slots_[i];
    const int pid = s.pid.load();
    if (&s == mine_ || pid == 0) continue;
    const char state = process_state(pid);
    const double beat_age = double(now - s.beat_ns.load(std::memory_order_relaxed)) * 1e-9;
    const int64_t blocked = s.blocked_since_ns.load(std::memory_order_relaxed);
    const double idle = double(now - s.idle_since_ns.load(std::memory_order_relaxed)) * 1e-9;
    if (state == 0 || state == 'Z' || state == 'X')
      add(fmt::format("rank {} (pid {}) died", s.world_rank, pid));
    else if (state == 'T' || state == 't' || beat_age > silent_s)
      add(fmt::format("rank {} (pid {}) is stopped (silent for {:.0f} s)", s.world_rank, pid, beat_age));
    else if (blocked == 0 && idle > silent_s)
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
