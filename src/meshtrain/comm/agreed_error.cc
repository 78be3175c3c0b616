#include "meshtrain/comm/agreed_error.h"

#include <cstdint>

namespace meshtrain {

std::string agree_on_error(Communicator& comm, const std::string& mine) {
  int first = mine.empty() ? comm.size() : comm.rank();
  comm.all_reduce(&first, 1, ReduceOp::min);
  if (first == comm.size()) return "";
  int64_t n = first == comm.rank() ? static_cast<int64_t>(mine.size()) : 0;
  comm.broadcast(&n, 1, first);
  std::string msg = first == comm.rank() ? mine : std::string(static_cast<size_t>(n), ' ');
  comm.broadcast(msg.data(), n, MPI_CHAR, first);
  return msg;
}

void throw_if_any(Communicator& comm, const std::string& mine) {
  const std::string msg = agree_on_error(comm, mine);
  if (!msg.empty()) throw AgreedError(msg);
}

}  // namespace meshtrain
