#include "meshtrain/data/token_file.h"

#include <sys/resource.h>

#include <array>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "temp_dir.h"

namespace meshtrain::data {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<uint16_t> some_tokens(size_t n) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint16_t>((i * 7919 + 13) % 65536);
  return t;
}

// Writes raw bytes: a header with the given fields followed by `body_tokens`.
void write_raw(const std::string& path, int32_t magic, int32_t version, int32_t count,
               size_t body_tokens) {
  std::array<int32_t, 256> header{};
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::string bytes(reinterpret_cast<const char*>(header.data()), sizeof(header));
  bytes.append(body_tokens * 2, '\x01');
  testing::write_text(path, bytes);
}

// The message of the Error that opening `path` throws, or "" if none.
std::string open_error(const std::string& path) {
  try {
    TokenFile f(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenFile, RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  const std::vector<uint16_t> tokens = some_tokens(10007);
  write_token_file(path, tokens);
  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 2u * tokens.size());

  const TokenFile f(path);
  ASSERT_EQ(f.size(), static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(std::memcmp(f.data(), tokens.data(), tokens.size() * 2), 0);
  EXPECT_EQ(f.tokens()[10006], tokens[10006]);
}

TEST(TokenFile, HeaderIsLlmcFormat) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  write_token_file(path, std::vector<uint16_t>{5, 6, 7});
  std::ifstream in(path, std::ios::binary);
  std::array<int32_t, 256> header{};
  in.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 3);
  EXPECT_EQ(header[3], 0);
  uint16_t body[3];
  in.read(reinterpret_cast<char*>(body), sizeof(body));
  EXPECT_EQ(body[0], 5);
  EXPECT_EQ(body[2], 7);
}

TEST(TokenFile, EmptyTokenListIsValid) {
  TempDir dir;
  write_token_file(dir.file("e.bin"), {});
  EXPECT_EQ(TokenFile(dir.file("e.bin")).size(), 0);
}

TEST(TokenFile, OverwriteReplacesContents) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  write_token_file(path, some_tokens(100));
  write_token_file(path, std::vector<uint16_t>{1, 2});
  const TokenFile f(path);
  EXPECT_EQ(f.size(), 2);
  EXPECT_EQ(f.data()[1], 2);
}

TEST(TokenFile, MoveKeepsMapping) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), std::vector<uint16_t>{9, 8, 7});
  TokenFile a(dir.file("t.bin"));
  TokenFile b(std::move(a));
  EXPECT_EQ(b.size(), 3);
  EXPECT_EQ(b.data()[0], 9);
  TokenFile c(dir.file("t.bin"));
  c = std::move(b);
  EXPECT_EQ(c.data()[2], 7);
}

TEST(TokenFile, MissingFile) {
  TempDir dir;
  const std::string msg = open_error(dir.file("nope.bin"));
  EXPECT_THAT(msg, HasSubstr(dir.file("nope.bin")));
  EXPECT_THAT(msg, HasSubstr("No such file"));
}

TEST(TokenFile, EmptyFile) {
  TempDir dir;
  testing::write_text(dir.file("empty.bin"), "");
  const std::string msg = open_error(dir.file("empty.bin"));
  EXPECT_THAT(msg, HasSubstr(dir.file("empty.bin")));
  EXPECT_THAT(msg, HasSubstr("is empty"));
}

TEST(TokenFile, ShorterThanHeader) {
  TempDir dir;
  testing::write_text(dir.file("short.bin"), std::string(100, 'x'));
  EXPECT_THAT(open_error(dir.file("short.bin")), HasSubstr("shorter than the 1024-byte header"));
}

TEST(TokenFile, Directory) {
  TempDir dir;
  EXPECT_THAT(open_error(dir.path().string()), HasSubstr("not a regular file"));
}

TEST(TokenFile, BadMagic) {
  TempDir dir;
  write_raw(dir.file("m.bin"), 12345, 1, 4, 4);
  const std::string msg = open_error(dir.file("m.bin"));
  EXPECT_THAT(msg, HasSubstr(dir.file("m.bin")));
  EXPECT_THAT(msg, HasSubstr("bad magic 12345"));
}

TEST(TokenFile, WrongVersion) {
  TempDir dir;
  write_raw(dir.file("v.bin"), 20240520, 2, 4, 4);
  EXPECT_THAT(open_error(dir.file("v.bin")), HasSubstr("version 2"));
}

TEST(TokenFile, Truncated) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  write_token_file(path, some_tokens(1000));
  std::filesystem::resize_file(path, 1024 + 2 * 600 + 1);
  const std::string msg = open_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("truncated: header says 1000 tokens, file holds 600"));
}

TEST(TokenFile, TrailingBytes) {
  TempDir dir;
  write_raw(dir.file("l.bin"), 20240520, 1, 4, 6);
  EXPECT_THAT(open_error(dir.file("l.bin")), HasSubstr("longer than its header says"));
}

TEST(TokenFile, NegativeCount) {
  TempDir dir;
  write_raw(dir.file("n.bin"), 20240520, 1, -3, 0);
  EXPECT_THAT(open_error(dir.file("n.bin")), HasSubstr("negative token count -3"));
}

TEST(TokenFile, ValidateVocab) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  std::vector<uint16_t> tokens(500, 3);
  tokens[321] = 50;
  tokens[400] = 60;
  write_token_file(path, tokens);
  const TokenFile f(path);
  EXPECT_NO_THROW(f.validate_vocab(61));
  EXPECT_NO_THROW(f.validate_vocab(70000));
  try {
    f.validate_vocab(50);
    FAIL() << "no error for token 50 with a vocabulary of 50";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("token 50 at position 321"));
    EXPECT_THAT(e.what(), HasSubstr("vocabulary of 50"));
  }
  EXPECT_THROW(f.validate_vocab(0), Error);
}

TEST(TokenFile, FailedWriteLeavesNothing) {
  TempDir dir;
  // The parent folder does not exist.
  const std::string missing = dir.file("no-such-dir/t.bin");
  try {
    write_token_file(missing, some_tokens(10));
    FAIL() << "writing into a missing folder succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
  }
  // The target is a folder: the temporary is written, the rename fails.
  const std::string target = dir.file("occupied");
  std::filesystem::create_directory(target);
  try {
    write_token_file(target, some_tokens(10));
    FAIL() << "writing over a folder succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot write token file " + target));
  }
  EXPECT_TRUE(std::filesystem::is_directory(target));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1) << "a temporary file was left behind";
}

TEST(TokenFile, WriteFailingMidwayKeepsOldContents) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  write_token_file(path, std::vector<uint16_t>{4, 5, 6});
  // Cap this process's file size so that the write fails part-way through.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit cap = old_limit;
  cap.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &cap), 0);
  std::string msg;
  try {
    write_token_file(path, some_tokens(10000));
  } catch (const Error& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(msg, HasSubstr("cannot write token file " + path));
  const TokenFile f(path);
  EXPECT_EQ(f.size(), 3);
  EXPECT_EQ(f.data()[2], 6);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1) << "the partial temporary file was left behind";
}

}  // namespace
}  // namespace meshtrain::data
