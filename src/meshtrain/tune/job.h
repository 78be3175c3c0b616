// A job: one shell command run in its own process group, its output in a
// log file, killed (TERM, then KILL 5 s later) when it outlives its time-out
// or when this process receives SIGTERM or SIGINT. In the latter case the
// job's group is ended first, then the signal is raised again with its
// default action, so whoever stopped the caller also stops the job.
#pragma once

#include <string>

namespace meshtrain::tune {

struct JobOutcome {
  int exit_code = -1;      // 128 + signal when the job died of one
  bool timed_out = false;
  double wall_s = 0;
};

// timeout_s <= 0: none.
JobOutcome run_job(const std::string& command, const std::string& log_path, double timeout_s);

// The last line of a log mentioning an error, else its last non-empty line.
std::string failure_line(const std::string& log_path);

}  // namespace meshtrain::tune
