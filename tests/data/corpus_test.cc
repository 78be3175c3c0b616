#include "meshtrain/data/corpus.h"

#include <cmath>
#include <set>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/data/bpe_tokenizer.h"
#include "meshtrain/data/text_input.h"
#include "meshtrain/data/token_file.h"
#include "meshtrain/data/tokenizer.h"
#include "temp_dir.h"

namespace meshtrain::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(SplitFortunes, SplitsAtPercentLines) {
  EXPECT_THAT(split_fortune_documents("one\nline\n%\ntwo\n%\n%\n  \n%\nthree 50%\n"),
              ElementsAre("one\nline\n", "two\n", "three 50%\n"));
  EXPECT_THAT(split_fortune_documents("%\nfirst\n%"), ElementsAre("first\n"));
  EXPECT_THAT(split_fortune_documents("no newline at end"), ElementsAre("no newline at end"));
  EXPECT_TRUE(split_fortune_documents("").empty());
}

TEST(UnigramEntropy, MatchesClosedForm) {
  // train counts over vocab 4: {0: 3, 1: 1}; total 4 + 4 = 8 after smoothing.
  const std::vector<uint16_t> train = {0, 0, 0, 1};
  const std::vector<uint16_t> val = {0, 1, 2};
  const double expected = -(std::log(4.0 / 8) + std::log(2.0 / 8) + std::log(1.0 / 8)) / 3;
  EXPECT_NEAR(unigram_entropy(train, val, 4), expected, 1e-12);
  // With no training data it is log(vocab), the uniform distribution.
  EXPECT_NEAR(unigram_entropy({}, val, 4), std::log(4.0), 1e-12);
}

// A folder of fake fortune files, with the companions a real one has.
void make_fortunes(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "off");
  const char* subjects[] = {"The cat", "A dog", "My code", "Your computer", "The manual", "Every test"};
  const char* verbs[] = {"runs", "sleeps", "compiles", "crashes", "laughs", "waits"};
  const char* endings[] = {"at night.", "for no reason.", "on Mondays.", "in the rain.", "again."};
  uint64_t s = 99;
  for (const char* name : {"alpha", "beta", "gamma"}) {
    std::string text;
    for (int d = 0; d < 40; ++d) {
      const int lines = 1 + d % 3;
      for (int l = 0; l < lines; ++l) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        text += std::string(subjects[(s >> 33) % 6]) + " " + verbs[(s >> 40) % 6] + " " +
                endings[(s >> 50) % 5] + "\n";
      }
      text += "%\n";
    }
    text += "A repeated saying.\n%\n";  // the same document in every file
    testing::write_text((dir / name).string(), text);
    testing::write_text((dir / (std::string(name) + ".dat")).string(), "binary index");
  }
  testing::write_text((dir / "off" / "rude").string(), "should be ignored\n%\n");
}

TEST(ListInputFiles, SkipsCompanionsAndSubfolders) {
  TempDir dir;
  make_fortunes(dir.path());
  testing::write_text((dir.path() / "zeta.txt").string(), "text\n");
  testing::write_text((dir.path() / "eta.jsonl").string(), "{\"text\": \"a\"}\n");
  const std::vector<InputFile> files = list_input_files({dir.path().string()});
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(std::filesystem::path(files[0].path).filename(), "alpha");
  EXPECT_EQ(files[0].kind, InputKind::fortune);
  EXPECT_EQ(std::filesystem::path(files[1].path).filename(), "beta");
  EXPECT_EQ(files[2].kind, InputKind::jsonl);  // eta.jsonl
  EXPECT_EQ(files[3].kind, InputKind::fortune);
  EXPECT_EQ(files[4].kind, InputKind::text);
  EXPECT_EQ(list_input_files({(dir.path() / "off" / "rude").string()}).size(), 1u);  // a file given by name
  EXPECT_THAT([&] { list_input_files({(dir.path() / "nope").string()}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("does not exist")));
  std::filesystem::create_directory(dir.path() / "hollow");
  EXPECT_THAT([&] { list_input_files({(dir.path() / "hollow").string()}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("holds no .txt, .jsonl or fortune files")));
}

TEST(ReadDocuments, TextJsonlAndFortuneFiles) {
  TempDir dir;
  testing::write_text(dir.file("a.txt"), "First paragraph,\ntwo lines.\n\n\n  \nSecond one.\n\nThird, no newline");
  testing::write_text(dir.file("b.jsonl"),
                      "{\"text\": \"json one\\nwith a newline\", \"id\": 1}\n\n{\"text\": \"Καλημέρα\"}\n");
  testing::write_text(dir.file("c"), "fortune\n%\nother\n");
  std::vector<std::string> docs;
  read_documents(list_input_files({dir.file("a.txt"), dir.file("b.jsonl"), dir.file("c")}),
                 [&](std::string_view d) { docs.emplace_back(d); });
  EXPECT_THAT(docs, ElementsAre("First paragraph,\ntwo lines.\n", "Second one.\n", "Third, no newline",
                                "json one\nwith a newline", "Καλημέρα", "fortune\n", "other\n"));
  testing::write_text(dir.file("bad.jsonl"), "{\"text\": \"ok\"}\n{\"title\": \"no text\"}\n");
  EXPECT_THAT([&] { read_documents(list_input_files({dir.file("bad.jsonl")}), [](std::string_view) {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("bad.jsonl line 2 has no \"text\" string")));
  testing::write_text(dir.file("broken.jsonl"), "{\"text\": \n");
  EXPECT_THAT([&] { read_documents(list_input_files({dir.file("broken.jsonl")}), [](std::string_view) {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("broken.jsonl line 1 is not JSON")));
}

TEST(ReadDocuments, LongDocumentsAreCutAtALineEnd) {
  TempDir dir;
  const std::string line(1000, 'x');
  std::string text;
  for (size_t i = 0; i < (kMaxDocumentBytes / 1001) + 10; ++i) text += line + "\n";
  testing::write_text(dir.file("long.txt"), text);
  std::vector<size_t> sizes;
  read_documents(list_input_files({dir.file("long.txt")}), [&](std::string_view d) { sizes.push_back(d.size()); });
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_GE(sizes[0], kMaxDocumentBytes);
  EXPECT_LT(sizes[0], kMaxDocumentBytes + 1001);
  EXPECT_EQ(sizes[0] % 1001, 0u);
  EXPECT_EQ(sizes[0] + sizes[1], text.size());
}

TEST(PrepareCorpus, WritesValidConsistentOutputs) {
  TempDir dir;
  make_fortunes(dir.path() / "in");
  PrepareOptions o;
  o.inputs = {(dir.path() / "in").string()};
  o.out_dir = (dir.path() / "out").string();
  o.vocab_size = 300;
  o.seed = 5;
  o.val_fraction = 0.1;

  const PrepareResult r = prepare_corpus(o);
  EXPECT_FALSE(r.reused);
  const CorpusInfo& c = r.info;
  // 3 files x 41 documents, the repeated one kept once; the fake sentences
  // repeat too (6 x 6 x 5 single lines), which removes more.
  EXPECT_EQ(c.input_files, 3);
  EXPECT_GE(c.duplicates_removed, 2);
  EXPECT_EQ(c.train_documents + c.val_documents + c.duplicates_removed, 123);
  EXPECT_EQ(c.val_documents, std::llround(0.1 * (123 - c.duplicates_removed)));
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(c.input_fingerprint.size(), 16u);

  const std::string out = o.out_dir;
  const TokenFile train(out + "/train.bin"), val(out + "/val.bin");
  EXPECT_EQ(train.size(), c.train_tokens);
  EXPECT_EQ(val.size(), c.val_tokens);
  EXPECT_NO_THROW(train.validate_vocab(300));
  EXPECT_NO_THROW(val.validate_vocab(300));

  // Each document ends with end-of-text; decoding gives the documents back.
  const auto tok = load_tokenizer(out + "/tokenizer.model");
  EXPECT_EQ(tok->eot(), c.eot);
  int64_t eots = 0;
  for (const uint16_t t : val.tokens()) eots += t == c.eot;
  EXPECT_EQ(eots, c.val_documents);
  EXPECT_EQ(val.data()[val.size() - 1], c.eot);
  std::vector<int32_t> ids(val.tokens().begin(), val.tokens().end());
  EXPECT_EQ(static_cast<int64_t>(tok->decode(ids).size()), c.val_bytes);

  // The entropy is recomputed from the files, and sits between "knows the
  // distribution" and "uniform over the vocabulary".
  EXPECT_NEAR(c.unigram_entropy, unigram_entropy(train.tokens(), val.tokens(), 300), 1e-9);
  EXPECT_GT(c.unigram_entropy, 1.0);
  EXPECT_LT(c.unigram_entropy, std::log(300.0));

  const CorpusInfo read = read_corpus_info(out);
  EXPECT_EQ(read.train_tokens, c.train_tokens);
  EXPECT_EQ(read.unigram_entropy, c.unigram_entropy);
  EXPECT_EQ(read.input_fingerprint, c.input_fingerprint);
}

TEST(PrepareCorpus, IdempotentAndDeterministic) {
  TempDir dir;
  make_fortunes(dir.path() / "in");
  PrepareOptions o;
  o.inputs = {(dir.path() / "in").string()};
  o.out_dir = (dir.path() / "out").string();
  o.vocab_size = 300;
  const PrepareResult first = prepare_corpus(o);
  ASSERT_FALSE(first.reused);
  const auto stamp = std::filesystem::last_write_time(dir.path() / "out" / "train.bin");

  const PrepareResult again = prepare_corpus(o);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.info.train_tokens, first.info.train_tokens);
  EXPECT_EQ(std::filesystem::last_write_time(dir.path() / "out" / "train.bin"), stamp);

  // Other options rebuild; the same options elsewhere give the same bytes.
  o.seed = 999;
  EXPECT_FALSE(prepare_corpus(o).reused);
  o.seed = PrepareOptions().seed;
  o.out_dir = (dir.path() / "out2").string();
  const PrepareResult copy = prepare_corpus(o);
  EXPECT_FALSE(copy.reused);
  EXPECT_EQ(copy.info.unigram_entropy, first.info.unigram_entropy);
  const TokenFile a((dir.path() / "out2" / "val.bin").string());
  EXPECT_EQ(a.size(), first.info.val_tokens);

  // A changed input, or a damaged output, is noticed.
  testing::write_text((dir.path() / "in" / "delta").string(), "A new fortune.\n%\n");
  EXPECT_FALSE(prepare_corpus(o).reused);
  EXPECT_TRUE(prepare_corpus(o).reused);
  std::filesystem::resize_file(dir.path() / "out2" / "train.bin", 2000);
  EXPECT_FALSE(prepare_corpus(o).reused);
}

TEST(PrepareCorpus, ErrorsNameTheProblem) {
  TempDir dir;
  PrepareOptions o;
  o.out_dir = (dir.path() / "out").string();
  o.inputs = {(dir.path() / "missing").string()};
  EXPECT_THAT([&] { prepare_corpus(o); }, ::testing::ThrowsMessage<Error>(HasSubstr(o.inputs[0])));
  make_fortunes(dir.path() / "in");
  o.inputs = {(dir.path() / "in").string()};
  o.vocab_size = 70000;
  EXPECT_THAT([&] { prepare_corpus(o); }, ::testing::ThrowsMessage<Error>(HasSubstr("70000")));
  o.vocab_size = 300;
  o.val_fraction = 1.5;
  EXPECT_THAT([&] { prepare_corpus(o); }, ::testing::ThrowsMessage<Error>(HasSubstr("1.5")));
  EXPECT_THAT([&] { read_corpus_info(o.out_dir); },
              ::testing::ThrowsMessage<Error>(HasSubstr("corpus.json does not exist")));
  std::filesystem::create_directories(o.out_dir);
  testing::write_text(o.out_dir + "/corpus.json", "{\"format\": 2}");
  EXPECT_THAT([&] { read_corpus_info(o.out_dir); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is malformed")));
}

// A .txt and a .jsonl in GPT-2 tokens: each document's tokens are exactly the
// tokenizer's, followed by end-of-text, in input order; any thread count
// gives the same bytes.
TEST(PrepareCorpus, Gpt2TokensOfTextAndJsonl) {
  TempDir dir;
  std::string txt, jsonl;
  std::vector<std::string> docs;
  for (int i = 0; i < 60; ++i) {
    docs.push_back(fmt::format("Paragraph {} says: it's {} o'clock, Größe {}.\nSecond line {}.\n", i, i % 12, i * 7, i));
    txt += docs.back() + "\n";
  }
  for (int i = 0; i < 40; ++i) {
    docs.push_back(fmt::format("JSON document {}: 東京 {} ☃", i, i * i));
    jsonl += nlohmann::json{{"text", docs.back()}, {"n", i}}.dump() + "\n";
  }
  testing::write_text(dir.file("a.txt"), txt);
  testing::write_text(dir.file("b.jsonl"), jsonl);
  PrepareOptions o;
  o.inputs = {dir.file("a.txt"), dir.file("b.jsonl")};
  o.tokenizer = "gpt2";
  o.val_fraction = 0.2;
  o.threads = 1;
  o.out_dir = dir.file("one");
  const CorpusInfo c = prepare_corpus(o).info;
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.eot, 50256);
  EXPECT_EQ(c.val_documents, 20);
  EXPECT_EQ(c.train_documents, 80);
  const auto tok = load_tokenizer(dir.file("one/tokenizer.json"));
  // Train and val documents, each in input order.
  const TokenFile train(dir.file("one/train.bin")), val(dir.file("one/val.bin"));
  std::vector<int32_t> all_train(train.tokens().begin(), train.tokens().end()),
      all_val(val.tokens().begin(), val.tokens().end());
  // The validation documents' texts: the val stream cut at end-of-text.
  std::set<std::string> val_texts;
  std::vector<int32_t> cur;
  for (const int32_t t : all_val) {
    if (t != c.eot) {
      cur.push_back(t);
      continue;
    }
    val_texts.insert(tok->decode(cur));
    cur.clear();
  }
  EXPECT_EQ(val_texts.size(), 20u);
  std::vector<int32_t> expect_train, expect_val;
  for (const std::string& d : docs) {
    std::vector<int32_t> ids = tok->encode(d);
    ids.push_back(c.eot);
    std::vector<int32_t>& e = val_texts.contains(d) ? expect_val : expect_train;
    e.insert(e.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(expect_train, all_train);
  EXPECT_EQ(expect_val, all_val);
  // Four threads: the same files.
  o.threads = 4;
  o.out_dir = dir.file("four");
  prepare_corpus(o);
  const TokenFile train4(dir.file("four/train.bin"));
  EXPECT_TRUE(std::equal(train4.tokens().begin(), train4.tokens().end(), train.tokens().begin(), train.tokens().end()));
}

TEST(PrepareCorpus, BytesTokenizerNeedsNoModel) {
  TempDir dir;
  make_fortunes(dir.path() / "in");
  PrepareOptions o;
  o.inputs = {(dir.path() / "in").string()};
  o.tokenizer = "bytes";
  o.out_dir = dir.file("out");
  const CorpusInfo c = prepare_corpus(o).info;
  EXPECT_EQ(c.vocab_size, 257);
  EXPECT_EQ(c.train_tokens, c.train_bytes + c.train_documents);
  EXPECT_TRUE(prepare_corpus(o).reused);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/tokenizer.model")));
}

}  // namespace
}  // namespace meshtrain::data
