#include "meshtrain/checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"

namespace meshtrain::checkpoint {

namespace fs = std::filesystem;

namespace {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "cannot open {} to sync it: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  check(rc == 0, "cannot sync {}: {}", path, std::strerror(err));
}

void prune(const std::string& dir, int keep_last) {
  if (keep_last <= 0) return;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("iter_", 0) == 0 && n.find('.') == std::string::npos) names.push_back(n);
  }
  std::sort(names.begin(), names.end());  // zero-padded: lexical = numeric order
  for (size_t i = 0; i + keep_last < names.size(); ++i) fs::remove_all(fs::path(dir) / names[i]);
}

}  // namespace

std::string iteration_dir_name(int iteration) { return fmt::format("iter_{:07d}", iteration); }

std::string stage_dir(const std::string& dir, const std::string& name) {
  const fs::path staged = fs::path(dir) / (name + ".tmp");
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec, "cannot create checkpoint folder {}: {}", dir, ec.message());
  fs::remove_all(staged, ec);
  fs::create_directory(staged, ec);
  check(!ec, "cannot create {}: {}", staged.string(), ec.message());
  return staged.string();
}

void write_durably(const std::string& path, const std::vector<std::string_view>& parts) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, "cannot write {}: {}", path, std::strerror(errno));
  int err = 0;
  for (std::string_view part : parts) {
    while (!part.empty() && err == 0) {
      const ssize_t w = ::write(fd, part.data(), part.size());
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) err = errno;
      else part.remove_prefix(static_cast<size_t>(w));
    }
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  check(err == 0, "cannot write {}: {}", path, std::strerror(err));
}

std::string commit_dir(const std::string& dir, const std::string& staged, const std::string& name, int keep_last) {
  fsync_path(staged);
  const fs::path final_path = fs::path(dir) / name;
  std::error_code ec;
  if (fs::exists(final_path)) {  // the same iteration saved again: replace it
    const fs::path old = final_path.string() + ".replaced";
    fs::remove_all(old, ec);
    fs::rename(final_path, old, ec);
    check(!ec, "cannot move the previous {} aside: {}", final_path.string(), ec.message());
  }
  fs::rename(staged, final_path, ec);
  check(!ec, "cannot rename {} to {}: {}", staged, final_path.string(), ec.message());
  fsync_path(dir);
  write_output_file((fs::path(dir) / "latest").string(), {name, "\n"}, "checkpoint pointer");
  fsync_path(dir);
  fs::remove_all(final_path.string() + ".replaced", ec);
  prune(dir, keep_last);
  return final_path.string();
}

void discard_dir(const std::string& staged) {
  std::error_code ec;
  fs::remove_all(staged, ec);
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path latest = fs::path(path) / "latest";
  if (fs::exists(latest)) {
    std::ifstream in(latest);
    std::string name;
    std::getline(in, name);
    check(!name.empty() && name.find('/') == std::string::npos, "{} does not name a checkpoint folder",
          latest.string());
    const fs::path p = fs::path(path) / name;
    check(fs::is_directory(p), "{} names {}, which does not exist", latest.string(), p.string());
    return p.string();
  }
  check(fs::exists(fs::path(path) / "metadata.json"), "no checkpoint in {} (neither a latest file nor metadata.json)",
        path);
  return path;
}

}  // namespace meshtrain::checkpoint
