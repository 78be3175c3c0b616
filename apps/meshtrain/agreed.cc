#include "agreed.h"

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

namespace meshtrain::cli {

bool agreed(const char* command, const std::function<void()>& step) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string error;
  try {
    step();
  } catch (const std::exception& e) {
    error = e.what();
  }
  const int mine = error.empty() ? world : rank;
  int first = world;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first < world && rank == first) std::fprintf(stderr, "meshtrain %s: error: %s\n", command, error.c_str());
  return first == world;
}

}  // namespace meshtrain::cli
