#include "meshtrain/comm/abort.h"

#include <cstdio>
#include <cstdlib>

#include <mpi.h>

#include "meshtrain/comm/node_peers.h"

namespace meshtrain {

void abort_all(const std::string& message) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "[rank %d] error: %s\n", rank, message.c_str());
    std::fflush(stderr);
    NodePeers::leave();  // peers report this rank's own message, not "died"
    MPI_Abort(MPI_COMM_WORLD, 1);
  } else {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
  }
  std::_Exit(1);  // MPI_Abort does not return; this covers an MPI that does
}

}  // namespace meshtrain
