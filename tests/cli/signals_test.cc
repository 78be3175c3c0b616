// Signals: `sweep` runs each job in a process group of its own and ends the
// whole group when it is told to stop (before, SIGTERM left mpirun and its
// ranks training, orphaned).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

// Waits up to `limit_s` for `pid`; its status, or -1 when still running.
int wait_for(pid_t pid, double limit_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

void stops_on(int sig) {
  const fs::path dir = fs::temp_directory_path() / ("mt-sweep-signal-" + std::to_string(getpid()) + "-" +
                                                    std::to_string(sig));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path pid_file = dir / "job.pid";
  // The "launcher" records its process group and waits, with a child of its own.
  const std::string launcher = "echo $$ > " + pid_file.string() + "; sleep 300 #";
  const pid_t sweep = fork();
  ASSERT_GE(sweep, 0);
  if (sweep == 0) {
    freopen("/dev/null", "w", stdout);
    execl(MESHTRAIN_BINARY, MESHTRAIN_BINARY, "sweep", "--model", "tiny", "--grid", "tp=1,2", "--iters", "1",
          "--out", (dir / "out").c_str(), "--launcher", launcher.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t job = 0;
  for (int i = 0; i < 200 && job == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream f(pid_file);
    f >> job;
  }
  ASSERT_GT(job, 0) << "the job never started";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(-job, 0), 0) << "the job runs in a process group of its own";
  kill(sweep, sig);
  const int status = wait_for(sweep, 20);
  if (status == -1) kill(sweep, SIGKILL), waitpid(sweep, nullptr, 0);
  ASSERT_NE(status, -1) << "sweep did not stop";
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
  errno = 0;
  EXPECT_EQ(kill(-job, 0), -1) << "processes of the job are still running";
  EXPECT_EQ(errno, ESRCH);
  kill(-job, SIGKILL);
  // What ran so far is recorded: the stopped run's row.
  std::ifstream csv(dir / "out" / "sweep.csv");
  const std::string text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("stopped"), std::string::npos) << text;
  fs::remove_all(dir);
}

TEST(Signals, SweepEndsItsJobsProcessGroupOnSigterm) { stops_on(SIGTERM); }
TEST(Signals, SweepEndsItsJobsProcessGroupOnSigint) { stops_on(SIGINT); }

}  // namespace
