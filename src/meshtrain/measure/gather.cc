#include "meshtrain/measure/gather.h"

#include <climits>

#include "meshtrain/comm/comm_error.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

std::vector<std::string> gather_strings(const Communicator& comm, const std::string& mine) {
  const MPI_Comm c = comm.raw();
  const int64_t len64 = static_cast<int64_t>(mine.size());
  int64_t total = 0;
  check_mpi(MPI_Allreduce(&len64, &total, 1, MPI_INT64_T, MPI_SUM, c), "MPI_Allreduce", comm.name());
  check(total <= INT_MAX, "per-rank records are too large to gather on rank 0 ({} bytes)", total);
  const int len = static_cast<int>(len64);
  const bool root = comm.rank() == 0;
  std::vector<int> lens(root ? comm.size() : 0), displs(root ? comm.size() : 0);
  check_mpi(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, c), "MPI_Gather", comm.name());
  for (size_t r = 1; r < lens.size(); ++r) displs[r] = displs[r - 1] + lens[r - 1];
  std::string all(root ? static_cast<size_t>(total) : 0, '\0');
  check_mpi(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, c),
            "MPI_Gatherv", comm.name());
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r) out.emplace_back(all.data() + displs[r], lens[r]);
  return out;
}

}  // namespace meshtrain
