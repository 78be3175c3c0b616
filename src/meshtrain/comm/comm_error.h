// Failures of MPI calls. The engine's communicators return MPI errors instead
// of aborting (MPI_ERRORS_RETURN), and every call's status goes through
// check_mpi, which throws CommError naming the call, the group and MPI's own
// message. A rank that catches one cannot continue the step with its peers:
// the caller ends the job with abort_all (comm/abort.h).
#pragma once

#include <string>
#include <string_view>

#include "meshtrain/core/error.h"

namespace meshtrain {

class CommError : public Error {
 public:
  explicit CommError(const std::string& msg) : Error(msg) {}
};

// Throws CommError("<call> on group '<group>' failed: <MPI message>") unless
// rc == MPI_SUCCESS.
void check_mpi(int rc, std::string_view call, std::string_view group);

}  // namespace meshtrain
