#include "meshtrain/measure/child_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

volatile sig_atomic_t g_stop = 0;

extern "C" void record_stop(int sig) {
  if (g_stop == 0) g_stop = sig;
}

}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = record_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleeping wait wakes up
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_stop; }

ChildOutcome run_in_group(const std::string& command, const std::string& log, double timeout_s, double grace_s) {
  ChildOutcome o;
  // Orphans of the job (ranks whose launcher died) become this process's
  // children rather than init's, so that they can be ended and reaped.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const pid_t pid = fork();
  check(pid >= 0, "cannot start a child process (fork failed)");
  if (pid == 0) {
    setpgid(0, 0);
    // The job starts with the default dispositions, whatever this process catches.
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
    if (!log.empty()) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
    }
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no window in which a kill of the group misses it
  int status = 0;
  double term_at = -1;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      status = -1;
      break;
    }
    const bool timed_out = timeout_s > 0 && elapsed() > timeout_s;
    if (term_at < 0 && (timed_out || g_stop != 0)) {
      o.timed_out = timed_out && g_stop == 0;
      o.stopped_by = g_stop;
      kill(-pid, SIGTERM);
      term_at = elapsed();
    } else if (term_at >= 0 && elapsed() - term_at > grace_s) {
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The launcher is gone; anything it left in the group goes with it, and
  // is reaped here (this process adopted it: see below).
  kill(-pid, SIGKILL);
  for (const double until = elapsed() + grace_s; elapsed() < until;) {
    const pid_t r = waitpid(-pid, nullptr, WNOHANG);
    if (r < 0) break;  // no child of that group left
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  o.wall_s = elapsed();
  o.exit_code = status < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

std::string failure_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last, err;
  while (std::getline(f, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    if (line.find("error") != std::string::npos || line.find("Error") != std::string::npos) err = line;
  }
  return err.empty() ? last : err;
}

}  // namespace meshtrain
