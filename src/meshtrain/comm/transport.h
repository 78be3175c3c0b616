// Transport: where a Communicator's data moves. By default a Communicator
// calls MPI itself on host memory. A Transport attached with
// Communicator::set_transport() carries its calls instead, for buffers that
// live in device memory:
//   - MPI with host staging (comm/staging_transport.h): device -> host copy,
//     the MPI call on host memory, host -> device copy; works for any number
//     of ranks per device (several ranks sharing one GPU);
//   - NCCL (kernels/gpu/nccl_transport.h): collectives on device memory,
//     one rank per device.
// The Communicator keeps its bookkeeping around every call either way:
// counting, timing, the watchdog and the tracer. Through a transport the
// non-blocking collectives complete before they return (recorded with their
// whole duration exposed); non-blocking sends and receives stay
// non-blocking, staged by the Communicator through host memory with copy();
// a group of one copies with copy() instead of memcpy.
//
// Each call returns MPI_SUCCESS or an MPI error code (a device transport
// throws on its own errors). `comm` is the Communicator's MPI communicator;
// in-place sends are Communicator::kInPlace (MPI_IN_PLACE), as for MPI.
#pragma once

#include <cstddef>
#include <cstdint>

#include <mpi.h>

#include "meshtrain/comm/mpi_types.h"

namespace meshtrain {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op, MPI_Comm comm) = 0;
  virtual int reduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type, ReduceOp op,
                             MPI_Comm comm) = 0;
  virtual int all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                         MPI_Comm comm) = 0;
  virtual int broadcast(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm) = 0;
  virtual int send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) = 0;
  virtual int recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag, MPI_Comm comm) = 0;
  // A local copy between buffers of this transport's memory.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
};

}  // namespace meshtrain
