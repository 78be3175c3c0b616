// Token files: the binary format of llm.c and of nanoGPT-style prepared data.
//
//   header  256 int32 little-endian values:
//             [0] = 20240520 (magic), [1] = 1 (version: uint16 tokens),
//             [2] = N (number of tokens), the rest 0
//   body    N uint16 little-endian tokens
//
// A valid file is exactly 1024 + 2N bytes long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace meshtrain::data {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenFileHeaderInts = 256;
inline constexpr size_t kTokenFileHeaderBytes = kTokenFileHeaderInts * sizeof(int32_t);

// Writes `tokens` as a token file at `path`. The bytes go to a temporary file
// beside `path` that is renamed over it once complete, so `path` holds either
// its previous contents or the whole new file, never part of one. Throws Error
// naming `path` when it cannot be written (the temporary is removed first) or
// when there are more than INT32_MAX tokens.
void write_token_file(const std::string& path, std::span<const uint16_t> tokens);

// A token file opened read-only and mapped into memory: its tokens cost no
// heap, and pages are read from disk as they are touched. Move-only.
class TokenFile {
 public:
  // Opens and validates `path`. Throws Error naming the path and the problem
  // (missing, not a regular file, empty, shorter than the header, bad magic,
  // unsupported version, token count inconsistent with the file size) before
  // mapping anything.
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  // Number of tokens.
  int64_t size() const { return size_; }
  const uint16_t* data() const { return tokens_; }
  std::span<const uint16_t> tokens() const { return {tokens_, static_cast<size_t>(size_)}; }

  // Throws Error naming the first position holding a token >= vocab_size, and
  // that token. Reads the whole file.
  void validate_vocab(int vocab_size) const;

 private:
  void unmap();

  std::string path_;
  void* map_ = nullptr;  // the whole file, header included
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace meshtrain::data
