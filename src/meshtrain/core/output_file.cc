#include "meshtrain/core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

namespace fs = std::filesystem;

// Writes all of `bytes` to `fd`; false (errno set) on failure.
bool write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string folder_of(const std::string& target) {
  const fs::path d = fs::path(target).parent_path();
  return d.empty() ? std::string(".") : d.string();
}

// A fresh name beside `target`, unique within this process and across processes.
std::string temporary_name(const std::string& target) {
  static std::atomic<int> counter{0};
  return target + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Flushes a folder's entries (the rename) to disk. Some file systems refuse
// fsync on a folder (EINVAL): the rename stands there all the same.
int sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd) == 0 || errno == EINVAL || errno == EROFS ? 0 : errno;
  ::close(fd);
  return rc;
}

}  // namespace

OutputFile OutputFile::open(const std::string& path, std::string_view what) {
  OutputFile f;
  f.path_ = path;
  f.what_ = what;
  if (path.empty()) return f;
  if (path == "-") {
    f.kind_ = Kind::standard_output;
    f.target_ = path;
    return f;
  }
  // Follow symbolic links to the file the user means.
  fs::path p = path;
  struct stat st {};
  int hops = 0;
  for (;; ++hops) {
    f.target_ = p.string();
    if (hops > 40) f.fail(ELOOP);
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) f.fail(errno);
      f.kind_ = Kind::regular;  // a new file
      break;
    }
    if (!S_ISLNK(st.st_mode)) {
      if (S_ISDIR(st.st_mode)) f.fail(EISDIR);
      f.kind_ = S_ISREG(st.st_mode) ? Kind::regular : Kind::direct;
      break;
    }
    std::error_code ec;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) f.fail(ec.value());
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  const bool exists = ::access(f.target_.c_str(), F_OK) == 0;
  if (exists && ::access(f.target_.c_str(), W_OK) != 0) f.fail(errno);
  if (f.kind_ == Kind::regular) {
    // The folder must take a new file (the temporary): try one now.
    const std::string probe = temporary_name(f.target_);
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) f.fail(errno);
    ::close(fd);
    ::unlink(probe.c_str());
  }
  return f;
}

void OutputFile::fail(int err) const {
  const std::string shown = target_.empty() || target_ == path_ ? path_ : path_ + " (-> " + target_ + ")";
  throw Error(fmt::format("cannot write {} {}: {}", what_, shown, std::strerror(err)));
}

void OutputFile::write(std::initializer_list<std::string_view> parts) const {
  if (kind_ == Kind::regular)
    write_atomically(parts);
  else if (kind_ != Kind::none)
    write_direct(parts);
}

void OutputFile::write_direct(std::initializer_list<std::string_view> parts) const {
  int fd = 1;
  if (kind_ == Kind::standard_output) {
    std::fflush(stdout);
  } else {
    fd = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(errno);
  }
  bool ok = true;
  for (const std::string_view part : parts) ok = ok && write_all(fd, part);
  const int err = errno;
  if (kind_ != Kind::standard_output) ::close(fd);
  if (!ok) fail(err);
}

void OutputFile::write_atomically(std::initializer_list<std::string_view> parts) const {
  struct stat old {};
  const bool replacing = ::stat(target_.c_str(), &old) == 0;
  const std::string tmp = temporary_name(target_);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(errno);
  bool ok = !replacing || ::fchmod(fd, old.st_mode & 07777) == 0;
  for (const std::string_view part : parts) ok = ok && write_all(fd, part);
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(tmp.c_str(), target_.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    fail(err);
  }
  if (const int e = sync_folder(folder_of(target_)); e != 0) fail(e);
}

void write_output_file(const std::string& path, std::initializer_list<std::string_view> parts,
                       std::string_view what) {
  OutputFile::open(path, what).write(parts);
}

}  // namespace meshtrain
