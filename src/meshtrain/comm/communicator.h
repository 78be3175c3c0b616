// Communicator: one parallel group (tp, dp, pp, mp, embedding or world) and
// the instrumented calls the engine makes over it. Every call goes to MPI's
// own collective or point-to-point routine; the wrapper adds bookkeeping:
//   - each call is counted and timed into this group's CommStats
//     (comm/comm_stats.h defines the figures);
//   - a blocking call (and a Request's wait()) arms the Watchdog, if any;
//   - a CommTracer, if attached, sees each completed call.
// Errors are returned by MPI (MPI_ERRORS_RETURN) and thrown as CommError.
// Buffers in device memory go through a Transport (comm/transport.h)
// attached with set_transport(); the bookkeeping is the same.
//
// Counts are elements of the given MPI datatype; typed overloads take the
// datatype from T (comm/mpi_types.h), including bf16. Ranks (root, peer) are
// ranks within this group.
//
// Groups of one rank: collectives return at once without calling MPI (an
// out-of-place all-gather or reduce-scatter copies its input) and are not
// recorded: no communication happened, so none is counted. Point-to-point
// calls always go to MPI and are recorded.
//
// A Communicator is used by one thread at a time. It is neither copied nor
// moved (requests and the watchdog refer to it).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <mpi.h>

#include "meshtrain/comm/comm_stats.h"
#include "meshtrain/comm/comm_tracer.h"
#include "meshtrain/comm/mpi_types.h"
#include "meshtrain/comm/transport.h"
#include "meshtrain/comm/watchdog.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

class Communicator;

// A non-blocking call in flight. wait() blocks until it completes and records
// it; a Request still active when destroyed is waited for then (errors are
// then reported by abort_all, since a destructor cannot throw). Move-only.
class Request {
 public:
  Request() = default;
  Request(Request&& o) noexcept;
  Request& operator=(Request&& o) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  bool active() const { return comm_ != nullptr; }
  // Blocks until the call completes; a no-op on an inactive request.
  void wait();
  // True (and recorded, as by wait()) when the call has completed. Time
  // spent in test() counts as exposed time.
  bool test();

 private:
  friend class Communicator;
  Request(Communicator* comm, CommOp op, int64_t bytes, int peer, double start_s, double post_s,
          MPI_Request req)
      : comm_(comm), op_(op), bytes_(bytes), peer_(peer), start_s_(start_s), post_s_(post_s), req_(req) {}
  void finish(double wait_start_s);

  Communicator* comm_ = nullptr;
  CommOp op_ = CommOp::iall_reduce;
  int64_t bytes_ = 0;
  int peer_ = -1;
  double start_s_ = 0;   // when it was posted
  double post_s_ = 0;    // time spent posting it
  double polled_s_ = 0;  // time spent in test() calls that found it pending
  MPI_Request req_ = MPI_REQUEST_NULL;
  // Through a transport, point-to-point data is staged in host memory: the
  // copy sent from, or received into and copied to deliver_to_ on completion.
  Buffer staging_;
  void* deliver_to_ = nullptr;
};

// Waits for each request in turn.
void wait_all(Request* requests, size_t n);

class Communicator {
 public:
  // Sentinel send buffer for in-place reduce_scatter and all_gather.
  static inline const void* const kInPlace = MPI_IN_PLACE;

  // Wraps `comm` under `name`, taking ownership (MPI_Comm_free on
  // destruction, unless MPI is finalised by then) when `owned`. Installs
  // MPI_ERRORS_RETURN on it.
  Communicator(MPI_Comm comm, std::string name, bool owned);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm raw() const { return comm_; }

  // Optional hooks; pass nullptr to detach. Not owned; must outlive use.
  void set_watchdog(Watchdog* w) { watchdog_ = w; }
  void set_tracer(CommTracer* t) { tracer_ = t; }
  // Where the data moves (nullptr: MPI on host memory). Not owned.
  void set_transport(Transport* t) { transport_ = t; }
  Transport* transport() const { return transport_; }

  // --- Blocking collectives --------------------------------------------------
  // buf[0..count) := op over the group of every rank's buf[0..count).
  void all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op = ReduceOp::sum);
  // recv[0..count) := op over ranks of their send[rank*count .. (rank+1)*count).
  // In place (send == kInPlace): recv holds the n*count inputs and the result
  // lands in recv[0..count), as MPI_Reduce_scatter_block defines.
  void reduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                      ReduceOp op = ReduceOp::sum);
  // recv[r*count .. (r+1)*count) := rank r's send[0..count).
  // In place (send == kInPlace): this rank's part is already at its place in recv.
  void all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type);
  // buf[0..count) := root's buf[0..count).
  void broadcast(void* buf, int64_t count, MPI_Datatype type, int root);
  void barrier();

  // --- Blocking point-to-point ----------------------------------------------
  void send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag = 0);
  // Receives exactly `count` elements; a longer message is an error.
  void recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag = 0);

  // --- Non-blocking forms: buffers must stay valid until wait() -------------
  Request iall_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op = ReduceOp::sum);
  Request ireduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                          ReduceOp op = ReduceOp::sum);
  Request iall_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type);
  Request isend(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag = 0);
  Request irecv(void* buf, int64_t count, MPI_Datatype type, int src, int tag = 0);

  // --- Typed forms ------------------------------------------------------------
  template <typename T> void all_reduce(T* buf, int64_t count, ReduceOp op = ReduceOp::sum) {
    all_reduce(buf, count, mpi_datatype<T>(), op);
  }
  // `send` may be kInPlace; T is taken from `recv`.
  template <typename T> void reduce_scatter(const void* send, T* recv, int64_t count_per_rank,
                                            ReduceOp op = ReduceOp::sum) {
    reduce_scatter(send, recv, count_per_rank, mpi_datatype<T>(), op);
  }
  template <typename T> void all_gather(const void* send, T* recv, int64_t count_per_rank) {
    all_gather(send, recv, count_per_rank, mpi_datatype<T>());
  }
  template <typename T> void broadcast(T* buf, int64_t count, int root) {
    broadcast(buf, count, mpi_datatype<T>(), root);
  }
  template <typename T> void send(const T* buf, int64_t count, int dest, int tag = 0) {
    send(buf, count, mpi_datatype<T>(), dest, tag);
  }
  template <typename T> void recv(T* buf, int64_t count, int src, int tag = 0) {
    recv(buf, count, mpi_datatype<T>(), src, tag);
  }
  template <typename T> Request iall_reduce(T* buf, int64_t count, ReduceOp op = ReduceOp::sum) {
    return iall_reduce(buf, count, mpi_datatype<T>(), op);
  }
  template <typename T> Request ireduce_scatter(const void* send, T* recv, int64_t count_per_rank,
                                                ReduceOp op = ReduceOp::sum) {
    return ireduce_scatter(send, recv, count_per_rank, mpi_datatype<T>(), op);
  }
  template <typename T> Request iall_gather(const void* send, T* recv, int64_t count_per_rank) {
    return iall_gather(send, recv, count_per_rank, mpi_datatype<T>());
  }
  template <typename T> Request isend(const T* buf, int64_t count, int dest, int tag = 0) {
    return isend(buf, count, mpi_datatype<T>(), dest, tag);
  }
  template <typename T> Request irecv(T* buf, int64_t count, int src, int tag = 0) {
    return irecv(buf, count, mpi_datatype<T>(), src, tag);
  }

  // --- Statistics --------------------------------------------------------------
  // This group's record so far, keyed by (name(), op).
  CommStats stats() const;
  void reset_stats();

 private:
  friend class Request;
  struct Call {
    CommOp op;
    int64_t bytes;
    int peer;
    double start_s;
  };
  Call begin(CommOp op, int64_t bytes, int peer);  // arms the watchdog
  void end(const Call& c, int rc, const char* mpi_call);  // disarms, checks, records
  void record(CommOp op, int64_t bytes, int peer, double start_s, double end_s, double exposed_s);
  Request posted(CommOp op, int64_t bytes, int peer, double start_s, int rc, const char* mpi_call,
                 MPI_Request req);
  void copy_local(void* dst, const void* src, size_t bytes);

  MPI_Comm comm_;
  Transport* transport_ = nullptr;
  std::string name_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  Watchdog* watchdog_ = nullptr;
  CommTracer* tracer_ = nullptr;
  std::array<OpStats, kNumCommOps> stats_{};
};

}  // namespace meshtrain
