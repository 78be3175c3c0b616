#include "meshtrain/comm/communicator.h"

#include <climits>
#include <cstring>
#include <utility>

#include "meshtrain/comm/abort.h"
#include "meshtrain/comm/comm_error.h"
#include "meshtrain/core/clock.h"

namespace meshtrain {

namespace {

int as_int_count(int64_t count, const std::string& group) {
  check(count >= 0 && count <= INT_MAX, "communication count {} on group '{}' is outside MPI's int range",
        count, group);
  return static_cast<int>(count);
}

}  // namespace

// ---------------------------------------------------------------- Request --

Request::Request(Request&& o) noexcept
    : comm_(std::exchange(o.comm_, nullptr)), op_(o.op_), bytes_(o.bytes_), peer_(o.peer_),
      start_s_(o.start_s_), post_s_(o.post_s_), polled_s_(o.polled_s_),
      req_(std::exchange(o.req_, MPI_REQUEST_NULL)), staging_(std::move(o.staging_)),
      deliver_to_(std::exchange(o.deliver_to_, nullptr)) {}

Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (active()) {
      try {
        wait();
      } catch (const std::exception& e) {
        abort_all(e.what());
      }
    }
    comm_ = std::exchange(o.comm_, nullptr);
    op_ = o.op_;
    bytes_ = o.bytes_;
    peer_ = o.peer_;
    start_s_ = o.start_s_;
    post_s_ = o.post_s_;
    polled_s_ = o.polled_s_;
    req_ = std::exchange(o.req_, MPI_REQUEST_NULL);
    staging_ = std::move(o.staging_);
    deliver_to_ = std::exchange(o.deliver_to_, nullptr);
  }
  return *this;
}

Request::~Request() {
  if (!active()) return;
  try {
    wait();
  } catch (const std::exception& e) {
    abort_all(e.what());
  }
}

void Request::wait() {
  if (!active()) return;
  Communicator* c = comm_;
  if (c->watchdog_) c->watchdog_->arm(op_, c->name_.c_str(), bytes_);
  const double t0 = now_s();
  const int rc = MPI_Wait(&req_, MPI_STATUS_IGNORE);
  if (c->watchdog_) c->watchdog_->disarm();
  if (rc != MPI_SUCCESS) {
    comm_ = nullptr;  // a failed request is not waited for again
    check_mpi(rc, "MPI_Wait", c->name_);
  }
  finish(t0);
}

bool Request::test() {
  if (!active()) return true;
  const double t0 = now_s();
  int done = 0;
  const int rc = MPI_Test(&req_, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    Communicator* c = std::exchange(comm_, nullptr);
    check_mpi(rc, "MPI_Test", c->name_);
  }
  if (done) {
    finish(t0);
  } else {
    polled_s_ += now_s() - t0;
  }
  return done != 0;
}

void Request::finish(double wait_start_s) {
  if (deliver_to_) comm_->copy_local(deliver_to_, staging_.data(), staging_.bytes());
  staging_.reset();
  deliver_to_ = nullptr;
  const double t1 = now_s();
  Communicator* c = std::exchange(comm_, nullptr);
  c->record(op_, bytes_, peer_, start_s_, t1, post_s_ + polled_s_ + (t1 - wait_start_s));
}

void wait_all(Request* requests, size_t n) {
  for (size_t i = 0; i < n; ++i) requests[i].wait();
}

// ----------------------------------------------------------- Communicator --

Communicator::Communicator(MPI_Comm comm, std::string name, bool owned)
    : comm_(comm), name_(std::move(name)), owned_(owned) {
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", name_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  reset_stats();
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

CommStats Communicator::stats() const {
  CommStats s;
  for (const OpStats& o : stats_)
    if (o.calls > 0) s.entry(name_, o.op, size_).merge(o);
  return s;
}

void Communicator::reset_stats() {
  for (int i = 0; i < kNumCommOps; ++i) {
    stats_[i] = OpStats{};
    stats_[i].op = static_cast<CommOp>(i);
    stats_[i].group_size = size_;
  }
}

Communicator::Call Communicator::begin(CommOp op, int64_t bytes, int peer) {
  if (watchdog_) watchdog_->arm(op, name_.c_str(), bytes);
  return Call{op, bytes, peer, now_s()};
}

void Communicator::end(const Call& c, int rc, const char* mpi_call) {
  const double t1 = now_s();
  if (watchdog_) watchdog_->disarm();
  check_mpi(rc, mpi_call, name_);
  record(c.op, c.bytes, c.peer, c.start_s, t1, t1 - c.start_s);
}

void Communicator::record(CommOp op, int64_t bytes, int peer, double start_s, double end_s,
                          double exposed_s) {
  stats_[static_cast<int>(op)].record(bytes, end_s - start_s, exposed_s);
  if (tracer_) tracer_->on_comm(CommEvent{op, name_, size_, bytes, start_s, end_s, exposed_s, peer});
}

void Communicator::copy_local(void* dst, const void* src, size_t bytes) {
  if (transport_)
    transport_->copy(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

Request Communicator::posted(CommOp op, int64_t bytes, int peer, double start_s, int rc,
                             const char* mpi_call, MPI_Request req) {
  check_mpi(rc, mpi_call, name_);
  return Request(this, op, bytes, peer, start_s, now_s() - start_s, req);
}

void Communicator::all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op) {
  if (size_ == 1) return;  // the result is the input
  const int n = as_int_count(count, name_);
  const Call c = begin(CommOp::all_reduce, count * mpi_type_bytes(type), -1);
  end(c, transport_ ? transport_->all_reduce(buf, n, type, op, comm_)
                    : MPI_Allreduce(MPI_IN_PLACE, buf, n, type, mpi_op(op, type), comm_),
      "MPI_Allreduce");
}

void Communicator::reduce_scatter(const void* send, void* recv, int64_t count_per_rank,
                                  MPI_Datatype type, ReduceOp op) {
  const int64_t chunk = count_per_rank * mpi_type_bytes(type);
  if (size_ == 1) {
    if (send != kInPlace && send != recv) copy_local(recv, send, static_cast<size_t>(chunk));
    return;
  }
  const int n = as_int_count(count_per_rank, name_);
  const Call c = begin(CommOp::reduce_scatter, chunk * size_, -1);
  end(c, transport_ ? transport_->reduce_scatter(send, recv, n, type, op, comm_)
                    : MPI_Reduce_scatter_block(send, recv, n, type, mpi_op(op, type), comm_),
      "MPI_Reduce_scatter_block");
}

void Communicator::all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type) {
  const int64_t chunk = count_per_rank * mpi_type_bytes(type);
  if (size_ == 1) {
    if (send != kInPlace && send != recv) copy_local(recv, send, static_cast<size_t>(chunk));
    return;
  }
  const int n = as_int_count(count_per_rank, name_);
  const Call c = begin(CommOp::all_gather, chunk * size_, -1);
  end(c, transport_ ? transport_->all_gather(send, recv, n, type, comm_)
                    : MPI_Allgather(send, n, type, recv, n, type, comm_),
      "MPI_Allgather");
}

void Communicator::broadcast(void* buf, int64_t count, MPI_Datatype type, int root) {
  if (size_ == 1) return;  // the result is the input
  const int n = as_int_count(count, name_);
  const Call c = begin(CommOp::broadcast, count * mpi_type_bytes(type), root);
  end(c, transport_ ? transport_->broadcast(buf, n, type, root, comm_) : MPI_Bcast(buf, n, type, root, comm_),
      "MPI_Bcast");
}

void Communicator::barrier() {
  if (size_ == 1) return;  // the result is the input
  const Call c = begin(CommOp::barrier, 0, -1);
  end(c, MPI_Barrier(comm_), "MPI_Barrier");
}

void Communicator::send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag) {
  const int n = as_int_count(count, name_);
  const Call c = begin(CommOp::send, count * mpi_type_bytes(type), dest);
  end(c, transport_ ? transport_->send(buf, n, type, dest, tag, comm_) : MPI_Send(buf, n, type, dest, tag, comm_),
      "MPI_Send");
}

void Communicator::recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag) {
  const int n = as_int_count(count, name_);
  const Call c = begin(CommOp::recv, count * mpi_type_bytes(type), src);
  end(c,
      transport_ ? transport_->recv(buf, n, type, src, tag, comm_)
                 : MPI_Recv(buf, n, type, src, tag, comm_, MPI_STATUS_IGNORE),
      "MPI_Recv");
}

Request Communicator::iall_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op) {
  if (size_ == 1) return Request();
  const int n = as_int_count(count, name_);
  if (transport_) {
    const Call c = begin(CommOp::iall_reduce, count * mpi_type_bytes(type), -1);
    end(c, transport_->all_reduce(buf, n, type, op, comm_), "MPI_Iallreduce");
    return Request();
  }
  const double t0 = now_s();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, type, mpi_op(op, type), comm_, &req);
  return posted(CommOp::iall_reduce, count * mpi_type_bytes(type), -1, t0, rc, "MPI_Iallreduce", req);
}

Request Communicator::ireduce_scatter(const void* send, void* recv, int64_t count_per_rank,
                                      MPI_Datatype type, ReduceOp op) {
  const int64_t chunk = count_per_rank * mpi_type_bytes(type);
  if (size_ == 1) {
    if (send != kInPlace && send != recv) copy_local(recv, send, static_cast<size_t>(chunk));
    return Request();
  }
  const int n = as_int_count(count_per_rank, name_);
  if (transport_) {
    const Call c = begin(CommOp::ireduce_scatter, chunk * size_, -1);
    end(c, transport_->reduce_scatter(send, recv, n, type, op, comm_), "MPI_Ireduce_scatter_block");
    return Request();
  }
  const double t0 = now_s();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Ireduce_scatter_block(send, recv, n, type, mpi_op(op, type), comm_, &req);
  return posted(CommOp::ireduce_scatter, chunk * size_, -1, t0, rc, "MPI_Ireduce_scatter_block", req);
}

Request Communicator::iall_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type) {
  const int64_t chunk = count_per_rank * mpi_type_bytes(type);
  if (size_ == 1) {
    if (send != kInPlace && send != recv) copy_local(recv, send, static_cast<size_t>(chunk));
    return Request();
  }
  const int n = as_int_count(count_per_rank, name_);
  if (transport_) {
    const Call c = begin(CommOp::iall_gather, chunk * size_, -1);
    end(c, transport_->all_gather(send, recv, n, type, comm_), "MPI_Iallgather");
    return Request();
  }
  const double t0 = now_s();
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgather(send, n, type, recv, n, type, comm_, &req);
  return posted(CommOp::iall_gather, chunk * size_, -1, t0, rc, "MPI_Iallgather", req);
}

Request Communicator::isend(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag) {
  const int n = as_int_count(count, name_);
  const double t0 = now_s();
  MPI_Request req = MPI_REQUEST_NULL;
  if (transport_) {  // staged: sent from a host copy the request keeps
    const int64_t bytes = count * mpi_type_bytes(type);
    Buffer host(MemCategory::comm_buffers, static_cast<size_t>(bytes), /*zero=*/false);
    transport_->copy(host.data(), buf, static_cast<size_t>(bytes));
    const int rc = MPI_Isend(host.data(), n, type, dest, tag, comm_, &req);
    Request r = posted(CommOp::isend, bytes, dest, t0, rc, "MPI_Isend", req);
    r.staging_ = std::move(host);
    return r;
  }
  const int rc = MPI_Isend(buf, n, type, dest, tag, comm_, &req);
  return posted(CommOp::isend, count * mpi_type_bytes(type), dest, t0, rc, "MPI_Isend", req);
}

Request Communicator::irecv(void* buf, int64_t count, MPI_Datatype type, int src, int tag) {
  const int n = as_int_count(count, name_);
  const double t0 = now_s();
  MPI_Request req = MPI_REQUEST_NULL;
  if (transport_) {  // staged: received into host memory, copied to buf when complete
    const int64_t bytes = count * mpi_type_bytes(type);
    Buffer host(MemCategory::comm_buffers, static_cast<size_t>(bytes), /*zero=*/false);
    const int rc = MPI_Irecv(host.data(), n, type, src, tag, comm_, &req);
    Request r = posted(CommOp::irecv, bytes, src, t0, rc, "MPI_Irecv", req);
    r.staging_ = std::move(host);
    r.deliver_to_ = buf;
    return r;
  }
  const int rc = MPI_Irecv(buf, n, type, src, tag, comm_, &req);
  return posted(CommOp::irecv, count * mpi_type_bytes(type), src, t0, rc, "MPI_Irecv", req);
}

}  // namespace meshtrain
