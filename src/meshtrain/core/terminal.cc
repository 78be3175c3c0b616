#include "meshtrain/core/terminal.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace meshtrain {

namespace {
// Open MPI, MPICH/Hydra (PMI), PMIx launchers and Slurm's srun set these.
// Read before main(): a singleton MPI_Init sets some of them itself.
bool launched() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}
const bool under_launcher = launched();
}  // namespace

bool live_output_enabled(LiveOutput mode) {
  switch (mode) {
    case LiveOutput::on: return true;
    case LiveOutput::off: return false;
    case LiveOutput::automatic: break;
  }
  return isatty(fileno(stdout)) && !under_launcher;
}

}  // namespace meshtrain
