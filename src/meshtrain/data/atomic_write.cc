#include "meshtrain/data/atomic_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "meshtrain/core/error.h"

namespace meshtrain::data {

namespace {

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

}  // namespace

void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts,
                           std::string_view what) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot write {} {}: {}", what, path, std::strerror(errno)));
  bool ok = true;
  for (const std::string_view part : parts) ok = ok && write_all(fd, part);
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot write {} {}: {}", what, path, std::strerror(err)));
  }
}

}  // namespace meshtrain::data
