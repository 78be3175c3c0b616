#include "meshtrain/comm/node_ring.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "meshtrain/comm/signal_safe.h"
#include "meshtrain/core/clock.h"

namespace meshtrain {

namespace {

constexpr int kMaxAddrs = 4;
constexpr char kBeat = 'h', kBye = 'b';

// What each rank tells every other at set-up.
struct RankInfo {
  int32_t world_rank = -1, pid = 0;
  int32_t leader = -1;  // world rank of its node's leader
  int32_t port = 0;     // a leader's listening port
  int32_t naddr = 0;
  uint32_t addrs[kMaxAddrs] = {};  // a leader's IPv4 addresses (network order), loopback excluded
  char host[64] = {0};
};

// The first bytes on a connection: the job's token (rank 0's random number)
// and the connecting leader, so that a stray connection is not taken.
struct Hello {
  uint64_t token = 0;
  int32_t world_rank = -1, pad = 0;
};

int listen_socket(int32_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  port = ntohs(a.sin_port);
  return fd;
}

int32_t local_addresses(uint32_t* out) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  int32_t n = 0;
  for (ifaddrs* i = list; i != nullptr && n < kMaxAddrs; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK))
      out[n++] = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
  ::freeifaddrs(list);
  return n;
}

int ms_left(double deadline_s) { return std::max(0, static_cast<int>((deadline_s - now_s()) * 1000)); }

bool wait_for(int fd, short events, double deadline_s) {
  pollfd p{fd, events, 0};
  int r;
  do r = ::poll(&p, 1, ms_left(deadline_s));
  while (r < 0 && errno == EINTR);
  return r == 1 && (p.revents & events);
}

// Moves exactly n bytes over a non-blocking socket by the deadline.
bool transfer(int fd, char* buf, size_t n, bool out, double deadline_s) {
  while (n > 0) {
    if (!wait_for(fd, out ? POLLOUT : POLLIN, deadline_s)) return false;
    const ssize_t r = out ? ::send(fd, buf, n, MSG_NOSIGNAL) : ::recv(fd, buf, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

int connect_to(uint32_t addr, int port, double deadline_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = addr;
  a.sin_port = htons(static_cast<uint16_t>(port));
  int err = 0;
  socklen_t len = sizeof(err);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 &&
      (errno != EINPROGRESS || !wait_for(fd, POLLOUT, deadline_s) ||
       ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Connects to leader `to` (loopback first when it shares this host) and
// introduces this rank.
int connect_leader(const RankInfo& me, const RankInfo& to, uint64_t token, double deadline_s) {
  std::vector<uint32_t> addrs;
  if (std::strcmp(me.host, to.host) == 0) addrs.push_back(htonl(INADDR_LOOPBACK));
  addrs.insert(addrs.end(), to.addrs, to.addrs + std::clamp(to.naddr, 0, kMaxAddrs));
  Hello h;
  h.token = token;
  h.world_rank = me.world_rank;
  for (uint32_t a : addrs) {
    const int fd = connect_to(a, to.port, deadline_s);
    if (fd >= 0 && transfer(fd, reinterpret_cast<char*>(&h), sizeof(h), true, deadline_s)) return fd;
    if (fd >= 0) ::close(fd);
  }
  return -1;
}

// Accepts the connection of leader `from` (others are closed).
int accept_leader(int listen_fd, int32_t from, uint64_t token, double deadline_s) {
  while (wait_for(listen_fd, POLLIN, deadline_s)) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    Hello h;
    if (transfer(fd, reinterpret_cast<char*>(&h), sizeof(h), false, std::min(deadline_s, now_s() + 2)) &&
        h.token == token && h.world_rank == from)
      return fd;
    ::close(fd);
  }
  return -1;
}

}  // namespace

NodeRing::NodeRing(MPI_Comm world, MPI_Comm node, double connect_timeout_s) {
  int rank = 0, size = 0, local = 0, leaders = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(node, &local);
  const int is_leader = local == 0;
  MPI_Allreduce(&is_leader, &leaders, 1, MPI_INT, MPI_SUM, world);
  if (leaders < 2) return;  // one node: NodePeers sees every rank
  uint64_t token = 0;
  if (rank == 0) token = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}() ^ uint64_t(now_ns());
  MPI_Bcast(&token, 1, MPI_UINT64_T, 0, world);
  RankInfo me;
  me.world_rank = rank;
  me.pid = static_cast<int32_t>(::getpid());
  me.leader = rank;
  MPI_Bcast(&me.leader, 1, MPI_INT32_T, 0, node);
  ::gethostname(me.host, sizeof(me.host) - 1);
  int listen_fd = -1;
  if (is_leader) {
    listen_fd = listen_socket(me.port);
    me.naddr = local_addresses(me.addrs);
  }
  std::vector<RankInfo> all(static_cast<size_t>(size));
  MPI_Allgather(&me, sizeof(RankInfo), MPI_BYTE, all.data(), sizeof(RankInfo), MPI_BYTE, world);
  std::vector<int> ring;  // the leaders by world rank
  for (const RankInfo& r : all)
    if (r.leader == r.world_rank) ring.push_back(r.world_rank);
  int ok = 1;
  if (is_leader) {
    const size_t at = std::find(ring.begin(), ring.end(), rank) - ring.begin(), n = ring.size();
    const RankInfo &next = all[ring[(at + 1) % n]], &prev = all[ring[(at + n - 1) % n]];
    const double deadline = now_s() + connect_timeout_s;
    // Every leader connects before it accepts: the listen backlog completes
    // the connections, so no leader waits on another.
    fds_[0] = listen_fd >= 0 ? connect_leader(me, next, token, deadline) : -1;
    fds_[1] = fds_[0] >= 0 ? accept_leader(listen_fd, prev.world_rank, token, deadline) : -1;
    ok = fds_[0] >= 0 && fds_[1] >= 0;
    for (int i = 0; i < 2; ++i) {
      const RankInfo& r = i == 0 ? next : prev;
      peers_[i].world_rank = r.world_rank;
      peers_[i].pid = r.pid;
      std::memcpy(peers_[i].host, r.host, sizeof(r.host));
      peers_[i].heard_ns.store(now_ns());
    }
  }
  if (listen_fd >= 0) ::close(listen_fd);
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, world);
  if (!all_ok) {
    if (!ok)
      std::fprintf(stderr,
                   "[rank %d] warning: no heartbeat connection to the next node's leader (rank %d on %s): a rank "
                   "on another node that dies or stops is not named\n",
                   rank, peers_[0].world_rank, peers_[0].host);
    for (int& fd : fds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
}

NodeRing::~NodeRing() {
  goodbye();
  for (int i = 0; i < 2; ++i) {
    if (fds_[i] < 0) continue;
    drain(i);  // unread bytes would make close() reset the connection
    ::close(fds_[i]);
  }
}

void NodeRing::drain(int i) {
  char buf[64];
  for (;;) {
    const ssize_t r = ::recv(fds_[i], buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0) {
      peers_[i].heard_ns.store(now_ns(), std::memory_order_relaxed);
      if (std::memchr(buf, kBye, static_cast<size_t>(r))) peers_[i].state.store(1);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    int alive = 0;  // end of stream or reset: gone, unless it said goodbye
    peers_[i].state.compare_exchange_strong(alive, 2);
    return;
  }
}

void NodeRing::beat() {
  if (!active()) return;
  for (int i = 0; i < 2; ++i) {
    if (peers_[i].state.load() != 0) continue;
    (void)::send(fds_[i], &kBeat, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    drain(i);
  }
}

std::string NodeRing::dead_peer() const {
  for (const Neighbour& p : peers_)
    if (active() && p.state.load() == 2)
      return fmt::format("rank {} (pid {}, host {}) died (its node's heartbeat connection closed)", p.world_rank,
                         p.pid, p.host);
  return "";
}

std::string NodeRing::silent_peers(double silent_s) const {
  std::string out;
  const int64_t now = now_ns();
  for (int i = 0; i < 2 && active(); ++i) {
    const Neighbour& p = peers_[i];
    const double age = double(now - p.heard_ns.load(std::memory_order_relaxed)) * 1e-9;
    if (p.state.load() != 0 || age <= silent_s || (i == 1 && p.world_rank == peers_[0].world_rank)) continue;
    out += fmt::format("{}rank {} (pid {}, host {}) has sent no heartbeat for {:.0f} s (stopped, hung, or its node "
                       "is down)",
                       out.empty() ? "" : "; ", p.world_rank, p.pid, p.host, age);
  }
  return out;
}

bool NodeRing::dead_peer_signal_safe(char* buf, size_t n) {
  using namespace signal_safe;
  for (int i = 0; i < 2 && active(); ++i) {
    drain(i);
    if (peers_[i].state.load() != 2) continue;
    size_t k = 0;
    put_str(buf, n, k, "rank ");
    put_int(buf, n, k, peers_[i].world_rank);
    put_str(buf, n, k, " (pid ");
    put_int(buf, n, k, peers_[i].pid);
    put_str(buf, n, k, ", host ");
    put_str(buf, n, k, peers_[i].host);
    put_str(buf, n, k, ") died");
    buf[k] = '\0';
    return true;
  }
  return false;
}

void NodeRing::goodbye() {
  // The goodbye, then the end of this side's stream (FIN) in order after it.
  for (int fd : fds_) {
    if (fd < 0) continue;
    (void)::send(fd, &kBye, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
  }
}

}  // namespace meshtrain
