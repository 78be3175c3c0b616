#include "meshtrain/tune/results_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "meshtrain/core/error.h"

namespace meshtrain::tune {

std::vector<Trial> read_results(const std::string& path) {
  std::vector<Trial> out;
  std::ifstream f(path, std::ios::binary);
  if (!f) return out;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  size_t at = 0;
  int line_no = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    ++line_no;
    if (nl == std::string::npos) break;  // cut short by a kill: the trial in flight
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(nlohmann::json::parse(line).get<Trial>());
    } catch (const std::exception& e) {
      throw Error(fmt::format("{} line {}: not a trial record ({})", path, line_no, e.what()));
    }
  }
  return out;
}

bool drop_partial_line(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.empty() || text.back() == '\n') return false;
  const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  check(truncate(path.c_str(), static_cast<off_t>(keep)) == 0, "cannot repair results file {}: {}", path,
        std::strerror(errno));
  return true;
}

void append_result(const std::string& path, const Trial& t) {
  const std::string line = nlohmann::json(t).dump() + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  check(fd >= 0, "cannot open results file {}: {}", path, std::strerror(errno));
  const ssize_t n = write(fd, line.data(), line.size());
  const int err = errno;
  const bool synced = fsync(fd) == 0;
  close(fd);
  check(n == static_cast<ssize_t>(line.size()) && synced, "cannot append to results file {}: {}", path,
        std::strerror(err));
}

}  // namespace meshtrain::tune
