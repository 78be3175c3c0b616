// write_shard_file and read_ranges: the bytes on disk are the parts
// concatenated, the digests are the CRC-32s of the file and of each block,
// a reader gets exactly the requested ranges, and a damaged block or a full
// disk is an error naming the file.
#include "meshtrain/checkpoint/shard_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "meshtrain/core/error.h"

namespace meshtrain::checkpoint {
namespace {

namespace fs = std::filesystem;

// A folder of this process's files, removed at exit.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("mt-shard-io-" + std::to_string(getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

fs::path scratch(const std::string& name) {
  static const Scratch s;
  return s.dir / name;
}

std::string random_bytes(int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::string s(static_cast<size_t>(n), '\0');
  for (char& c : s) c = static_cast<char>(g());
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void expect_digest(const FileDigest& d, const std::string& want) {
  EXPECT_EQ(d.bytes, int64_t(want.size()));
  EXPECT_EQ(d.crc32, crc32_of(want.data(), int64_t(want.size())));
  ASSERT_EQ(int64_t(d.block_crc32.size()), (int64_t(want.size()) + kCrcBlockBytes - 1) / kCrcBlockBytes);
  for (size_t b = 0; b < d.block_crc32.size(); ++b) {
    const int64_t at = int64_t(b) * kCrcBlockBytes, n = std::min<int64_t>(kCrcBlockBytes, int64_t(want.size()) - at);
    EXPECT_EQ(d.block_crc32[b], crc32_of(want.data() + at, n)) << "block " << b;
  }
}

TEST(ShardIo, WritesPartsWithBlockChecksums) {
  // Parts of odd sizes, crossing chunk and block boundaries, ending mid-block.
  const std::string a = random_bytes(123, 1), b = random_bytes(kIoChunkBytes + 4097, 2), c = random_bytes(5 << 20, 3);
  const fs::path p = scratch("parts.bin");
  const FileDigest d = write_shard_file(p.string(), {a, b, c});
  const std::string want = a + b + c;
  EXPECT_EQ(read_file(p), want);
  expect_digest(d, want);
}

TEST(ShardIo, WritesAnAlignedSnapshotInPlace) {
  const int64_t n = 9 * kCrcBlockBytes + 100;
  IoBuffer buf(round_up(n, kIoAlign));
  ASSERT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % kIoAlign, 0u);
  const std::string want = random_bytes(n, 4);
  std::memcpy(buf.data(), want.data(), want.size());
  const fs::path p = scratch("snapshot.bin");
  const FileDigest d = write_shard_file(p.string(), {std::string_view(buf.data(), size_t(n))});
  EXPECT_EQ(read_file(p), want);
  expect_digest(d, want);
}

TEST(ShardIo, ReadsOnlyTheRequestedRanges) {
  const int64_t n = 40 * kCrcBlockBytes + 777;
  const std::string data = random_bytes(n, 5);
  const fs::path p = scratch("ranges.bin");
  const FileDigest d = write_shard_file(p.string(), {data});
  // Overlapping, adjacent, tiny, window-sized and far-apart ranges, sorted by begin.
  const std::vector<ByteRange> ranges = {{0, 8},
                                         {4, 3 * kCrcBlockBytes + 2},
                                         {3 * kCrcBlockBytes + 2, 3 * kCrcBlockBytes + 10},
                                         {5 * kCrcBlockBytes, 5 * kCrcBlockBytes + kReadWindowBytes + 6},
                                         {38 * kCrcBlockBytes + 3, n}};
  std::vector<std::string> got(ranges.size());
  const int64_t read = read_ranges(p.string(), n, kCrcBlockBytes, d.block_crc32, ranges,
                                   [&](size_t i, int64_t off, const char* bytes, int64_t k) {
                                     EXPECT_EQ(int64_t(got[i].size()), off);  // consecutive pieces
                                     got[i].append(bytes, size_t(k));
                                   });
  for (size_t i = 0; i < ranges.size(); ++i)
    EXPECT_EQ(got[i], data.substr(size_t(ranges[i].begin), size_t(ranges[i].end - ranges[i].begin))) << i;
  // Blocks 0-3, 5-21 and 38-40: 4 + 17 + 2 full blocks and the short last one.
  EXPECT_EQ(read, 23 * kCrcBlockBytes + 777);
}

TEST(ShardIo, RefusesADamagedBlock) {
  const int64_t n = 3 * kCrcBlockBytes;
  std::string data = random_bytes(n, 6);
  const fs::path p = scratch("damaged.bin");
  const FileDigest d = write_shard_file(p.string(), {data});
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 * kCrcBlockBytes + 5);
    f.put(static_cast<char>(data[2 * kCrcBlockBytes + 5] ^ 1));
  }
  auto use = [](size_t, int64_t, const char*, int64_t) {};
  EXPECT_NO_THROW(read_ranges(p.string(), n, kCrcBlockBytes, d.block_crc32, {{0, 2 * kCrcBlockBytes}}, use));
  try {
    read_ranges(p.string(), n, kCrcBlockBytes, d.block_crc32, {{2 * kCrcBlockBytes + 100, 2 * kCrcBlockBytes + 200}},
                use);
    FAIL() << "a damaged block was read without error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged.bin fails its checksum (block 2"), std::string::npos) << e.what();
  }
}

TEST(ShardIo, FullDiskIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    write_shard_file("/dev/full", {random_bytes(1 << 20, 7)});
    FAIL() << "writing to /dev/full succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write /dev/full: No space left on device"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace meshtrain::checkpoint
