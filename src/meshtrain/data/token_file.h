// Token files: llm.c's binary format (dev/data/data_common.py), also written
// by nanoGPT-style preparation scripts.
//
//   header  256 int32 little-endian values:
//             [0] magic, [1] version, [2] = N (number of tokens), the rest 0
//             magic 20240520, version 1: uint16 tokens (GPT-2 vocabularies)
//             magic 20240801, version 7: uint32 tokens (Llama-3 vocabularies)
//   body    N little-endian tokens
//
// A valid file is exactly 1024 + N x (2 or 4) bytes long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "meshtrain/data/mapped_file.h"
#include "meshtrain/data/token_array.h"

namespace meshtrain::data {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int32_t kTokenFileMagic32 = 20240801;
inline constexpr int32_t kTokenFileVersion32 = 7;
inline constexpr size_t kTokenFileHeaderInts = 256;
inline constexpr size_t kTokenFileHeaderBytes = kTokenFileHeaderInts * sizeof(int32_t);

// Writes `tokens` as a version-1 token file at `path`. The bytes go to a
// temporary file beside `path` that is renamed over it once complete, so
// `path` holds either its previous contents or the whole new file, never part
// of one. Throws Error naming `path` when it cannot be written (the temporary
// is removed first) or when there are more than INT32_MAX tokens.
void write_token_file(const std::string& path, std::span<const uint16_t> tokens);

// Writes a token file of unknown length as its tokens come: uint16 (version 1)
// when every id is below 65536, else uint32 (version 7). The tokens go to
// "<path>.tmp-<pid>"; finish() writes the header, flushes to disk and renames
// it over `path`. Destroyed unfinished (an error on the way), it removes the
// temporary and `path` keeps its previous contents.
class TokenFileWriter {
 public:
  // Throws Error naming `path` when the temporary cannot be created.
  TokenFileWriter(const std::string& path, bool wide);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Appends `ids` (each in [0, 65536) unless wide). Throws Error on a write
  // failure or past INT32_MAX tokens.
  void append(std::span<const int32_t> ids);
  void finish();
  int64_t size() const { return count_; }

 private:
  [[noreturn]] void fail(int err);

  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  bool wide_;
  int64_t count_ = 0;
};

// A token file opened read-only and mapped into memory: its tokens cost no
// heap, and pages are read from disk as they are touched. Move-only.
class TokenFile {
 public:
  // Opens and validates `path`. Throws Error naming the path and the problem
  // (missing, not a regular file, empty, shorter than the header, bad magic,
  // unsupported version, token count inconsistent with the file size) before
  // mapping anything.
  explicit TokenFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Number of tokens.
  int64_t size() const { return tokens_.count; }
  // 2 (version 1) or 4 (version 7).
  int token_bytes() const { return token_type_bytes(tokens_.type); }
  const TokenArray& array() const { return tokens_; }
  // The tokens of a version-1 file.
  const uint16_t* data() const;
  std::span<const uint16_t> tokens() const { return {data(), static_cast<size_t>(size())}; }

  // Throws Error naming the first position holding a token >= vocab_size, and
  // that token. Reads the whole file.
  void validate_vocab(int vocab_size) const;

 private:
  MappedFile file_;
  TokenArray tokens_;
};

}  // namespace meshtrain::data
