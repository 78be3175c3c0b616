#include "meshtrain/comm/comm_error.h"

#include <mpi.h>

namespace meshtrain {

void check_mpi(int rc, std::string_view call, std::string_view group) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw CommError(fmt::format("{} on group '{}' failed: {}", call, group,
                              len > 0 ? std::string_view(text, len) : std::string_view("unknown MPI error")));
}

}  // namespace meshtrain
