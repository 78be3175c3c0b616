#include "meshtrain/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"

namespace meshtrain::data {

// The format is little-endian; the tokens are used in place.
static_assert(std::endian::native == std::endian::little);

namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void write_token_file(const std::string& path, std::span<const uint16_t> tokens) {
  check(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
        "cannot write token file {}: {} tokens exceed the format's limit of {}", path,
        tokens.size(), std::numeric_limits<int32_t>::max());
  std::array<int32_t, kTokenFileHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  write_output_file(
      path,
      {std::string_view(reinterpret_cast<const char*>(header.data()), kTokenFileHeaderBytes),
       std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes())},
      "token file");
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open token file {}: {}", path, errno_text()));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(fmt::format("cannot stat token file {}: {}", path, errno_text()));
  check(S_ISREG(st.st_mode), "token file {} is not a regular file", path);
  const int64_t bytes = st.st_size;
  check(bytes > 0, "token file {} is empty", path);
  check(bytes >= static_cast<int64_t>(kTokenFileHeaderBytes),
        "token file {} is {} bytes, shorter than the {}-byte header", path, bytes,
        kTokenFileHeaderBytes);

  std::array<int32_t, kTokenFileHeaderInts> header{};
  const ssize_t got = ::pread(fd, header.data(), kTokenFileHeaderBytes, 0);
  if (got != static_cast<ssize_t>(kTokenFileHeaderBytes))
    throw Error(fmt::format("cannot read the header of token file {}: {}", path,
                            got < 0 ? errno_text() : std::string("short read")));
  check(header[0] == kTokenFileMagic, "token file {} has bad magic {} (expected {})", path, header[0],
        kTokenFileMagic);
  check(header[1] == kTokenFileVersion,
        "token file {} has version {}; only version {} (uint16 tokens) is supported", path, header[1],
        kTokenFileVersion);
  const int64_t count = header[2];
  check(count >= 0, "token file {} has a negative token count {} in its header", path, count);
  const int64_t body = bytes - static_cast<int64_t>(kTokenFileHeaderBytes);
  const int64_t held = body / static_cast<int64_t>(sizeof(uint16_t));
  check(body >= count * static_cast<int64_t>(sizeof(uint16_t)),
        "token file {} is truncated: header says {} tokens, file holds {}", path, count, held);
  check(body == count * static_cast<int64_t>(sizeof(uint16_t)),
        "token file {} is longer than its header says: header says {} tokens, file holds {} bytes "
        "after the header",
        path, count, body);

  void* map = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) throw Error(fmt::format("cannot map token file {}: {}", path, errno_text()));
  map_ = map;
  map_bytes_ = static_cast<size_t>(bytes);
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map) + kTokenFileHeaderBytes);
  size_ = count;
}

TokenFile::~TokenFile() { unmap(); }

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void TokenFile::unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  tokens_ = nullptr;
  size_ = 0;
}

void TokenFile::validate_vocab(int vocab_size) const {
  check(vocab_size > 0, "cannot check token file {} against a vocabulary of {} tokens", path_,
        vocab_size);
  if (vocab_size > std::numeric_limits<uint16_t>::max()) return;  // every uint16 fits
  const uint16_t limit = static_cast<uint16_t>(vocab_size);
  for (int64_t i = 0; i < size_; ++i) {
    if (tokens_[i] >= limit)
      throw Error(fmt::format("token file {} holds token {} at position {}, outside the vocabulary of {}",
                              path_, tokens_[i], i, vocab_size));
  }
}

}  // namespace meshtrain::data
