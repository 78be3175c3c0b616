// Running a job (a launcher and the ranks it starts) as a child of this
// process, in a process group of its own, so that the whole job can be ended
// at once: on its time-out, and when this process is told to stop. `sweep`
// (and any other driver of many runs) catches SIGTERM, SIGINT and SIGHUP with
// catch_stop_signals(); run_in_group() then ends the running job's group
// (SIGTERM, then SIGKILL after a grace period) and returns, and the driver
// writes what it has and exits 128 + the signal. Nothing is left running:
// this process becomes the child subreaper of its jobs (prctl), so the
// processes a dying launcher leaves behind are its own to kill and reap.
#pragma once

#include <string>

namespace meshtrain {

struct ChildOutcome {
  int exit_code = -1;      // 128 + signal when the child was killed
  bool timed_out = false;  // ended after timeout_s
  int stopped_by = 0;      // the signal this process received, which ended the child
  double wall_s = 0;
};

// Records SIGTERM, SIGINT and SIGHUP instead of dying of them (idempotent).
void catch_stop_signals();
// The first stop signal received since catch_stop_signals(), 0 if none.
int stop_signal();

// Runs `command` with /bin/sh -c in a new process group, its standard output
// and error appended to `log` ("" keeps this process's). Ends the group after
// timeout_s (<= 0: no limit) or once a stop signal arrives; waits for it.
ChildOutcome run_in_group(const std::string& command, const std::string& log, double timeout_s,
                          double grace_s = 5);

// The last line of a job's log mentioning an error, else its last non-empty
// line (what a driver records as the reason a run failed).
std::string failure_line(const std::string& log);

}  // namespace meshtrain
