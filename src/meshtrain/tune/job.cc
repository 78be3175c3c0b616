#include "meshtrain/tune/job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "meshtrain/core/error.h"

namespace meshtrain::tune {

namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

// Catches SIGTERM and SIGINT while a job runs; restores the old handlers.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
  }
  ~StopSignals() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
  }

 private:
  struct sigaction old_term_ {}, old_int_ {};
};

}  // namespace

JobOutcome run_job(const std::string& command, const std::string& log_path, double timeout_s) {
  JobOutcome o;
  g_stop_signal = 0;
  StopSignals guard;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  check(pid >= 0, "fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int status = 0;
  bool killed = false;
  double term_at = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) {
      status = -1;
      break;
    }
    const bool late = timeout_s > 0 && elapsed() > timeout_s;
    if (!killed && (late || g_stop_signal)) {
      kill(-pid, SIGTERM);
      killed = true;
      term_at = elapsed();
    } else if (killed && elapsed() - term_at > 5) {
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (g_stop_signal) {
    kill(-pid, SIGKILL);  // anything of the group still alive
    const int sig = g_stop_signal;
    signal(sig, SIG_DFL);
    raise(sig);
  }
  o.wall_s = elapsed();
  o.timed_out = killed;
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

}  // namespace meshtrain::tune
