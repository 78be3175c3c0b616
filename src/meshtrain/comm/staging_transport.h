// MPI with host staging: the fallback Transport (comm/transport.h) for
// device buffers. Each call copies the device data it sends into host
// staging buffers, runs the MPI call there, and copies what it receives back.
// The copies go through a DeviceCopy function (gpu::copy on a GPU; any
// memcpy-like function, e.g. in tests), so comm needs no device runtime.
// Staging buffers are tracked as comm_buffers, kept between calls and grown
// to the largest call (two of them: send side and receive side).
#pragma once

#include <functional>

#include "meshtrain/comm/transport.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

// copy(dst, src, bytes): synchronous, either direction.
using DeviceCopy = std::function<void(void* dst, const void* src, size_t bytes)>;

class StagingTransport final : public Transport {
 public:
  explicit StagingTransport(DeviceCopy copy) : copy_(std::move(copy)) {}
  const char* name() const override { return "mpi+host-staging"; }
  int all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op, MPI_Comm comm) override;
  int reduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type, ReduceOp op,
                     MPI_Comm comm) override;
  int all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type, MPI_Comm comm) override;
  int broadcast(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm) override;
  int send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) override;
  int recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag, MPI_Comm comm) override;
  void copy(void* dst, const void* src, size_t bytes) override { copy_(dst, src, bytes); }

 private:
  // Host staging of at least `bytes` (0: send side, 1: receive side).
  void* host(int which, size_t bytes);

  DeviceCopy copy_;
  Buffer host_[2];
};

}  // namespace meshtrain
