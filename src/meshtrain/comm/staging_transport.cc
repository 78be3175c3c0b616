#include "meshtrain/comm/staging_transport.h"

namespace meshtrain {

namespace {
size_t bytes_of(int64_t count, MPI_Datatype type) { return static_cast<size_t>(count * mpi_type_bytes(type)); }
int group_size(MPI_Comm comm) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  return n;
}
int group_rank(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
}  // namespace

void* StagingTransport::host(int which, size_t bytes) {
  if (host_[which].bytes() < bytes) host_[which] = Buffer(MemCategory::comm_buffers, bytes, /*zero=*/false);
  return host_[which].data();
}

int StagingTransport::all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op, MPI_Comm comm) {
  const size_t b = bytes_of(count, type);
  void* h = host(0, b);
  copy_(h, buf, b);
  const int rc = MPI_Allreduce(MPI_IN_PLACE, h, static_cast<int>(count), type, mpi_op(op, type), comm);
  if (rc == MPI_SUCCESS) copy_(buf, h, b);
  return rc;
}

int StagingTransport::reduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                                     ReduceOp op, MPI_Comm comm) {
  const size_t chunk = bytes_of(count_per_rank, type);
  const size_t all = chunk * group_size(comm);
  void* hs = host(0, all);
  void* hr = host(1, chunk);
  copy_(hs, send == MPI_IN_PLACE ? recv : send, all);  // in place: the inputs are in recv
  const int rc = MPI_Reduce_scatter_block(hs, hr, static_cast<int>(count_per_rank), type, mpi_op(op, type), comm);
  if (rc == MPI_SUCCESS) copy_(recv, hr, chunk);
  return rc;
}

int StagingTransport::all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                                 MPI_Comm comm) {
  const size_t chunk = bytes_of(count_per_rank, type);
  const int n = group_size(comm), me = group_rank(comm);
  void* hr = host(1, chunk * n);
  // This rank's part goes to its place in the host receive buffer, then MPI
  // gathers in place there.
  const void* mine = send == MPI_IN_PLACE ? static_cast<const char*>(recv) + chunk * me : send;
  copy_(static_cast<char*>(hr) + chunk * me, mine, chunk);
  const int c = static_cast<int>(count_per_rank);
  const int rc = MPI_Allgather(MPI_IN_PLACE, c, type, hr, c, type, comm);
  if (rc == MPI_SUCCESS) copy_(recv, hr, chunk * n);
  return rc;
}

int StagingTransport::broadcast(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm) {
  const size_t b = bytes_of(count, type);
  void* h = host(0, b);
  if (group_rank(comm) == root) copy_(h, buf, b);
  const int rc = MPI_Bcast(h, static_cast<int>(count), type, root, comm);
  if (rc == MPI_SUCCESS && group_rank(comm) != root) copy_(buf, h, b);
  return rc;
}

int StagingTransport::send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  const size_t b = bytes_of(count, type);
  void* h = host(0, b);
  copy_(h, buf, b);
  return MPI_Send(h, static_cast<int>(count), type, dest, tag, comm);
}

int StagingTransport::recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag, MPI_Comm comm) {
  const size_t b = bytes_of(count, type);
  void* h = host(1, b);
  const int rc = MPI_Recv(h, static_cast<int>(count), type, src, tag, comm, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS) copy_(buf, h, b);
  return rc;
}

}  // namespace meshtrain
