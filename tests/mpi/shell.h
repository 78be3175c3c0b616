// Running a shell command from a multi-rank test and keeping its exit status
// and combined output (the command's stdout and stderr go through `log`).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace meshtrain::testing {

struct Outcome {
  int rc = -1;          // exit status; 128 when killed by a signal
  std::string output;   // stdout and stderr
};

inline Outcome run_shell(const std::string& cmd, const std::filesystem::path& log) {
  const int st = std::system((cmd + " >" + log.string() + " 2>&1").c_str());
  Outcome o;
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  o.output = ss.str();
  return o;
}

}  // namespace meshtrain::testing
