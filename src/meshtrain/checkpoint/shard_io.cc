#include "meshtrain/checkpoint/shard_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "meshtrain/core/error.h"

namespace meshtrain::checkpoint {

namespace {

// Opens `path` with O_DIRECT when the file system takes it; `direct` says.
int open_maybe_direct(const std::string& path, int flags, bool& direct) {
  int fd = ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644);
  direct = fd >= 0;
  if (fd < 0 && errno == EINVAL) fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  return fd;
}

// pwrite of all `n` bytes; on EINVAL under O_DIRECT (a file system that
// opened but does not write directly) it falls back to buffered writes.
// Returns 0 or the errno.
int pwrite_all(int fd, const char* p, int64_t n, int64_t at) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, static_cast<size_t>(n), at);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && (::fcntl(fd, F_GETFL) & O_DIRECT)) {
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) != 0) return errno;
      continue;
    }
    if (w < 0) return errno;
    if (w == 0) return ENOSPC;
    p += w, at += w, n -= w;
  }
  return 0;
}

// pread of `n` bytes at `at`, fewer only at the end of the file; returns the
// bytes read or -errno. Falls back to buffered reads as pwrite_all does.
int64_t pread_upto(int fd, char* p, int64_t n, int64_t at) {
  int64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, static_cast<size_t>(n - got), at + got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && (::fcntl(fd, F_GETFL) & O_DIRECT)) {
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) != 0) return -errno;
      continue;
    }
    if (r < 0) return -errno;
    if (r == 0) break;
    got += r;
  }
  return got;
}

// Copies the next `n` bytes of `parts` (from part i, byte k) to `dst`.
struct PartCursor {
  const std::vector<std::string_view>& parts;
  size_t i = 0, k = 0;
  void copy(char* dst, int64_t n) {
    while (n > 0) {
      const int64_t take = std::min<int64_t>(n, static_cast<int64_t>(parts[i].size() - k));
      std::memcpy(dst, parts[i].data() + k, static_cast<size_t>(take));
      dst += take, n -= take, k += static_cast<size_t>(take);
      if (k == parts[i].size()) ++i, k = 0;
    }
  }
};

bool in_place(const std::vector<std::string_view>& parts) {
  return parts.size() == 1 && reinterpret_cast<uintptr_t>(parts[0].data()) % kIoAlign == 0;
}

}  // namespace

IoBuffer::IoBuffer(int64_t bytes) : capacity_(bytes) {
  if (bytes == 0) return;
  buf_ = Buffer(MemCategory::checkpoint, static_cast<size_t>(bytes + kIoAlign), /*zero=*/false);
  const auto p = reinterpret_cast<uintptr_t>(buf_.data());
  aligned_ = static_cast<char*>(buf_.data()) + (kIoAlign - p % kIoAlign) % kIoAlign;
}

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

uint32_t crc32_of(const char* data, int64_t n, uint32_t crc) {
  if (n == 0) return crc;  // zlib answers 0 for a null buffer
  return static_cast<uint32_t>(::crc32_z(crc, reinterpret_cast<const Bytef*>(data), static_cast<z_size_t>(n)));
}

FileDigest write_shard_file(const std::string& path, const std::vector<std::string_view>& parts) {
  FileDigest d;
  for (std::string_view p : parts) d.bytes += static_cast<int64_t>(p.size());
  bool direct = false;
  const int fd = open_maybe_direct(path, O_WRONLY | O_CREAT | O_TRUNC, direct);
  check(fd >= 0, "cannot write {}: {}", path, std::strerror(errno));
  const bool place = in_place(parts);
  IoBuffer staging(place ? 0 : 2 * kIoChunkBytes);
  PartCursor cursor{parts};
  std::future<int> inflight;  // the errno of the chunk being written
  int err = 0;
  for (int64_t at = 0, i = 0; at < d.bytes && err == 0; at += kIoChunkBytes, ++i) {
    const int64_t n = std::min(kIoChunkBytes, d.bytes - at), padded = direct ? round_up(n, kIoAlign) : n;
    char* chunk = place ? const_cast<char*>(parts[0].data()) + at : staging.data() + (i % 2) * kIoChunkBytes;
    if (!place) {
      cursor.copy(chunk, n);
      std::memset(chunk + n, 0, static_cast<size_t>(padded - n));
    }
    for (int64_t b = 0; b < n; b += kCrcBlockBytes)
      d.block_crc32.push_back(crc32_of(chunk + b, std::min(kCrcBlockBytes, n - b)));
    d.crc32 = crc32_of(chunk, n, d.crc32);
    if (inflight.valid()) err = inflight.get();
    if (err == 0) inflight = std::async(std::launch::async, pwrite_all, fd, chunk, padded, at);
  }
  if (inflight.valid() && err == 0) err = inflight.get();
  else if (inflight.valid()) inflight.wait();
  if (err == 0 && direct && d.bytes % kIoAlign != 0 && ::ftruncate(fd, d.bytes) != 0) err = errno;
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  check(err == 0, "cannot write {}: {}", path, std::strerror(err));
  return d;
}

namespace {

// The windows to read: runs of the blocks `ranges` touch, cut into pieces
// of at most `window` bytes (a multiple of block_bytes).
std::vector<ByteRange> read_windows(const std::vector<ByteRange>& ranges, int64_t file_bytes, int64_t block_bytes,
                                    int64_t window) {
  std::vector<ByteRange> runs;
  for (const ByteRange& r : ranges) {
    if (r.end <= r.begin) continue;
    const int64_t b = r.begin / block_bytes * block_bytes, e = std::min(round_up(r.end, block_bytes), file_bytes);
    if (!runs.empty() && b <= runs.back().end) runs.back().end = std::max(runs.back().end, e);
    else runs.push_back({b, e});
  }
  std::vector<ByteRange> out;
  for (const ByteRange& run : runs)
    for (int64_t at = run.begin; at < run.end; at += window) out.push_back({at, std::min(run.end, at + window)});
  return out;
}

}  // namespace

int64_t read_ranges(const std::string& path, int64_t file_bytes, int64_t block_bytes,
                 const std::vector<uint32_t>& block_crc32, const std::vector<ByteRange>& ranges,
                 const std::function<void(size_t, int64_t, const char*, int64_t)>& use) {
  check(block_bytes > 0 && block_bytes % kIoAlign == 0, "{}: block size {} is not a multiple of {}", path,
        block_bytes, kIoAlign);
  check(static_cast<int64_t>(block_crc32.size()) == (file_bytes + block_bytes - 1) / block_bytes,
        "{}: {} block checksums for {} bytes", path, block_crc32.size(), file_bytes);
  const int64_t window = round_up(kReadWindowBytes, block_bytes);
  const std::vector<ByteRange> windows = read_windows(ranges, file_bytes, block_bytes, window);
  if (windows.empty()) return 0;
  bool direct = false;
  const int fd = open_maybe_direct(path, O_RDONLY, direct);
  check(fd >= 0, "cannot open {}: {}", path, std::strerror(errno));
  IoBuffer buf(2 * window);
  auto start = [&](size_t w) {
    char* dst = buf.data() + (w % 2) * window;
    const ByteRange r = windows[w];
    return std::async(std::launch::async, pread_upto, fd, dst, round_up(r.end - r.begin, kIoAlign), r.begin);
  };
  std::future<int64_t> next = start(0);
  size_t lo = 0;  // ranges before it end in an earlier window
  std::string err;
  int64_t bytes = 0;
  for (size_t w = 0; w < windows.size() && err.empty(); ++w) {
    const int64_t got = next.get();
    if (w + 1 < windows.size()) next = start(w + 1);
    const ByteRange win = windows[w];
    const char* data = buf.data() + (w % 2) * window;
    bytes += win.end - win.begin;
    if (got < win.end - win.begin) {
      err = fmt::format("cannot read {}: {}", path, got < 0 ? std::strerror(int(-got)) : "unexpected end of file");
      break;
    }
    for (int64_t b = win.begin; b < win.end && err.empty(); b += block_bytes) {
      const uint32_t crc = crc32_of(data + (b - win.begin), std::min(block_bytes, win.end - b));
      const uint32_t want = block_crc32[static_cast<size_t>(b / block_bytes)];
      if (crc != want)
        err = fmt::format("{} fails its checksum (block {} at byte {}: CRC-32 {:08x}, recorded {:08x})", path,
                          b / block_bytes, b, crc, want);
    }
    for (size_t i = lo; i < ranges.size() && ranges[i].begin < win.end && err.empty(); ++i) {
      const int64_t b = std::max(ranges[i].begin, win.begin), e = std::min(ranges[i].end, win.end);
      if (b >= e) continue;
      try {
        use(i, b - ranges[i].begin, data + (b - win.begin), e - b);
      } catch (const std::exception& ex) {
        err = ex.what();
      }
    }
    while (lo < ranges.size() && ranges[lo].end <= win.end) ++lo;
  }
  if (next.valid()) next.wait();
  ::close(fd);
  check(err.empty(), "{}", err);
  return bytes;
}

}  // namespace meshtrain::checkpoint
