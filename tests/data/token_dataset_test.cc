// The token formats users bring: llm.c's uint16 (version 1) and uint32
// (version 7) files, globs of shards, Megatron's indexed datasets.
#include "meshtrain/data/token_dataset.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/data/loader.h"
#include "temp_dir.h"

namespace meshtrain::data {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<int32_t> read_all(const TokenDataset& d) {
  std::vector<int32_t> out(static_cast<size_t>(d.size()));
  d.read(0, d.size(), out.data());
  return out;
}

void write_tokens(const std::string& path, const std::vector<int32_t>& ids, bool wide) {
  TokenFileWriter w(path, wide);
  w.append(ids);
  w.finish();
}

std::string error_of(const std::string& spec) {
  try {
    TokenDataset d(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenFileWriter, Version7HoldsUint32Tokens) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  const std::vector<int32_t> ids = {0, 65535, 65536, 128255, 7};
  write_tokens(path, ids, true);
  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 4u * ids.size());
  std::ifstream in(path, std::ios::binary);
  std::array<int32_t, 3> h{};
  in.read(reinterpret_cast<char*>(h.data()), sizeof(h));
  EXPECT_EQ(h[0], 20240801);
  EXPECT_EQ(h[1], 7);
  EXPECT_EQ(h[2], 5);
  const TokenFile f(path);
  EXPECT_EQ(f.token_bytes(), 4);
  EXPECT_EQ(read_all(TokenDataset(path)), ids);
  EXPECT_THAT(error_of(dir.file("none.bin")), HasSubstr("No such file"));
  // A version-7 header over 2-byte tokens is caught by the size check.
  std::filesystem::resize_file(path, 1024 + 2 * ids.size());
  EXPECT_THAT(error_of(path), HasSubstr("truncated: header says 5 tokens"));
}

TEST(TokenFileWriter, Version1AndStreamedAppends) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  std::vector<int32_t> all;
  {
    TokenFileWriter w(path, false);
    for (int chunk = 0; chunk < 5; ++chunk) {
      std::vector<int32_t> ids(3000 + chunk);
      std::iota(ids.begin(), ids.end(), chunk * 10000);
      w.append(ids);
      all.insert(all.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(w.size(), static_cast<int64_t>(all.size()));
    w.finish();
  }
  const TokenFile f(path);
  EXPECT_EQ(f.token_bytes(), 2);
  EXPECT_EQ(read_all(TokenDataset(path)), all);
}

TEST(TokenFileWriter, UnfinishedLeavesPreviousContents) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  write_tokens(path, {1, 2, 3}, false);
  {
    TokenFileWriter w(path, false);
    w.append(std::vector<int32_t>(100, 9));
  }  // an error on the way: never finished
  EXPECT_EQ(read_all(TokenDataset(path)), (std::vector<int32_t>{1, 2, 3}));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(TokenDataset, GlobOfShardsIsTheirConcatenationInNameOrder) {
  TempDir dir;
  std::vector<int32_t> all;
  // Written out of order; one empty shard, one uint32 shard.
  const std::vector<std::pair<std::string, std::vector<int32_t>>> shards = {
      {"fineweb_train_000002.bin", {20, 21, 22, 23}},
      {"fineweb_train_000000.bin", {0, 1, 2}},
      {"fineweb_train_000001.bin", {}},
      {"fineweb_train_000003.bin", {70000, 70001}}};
  for (const auto& [name, ids] : shards) write_tokens(dir.file(name), ids, name.ends_with("3.bin"));
  write_tokens(dir.file("fineweb_val_000000.bin"), {5, 5, 5}, false);
  const std::string pattern = dir.file("fineweb_train_*.bin");
  const TokenDataset d(pattern);
  EXPECT_EQ(d.num_files(), 4);
  EXPECT_EQ(read_all(d), (std::vector<int32_t>{0, 1, 2, 20, 21, 22, 23, 70000, 70001}));
  // Reads across shard boundaries.
  std::vector<int32_t> mid(5);
  d.read(2, 5, mid.data());
  EXPECT_EQ(mid, (std::vector<int32_t>{2, 20, 21, 22, 23}));
  EXPECT_NO_THROW(d.validate_vocab(70002));
  try {
    d.validate_vocab(50257);
    FAIL() << "token 70000 passed a vocabulary of 50257";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("fineweb_train_000003.bin holds token 70000 at position 0"));
  }
  const DataPaths p = resolve_data_path(pattern);
  EXPECT_EQ(p.train, pattern);
  EXPECT_EQ(p.val, dir.file("fineweb_val_*.bin"));
  EXPECT_THAT(error_of(dir.file("nothing_*.bin")), HasSubstr("matches no file"));
}

TEST(TokenDataset, SamplesCrossShardBoundaries) {
  TempDir dir;
  write_tokens(dir.file("s_0.bin"), {0, 1, 2, 3, 4}, false);
  write_tokens(dir.file("s_1.bin"), {5, 6, 7, 8, 9, 10}, false);
  const TokenDataset d(dir.file("s_*.bin"));
  const SampleSlicer s(d, 4);
  ASSERT_EQ(s.num_samples(), 2);  // (11 - 1) / 4
  std::vector<int32_t> in(4), tg(4);
  s.fill(1, in.data(), tg.data());
  EXPECT_EQ(in, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(tg, (std::vector<int32_t>{5, 6, 7, 8}));
}

// Megatron's index, written field by field as indexed_dataset.py's _IndexWriter does.
void write_megatron(const std::string& prefix, uint8_t dtype_code, int width, const std::vector<std::vector<int64_t>>& seqs,
                    int64_t pointer_skew = 0) {
  std::ofstream idx(prefix + ".idx", std::ios::binary), bin(prefix + ".bin", std::ios::binary);
  auto put = [&](auto v) { idx.write(reinterpret_cast<const char*>(&v), sizeof(v)); };
  idx.write("MMIDIDX\0\0", 9);
  put(uint64_t{1});
  put(dtype_code);
  put(uint64_t(seqs.size()));
  put(uint64_t(seqs.size() + 1));
  for (const auto& s : seqs) put(int32_t(s.size()));
  int64_t ptr = 0;
  for (const auto& s : seqs) {
    put(ptr + pointer_skew);
    ptr += int64_t(s.size()) * width;
  }
  for (size_t i = 0; i <= seqs.size(); ++i) put(int64_t(i));
  for (const auto& s : seqs)
    for (const int64_t t : s) bin.write(reinterpret_cast<const char*>(&t), width);  // little-endian
}

TEST(TokenDataset, MegatronIndexedDataset) {
  TempDir dir;
  const std::vector<std::vector<int64_t>> seqs = {{1, 2, 3}, {}, {40000, 5}, {6}};
  write_megatron(dir.file("corpus_text_document"), 8, 2, seqs);  // uint16
  write_megatron(dir.file("wide_text_document"), 4, 4, {{100000, 1}, {2}});  // int32
  const std::vector<int32_t> expected = {1, 2, 3, 40000, 5, 6};
  // By prefix, .bin or .idx.
  for (const std::string& spec : {dir.file("corpus_text_document"), dir.file("corpus_text_document.bin"),
                                  dir.file("corpus_text_document.idx")}) {
    const TokenDataset d(spec);
    EXPECT_EQ(read_all(d), expected) << spec;
  }
  const IndexedDataset m(dir.file("corpus_text_document"));
  EXPECT_EQ(m.num_sequences(), 4);
  EXPECT_EQ(m.num_documents(), 4);
  EXPECT_EQ(read_all(TokenDataset(dir.file("wide_text_document"))), (std::vector<int32_t>{100000, 1, 2}));
  EXPECT_EQ(resolve_data_path(dir.file("corpus_text_document")).train, dir.file("corpus_text_document"));

  write_megatron(dir.file("gap"), 8, 2, seqs, 2);
  EXPECT_THAT(error_of(dir.file("gap")), HasSubstr("not right after the previous one"));
  write_megatron(dir.file("float"), 7, 4, seqs);
  EXPECT_THAT(error_of(dir.file("float")), HasSubstr("dtype code 7, not an integer token type"));
  write_megatron(dir.file("short"), 8, 2, seqs);
  std::filesystem::resize_file(dir.file("short.bin"), 6);
  EXPECT_THAT(error_of(dir.file("short")), HasSubstr("the index describes 6 tokens of uint16 (12 bytes)"));
  testing::write_text(dir.file("junk.idx"), "NOTMEGATRON-HEADER-AT-ALL-xxxxxxxxxxxxxxxxxx");
  testing::write_text(dir.file("junk.bin"), "");
  EXPECT_THAT(error_of(dir.file("junk")), HasSubstr("does not start with Megatron's MMIDIDX header"));
}

}  // namespace
}  // namespace meshtrain::data
