#include "meshtrain/data/corpus.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
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

TEST(ListFortuneFiles, SkipsCompanionsAndSubfolders) {
  TempDir dir;
  make_fortunes(dir.path());
  const std::vector<std::string> files = list_fortune_files(dir.path().string());
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(std::filesystem::path(files[0]).filename(), "alpha");
  EXPECT_EQ(std::filesystem::path(files[2]).filename(), "gamma");
  EXPECT_THAT([&] { list_fortune_files((dir.path() / "off" / "rude").string()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is not a folder")));
  std::filesystem::create_directory(dir.path() / "hollow");
  EXPECT_THAT([&] { list_fortune_files((dir.path() / "hollow").string()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("holds no fortune files")));
}

TEST(PrepareCorpus, WritesValidConsistentOutputs) {
  TempDir dir;
  make_fortunes(dir.path() / "in");
  PrepareOptions o;
  o.input_dir = (dir.path() / "in").string();
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
  o.input_dir = (dir.path() / "in").string();
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
  o.input_dir = (dir.path() / "missing").string();
  EXPECT_THAT([&] { prepare_corpus(o); }, ::testing::ThrowsMessage<Error>(HasSubstr(o.input_dir)));
  make_fortunes(dir.path() / "in");
  o.input_dir = (dir.path() / "in").string();
  o.vocab_size = 70000;
  EXPECT_THAT([&] { prepare_corpus(o); }, ::testing::ThrowsMessage<Error>(HasSubstr("70000")));
  o.vocab_size = 300;
  o.val_fraction = 1.5;
  EXPECT_THAT([&] { prepare_corpus(o); }, ::testing::ThrowsMessage<Error>(HasSubstr("1.5")));
  EXPECT_THAT([&] { read_corpus_info(o.out_dir); },
              ::testing::ThrowsMessage<Error>(HasSubstr("corpus.json does not exist")));
  std::filesystem::create_directories(o.out_dir);
  testing::write_text(o.out_dir + "/corpus.json", "{\"format\": 1}");
  EXPECT_THAT([&] { read_corpus_info(o.out_dir); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is malformed")));
}

}  // namespace
}  // namespace meshtrain::data
