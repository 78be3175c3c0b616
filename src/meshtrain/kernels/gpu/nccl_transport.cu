#include "meshtrain/kernels/gpu/nccl_transport.h"

#include <nccl.h>

#include <string>

#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/runtime_api.h"

namespace meshtrain::gpu {

namespace {

void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("NCCL error: ") + ncclGetErrorString(r) + " (" + call + ")");
}
#define NCCL_CHECK(call) check_nccl((call), #call)

ncclDataType_t nccl_type(MPI_Datatype t) {
  if (t == MPI_FLOAT) return ncclFloat32;
  if (t == mpi_bf16()) return ncclBfloat16;
  if (t == MPI_DOUBLE) return ncclFloat64;
  if (t == MPI_INT32_T) return ncclInt32;
  if (t == MPI_INT64_T) return ncclInt64;
  if (t == MPI_UINT8_T || t == MPI_BYTE) return ncclUint8;
  throw std::invalid_argument("NcclTransport: datatype without an NCCL equivalent");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

ncclComm_t as_nccl(void* c) { return static_cast<ncclComm_t>(c); }

int finish() {
  GPU_CHECK(gpuStreamSynchronize(stream()));
  return MPI_SUCCESS;
}

}  // namespace

NcclTransport::~NcclTransport() {
  for (auto& [mpi, c] : comms_) ncclCommDestroy(as_nccl(c));
}

void* NcclTransport::comm_for(MPI_Comm comm) {
  auto it = comms_.find(comm);
  if (it != comms_.end()) return it->second;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  const int rc = MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
  if (rc != MPI_SUCCESS) throw std::runtime_error("NcclTransport: MPI_Bcast of the NCCL id failed");
  ncclComm_t c;
  NCCL_CHECK(ncclCommInitRank(&c, size, id, rank));
  comms_.emplace(comm, c);
  return c;
}

int NcclTransport::all_reduce(void* buf, int64_t count, MPI_Datatype type, ReduceOp op, MPI_Comm comm) {
  NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(type), nccl_op(op), as_nccl(comm_for(comm)), stream()));
  return finish();
}

int NcclTransport::reduce_scatter(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                                  ReduceOp op, MPI_Comm comm) {
  ncclComm_t c = as_nccl(comm_for(comm));
  if (send != MPI_IN_PLACE) {
    NCCL_CHECK(ncclReduceScatter(send, recv, count_per_rank, nccl_type(type), nccl_op(op), c, stream()));
    return finish();
  }
  // MPI's in place: inputs in recv, result to recv's front; NCCL's in-place
  // form puts it at this rank's offset instead, so reduce into scratch.
  const size_t chunk = static_cast<size_t>(count_per_rank * mpi_type_bytes(type));
  Buffer out(MemCategory::comm_buffers, chunk, /*zero=*/false, Device::cuda);
  NCCL_CHECK(ncclReduceScatter(recv, out.data(), count_per_rank, nccl_type(type), nccl_op(op), c, stream()));
  GPU_CHECK(gpuMemcpyAsync(recv, out.data(), chunk, gpuMemcpyDefault, stream()));
  return finish();
}

int NcclTransport::all_gather(const void* send, void* recv, int64_t count_per_rank, MPI_Datatype type,
                              MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const size_t chunk = static_cast<size_t>(count_per_rank * mpi_type_bytes(type));
  const void* mine = send == MPI_IN_PLACE ? static_cast<const char*>(recv) + chunk * rank : send;
  NCCL_CHECK(ncclAllGather(mine, recv, count_per_rank, nccl_type(type), as_nccl(comm_for(comm)), stream()));
  return finish();
}

int NcclTransport::broadcast(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm) {
  NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(type), root, as_nccl(comm_for(comm)), stream()));
  return finish();
}

int NcclTransport::send(const void* buf, int64_t count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  NCCL_CHECK(ncclSend(buf, count, nccl_type(type), dest, as_nccl(comm_for(comm)), stream()));
  return finish();
}

int NcclTransport::recv(void* buf, int64_t count, MPI_Datatype type, int src, int tag, MPI_Comm comm) {
  NCCL_CHECK(ncclRecv(buf, count, nccl_type(type), src, as_nccl(comm_for(comm)), stream()));
  return finish();
}

void NcclTransport::copy(void* dst, const void* src, size_t bytes) { gpu::copy(dst, src, bytes); }

}  // namespace meshtrain::gpu
