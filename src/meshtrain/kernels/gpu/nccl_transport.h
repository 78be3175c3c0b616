// NCCL for device buffers: the Transport (comm/transport.h) of groups whose
// ranks each own a GPU (NCCL does not put two ranks on one device; ranks
// sharing a GPU use StagingTransport with gpu::copy instead). RCCL provides
// the same API on AMD GPUs.
//
// One NCCL communicator per MPI communicator, created on first use: rank 0
// of the group makes NCCL's unique id and broadcasts it over MPI. Every call
// is queued on the backend's stream (runtime_api.h) and waited for before it
// returns, so the Communicator's host-clock timing is the call's duration.
// MPI's in-place conventions are kept: an in-place reduce-scatter reduces
// into device scratch and copies the result to the front of recv; an
// in-place all-gather is NCCL's in-place form. Datatypes: fp32, bf16, fp64,
// int32, int64, bytes; reductions sum, max, min. NCCL errors throw
// std::runtime_error. Requires gpu::init().
#pragma once

#include <map>

#include "meshtrain/comm/transport.h"

namespace meshtrain::gpu {

class NcclTransport final : public Transport {
 public:
  NcclTransport() = default;
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  const char* name() const override { return "nccl"; }
  int all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op, MPI_Comm comm) override;
  int reduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type, ReduceOp op,
                     MPI_Comm comm) override;
  int all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type, MPI_Comm comm) override;
  int broadcast(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm) override;
  int send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) override;
  int recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag, MPI_Comm comm) override;
  void copy(void* dst, const void* src, size_t bytes) override;

 private:
  void* comm_for(MPI_Comm comm);  // ncclComm_t

  std::map<MPI_Comm, void*> comms_;
};

}  // namespace meshtrain::gpu
