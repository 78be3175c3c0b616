// Ending a multi-rank job when one rank fails. A rank that throws mid-step
// leaves its peers blocked in the next collective; abort_all makes every rank
// of MPI_COMM_WORLD exit non-zero at once instead of hanging.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace meshtrain {

// Prints one line "[rank R] error: <message>" to stderr and calls
// MPI_Abort(MPI_COMM_WORLD, 1). Without MPI initialised (or after
// MPI_Finalize) it prints "error: <message>" and exits with status 1.
[[noreturn]] void abort_all(const std::string& message);

// Runs body() and returns its result; any exception escaping it ends the job
// through abort_all(e.what()). For the main function of a multi-rank program.
template <typename F>
int run_or_abort(F&& body) {
  try {
    return std::forward<F>(body)();
  } catch (const std::exception& e) {
    abort_all(e.what());
  } catch (...) {
    abort_all("unknown exception");
  }
}

}  // namespace meshtrain
