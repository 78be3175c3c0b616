#include "meshtrain/comm/agreed_error.h"

#include <cstdint>

#include "meshtrain/comm/comm_error.h"

namespace meshtrain {

std::string agree_on_error(Communicator& comm, const std::string& mine, bool after_io) {
  if (after_io) check_mpi(MPI_Barrier(comm.raw()), "MPI_Barrier", comm.name());
  int first = mine.empty() ? comm.size() : comm.rank();
  comm.all_reduce(&first, 1, ReduceOp::min);
  if (first == comm.size()) return "";
  int64_t n = first == comm.rank() ? static_cast<int64_t>(mine.size()) : 0;
  comm.broadcast(&n, 1, first);
  std::string msg = first == comm.rank() ? mine : std::string(static_cast<size_t>(n), ' ');
  comm.broadcast(msg.data(), n, MPI_CHAR, first);
  return msg;
}

void throw_if_any(Communicator& comm, const std::string& mine, bool after_io) {
  const std::string msg = agree_on_error(comm, mine, after_io);
  if (!msg.empty()) throw AgreedError(msg);
}

}  // namespace meshtrain
