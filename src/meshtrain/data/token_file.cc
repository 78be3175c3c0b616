#include "meshtrain/data/token_file.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"

namespace meshtrain::data {

namespace {

std::array<int32_t, kTokenFileHeaderInts> header_of(int64_t count, bool wide) {
  std::array<int32_t, kTokenFileHeaderInts> h{};
  h[0] = wide ? kTokenFileMagic32 : kTokenFileMagic;
  h[1] = wide ? kTokenFileVersion32 : kTokenFileVersion;
  h[2] = static_cast<int32_t>(count);
  return h;
}

constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();

}  // namespace

void write_token_file(const std::string& path, std::span<const uint16_t> tokens) {
  check(tokens.size() <= static_cast<size_t>(kMaxTokens),
        "cannot write token file {}: {} tokens exceed the format's limit of {}", path,
        tokens.size(), kMaxTokens);
  const auto header = header_of(static_cast<int64_t>(tokens.size()), false);
  write_output_file(
      path,
      {std::string_view(reinterpret_cast<const char*>(header.data()), kTokenFileHeaderBytes),
       std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes())},
      "token file");
}

// ------------------------------------------------------------------ writer --

TokenFileWriter::TokenFileWriter(const std::string& path, bool wide)
    : path_(path), tmp_(path + ".tmp-" + std::to_string(::getpid())), wide_(wide) {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr) fail(errno);
  const auto header = header_of(0, wide_);
  if (std::fwrite(header.data(), 1, kTokenFileHeaderBytes, file_) != kTokenFileHeaderBytes) fail(errno);
}

TokenFileWriter::~TokenFileWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    ::unlink(tmp_.c_str());
  }
}

void TokenFileWriter::fail(int err) {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  ::unlink(tmp_.c_str());
  throw Error(fmt::format("cannot write token file {}: {}", path_, std::strerror(err)));
}

void TokenFileWriter::append(std::span<const int32_t> ids) {
  MT_ASSERT(file_ != nullptr);
  check(count_ + static_cast<int64_t>(ids.size()) <= kMaxTokens,
        "cannot write token file {}: more than the format's limit of {} tokens", path_, kMaxTokens);
  constexpr size_t kBlock = 4096;
  uint16_t narrow[kBlock];
  for (size_t i = 0; i < ids.size(); i += kBlock) {
    const size_t n = std::min(kBlock, ids.size() - i);
    size_t wrote;
    if (wide_) {
      wrote = std::fwrite(ids.data() + i, sizeof(int32_t), n, file_);
    } else {
      for (size_t k = 0; k < n; ++k) {
        MT_ASSERT(ids[i + k] >= 0 && ids[i + k] < 65536);
        narrow[k] = static_cast<uint16_t>(ids[i + k]);
      }
      wrote = std::fwrite(narrow, sizeof(uint16_t), n, file_);
    }
    if (wrote != n) fail(errno ? errno : EIO);
  }
  count_ += static_cast<int64_t>(ids.size());
}

void TokenFileWriter::finish() {
  MT_ASSERT(file_ != nullptr);
  const auto header = header_of(count_, wide_);
  if (std::fflush(file_) != 0) fail(errno);
  if (::pwrite(fileno(file_), header.data(), kTokenFileHeaderBytes, 0) !=
      static_cast<ssize_t>(kTokenFileHeaderBytes))
    fail(errno ? errno : EIO);
  if (::fsync(fileno(file_)) != 0) fail(errno);
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0 || ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("cannot write token file {}: {}", path_, std::strerror(err)));
  }
}

// ------------------------------------------------------------------ reader --

TokenFile::TokenFile(const std::string& path) : file_(path, "token file") {
  const int64_t bytes = static_cast<int64_t>(file_.size());
  check(bytes > 0, "token file {} is empty", path);
  check(bytes >= static_cast<int64_t>(kTokenFileHeaderBytes),
        "token file {} is {} bytes, shorter than the {}-byte header", path, bytes,
        kTokenFileHeaderBytes);
  std::array<int32_t, kTokenFileHeaderInts> header{};
  std::memcpy(header.data(), file_.data(), kTokenFileHeaderBytes);
  check(header[0] == kTokenFileMagic || header[0] == kTokenFileMagic32,
        "token file {} has bad magic {} (expected {} or {})", path, header[0], kTokenFileMagic,
        kTokenFileMagic32);
  const bool wide = header[0] == kTokenFileMagic32;
  const int32_t version = wide ? kTokenFileVersion32 : kTokenFileVersion;
  check(header[1] == version,
        "token file {} has magic {} and version {}; supported are version {} (uint16 tokens, magic "
        "{}) and {} (uint32 tokens, magic {})",
        path, header[0], header[1], kTokenFileVersion, kTokenFileMagic, kTokenFileVersion32,
        kTokenFileMagic32);
  const int64_t count = header[2];
  check(count >= 0, "token file {} has a negative token count {} in its header", path, count);
  const int64_t width = wide ? 4 : 2;
  const int64_t body = bytes - static_cast<int64_t>(kTokenFileHeaderBytes);
  check(body >= count * width, "token file {} is truncated: header says {} tokens, file holds {}",
        path, count, body / width);
  check(body == count * width,
        "token file {} is longer than its header says: header says {} tokens, file holds {} bytes "
        "after the header",
        path, count, body);
  tokens_ = TokenArray{file_.data() + kTokenFileHeaderBytes, count, wide ? TokenType::u32 : TokenType::u16};
}

const uint16_t* TokenFile::data() const {
  MT_ASSERT(tokens_.type == TokenType::u16);
  return static_cast<const uint16_t*>(tokens_.base);
}

void TokenFile::validate_vocab(int vocab_size) const {
  check(vocab_size > 0, "cannot check token file {} against a vocabulary of {} tokens", path(),
        vocab_size);
  const int64_t i = tokens_.first_outside(vocab_size);
  check(i < 0, "token file {} holds token {} at position {}, outside the vocabulary of {}", path(),
        i < 0 ? 0 : tokens_.at(i), i, vocab_size);
}

}  // namespace meshtrain::data
