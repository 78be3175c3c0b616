// Errors every rank raises together. When ranks check different things (each
// its own checkpoint files, its own gradients), they first agree on the
// outcome: agree_on_error() returns, on every rank, the message of the
// lowest-ranked rank that found a problem (empty: none did). Every rank then
// throws the same AgreedError, and the CLI prints it once (rank 0) and exits
// non-zero on every rank, instead of aborting the job.
#pragma once

#include <string>

#include "meshtrain/comm/communicator.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

class AgreedError : public Error {
 public:
  using Error::Error;
};

// Collective over `comm`. `after_io`: the ranks arrive after disk I/O of
// different lengths (checkpoint shards), which takes as long as the disk
// needs: they first meet in a barrier the communication watchdog does not
// time (a rank that dies is still noticed by the launcher).
std::string agree_on_error(Communicator& comm, const std::string& mine, bool after_io = false);

// Collective: throws AgreedError(agreed message) on every rank if any rank's
// `mine` is non-empty.
void throw_if_any(Communicator& comm, const std::string& mine, bool after_io = false);

}  // namespace meshtrain
