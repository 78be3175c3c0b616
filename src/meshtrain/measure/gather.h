// Collecting one string per rank on rank 0 (the run report's per-rank
// records). Raw MPI on the communicator's handle, so the gather is not
// counted in any group's CommStats and does not appear in a trace.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/comm/communicator.h"

namespace meshtrain {

// Collective over `comm`: on its rank 0, every rank's `mine` in rank order;
// on the other ranks, an empty vector. Throws Error if the total exceeds
// MPI's int counts.
std::vector<std::string> gather_strings(const Communicator& comm, const std::string& mine);

}  // namespace meshtrain
