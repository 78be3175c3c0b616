// Live output (progress bar, carriage returns) goes only to a person at a
// terminal: a log file gets plain lines, also when the run is launched by
// mpirun (whose ranks write to a pseudo-terminal even when mpirun's own
// output goes to a file). --progress on forces the bar, so these checks can
// tell the two cases apart.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

// Runs `prefix meshtrain train ... extra > file` and returns what stdout held.
std::string train_output(const std::string& prefix, const std::string& extra) {
  const fs::path out = fs::temp_directory_path() / ("mt-live-" + std::to_string(getpid()) + ".log");
  const std::string cmd = "OMP_NUM_THREADS=1 " + prefix + " " + MESHTRAIN_BINARY +
                          " train --model tiny --mock-data --train-iters 3 " + extra + " >" + out.string() +
                          " 2>/dev/null";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  std::ifstream f(out, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  fs::remove(out);
  return s;
}

TEST(LiveOutput, PlainLinesIntoAFile) {
  const std::string s = train_output("", "");
  EXPECT_NE(s.find("iter     3/3"), std::string::npos) << s;
  EXPECT_EQ(s.find('\r'), std::string::npos);
}

TEST(LiveOutput, PlainLinesUnderMpirunIntoAFile) {
  const std::string s = train_output(MT_MPIRUN " -np 1", "");
  EXPECT_NE(s.find("iter     3/3"), std::string::npos) << s;
  EXPECT_EQ(s.find('\r'), std::string::npos);
  // The forced bar does reach the file: the check above can fail.
  EXPECT_NE(train_output(MT_MPIRUN " -np 1", "--progress on").find('\r'), std::string::npos);
}

TEST(LiveOutput, BarOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "util-linux 'script' not found";
  // script(1) runs the command on a fresh pseudo-terminal.
  const std::string s = train_output("script -qec '", "' /dev/null");
  EXPECT_NE(s.find("ETA"), std::string::npos) << s;
}

}  // namespace
