#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/data/byte_tokenizer.h"
#include "meshtrain/data/sentencepiece_tokenizer.h"
#include "meshtrain/data/tokenizer.h"
#include "temp_dir.h"

namespace meshtrain::data {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// About 6 KB of English-like text in short multi-line documents.
std::vector<std::string> generated_documents() {
  const char* words[] = {"the",   "quick", "brown",  "fox",   "jumps", "over",  "lazy",
                         "dog",   "and",   "a",      "cat",   "sat",   "on",    "mat",
                         "with",  "hat",   "never",  "trust", "your",  "code",  "until",
                         "tests", "pass",  "always", "read",  "the",   "manual"};
  const int num_words = sizeof(words) / sizeof(words[0]);
  std::vector<std::string> docs;
  uint64_t s = 12345;
  for (int d = 0; d < 120; ++d) {
    std::string text;
    for (int w = 0; w < 10; ++w) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      std::string word = words[(s >> 33) % num_words];
      if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
      text += word;
      text += (w == 4) ? ",\n" : (w == 9 ? ".\n" : " ");
    }
    docs.push_back(text);
  }
  return docs;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ByteTokenizer, RoundTripsAnyBytes) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 257);
  EXPECT_EQ(tok.eot(), 256);
  std::string text = "Hello, w\xC3\xB6rld!\n\t  ";
  text.push_back('\0');
  text += "\xFF\xFE invalid utf-8";
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[0], 'H');
  EXPECT_EQ(ids[text.size() - 16], 0xFF);  // bytes, not chars
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(ByteTokenizer, DecodeDropsEotAndRejectsBadIds) {
  const ByteTokenizer tok;
  const std::vector<int32_t> ids = {'a', 256, 'b'};
  EXPECT_EQ(tok.decode(ids), "ab");
  const std::vector<int32_t> bad = {'a', 257};
  try {
    tok.decode(bad);
    FAIL() << "id 257 decoded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("token 257 at position 1"));
  }
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), Error);
}

TEST(LoadTokenizer, PicksByName) {
  EXPECT_EQ(load_tokenizer("bytes")->vocab_size(), 257);
  try {
    load_tokenizer("vocab.txt");
    FAIL() << "vocab.txt accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown tokenizer 'vocab.txt'"));
  }
  TempDir dir;
  try {
    load_tokenizer(dir.file("missing.model"));
    FAIL() << "missing model loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.file("missing.model")));
    EXPECT_THAT(e.what(), HasSubstr("does not exist"));
  }
  testing::write_text(dir.file("junk.model"), "this is not a model");
  try {
    load_tokenizer(dir.file("junk.model"));
    FAIL() << "junk model loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.file("junk.model")));
    EXPECT_THAT(e.what(), HasSubstr("cannot be loaded"));
  }
}

TEST(SentencePieceType, NamesRoundTrip) {
  EXPECT_EQ(parse_sentencepiece_type("bpe"), SentencePieceType::bpe);
  EXPECT_EQ(sentencepiece_type_name(parse_sentencepiece_type("unigram")), "unigram");
  EXPECT_THAT([] { parse_sentencepiece_type("wordpiece"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown tokenizer type 'wordpiece'")));
}

// One small model shared by the SentencePiece tests (training takes ~30 ms).
class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    docs_ = new std::vector<std::string>(generated_documents());
    SentencePieceTokenizer::train(*docs_, dir_->file("sp"), 400, 7);
  }
  static void TearDownTestSuite() {
    delete docs_;
    delete dir_;
  }
  static TempDir* dir_;
  static std::vector<std::string>* docs_;
};
TempDir* SentencePieceTest::dir_ = nullptr;
std::vector<std::string>* SentencePieceTest::docs_ = nullptr;

TEST_F(SentencePieceTest, TrainsExactVocabulary) {
  const std::string model = dir_->file("sp.model");
  ASSERT_TRUE(std::filesystem::exists(model));
  EXPECT_FALSE(std::filesystem::exists(dir_->file("sp.vocab")));
  const auto tok = load_tokenizer(model);
  EXPECT_EQ(tok->vocab_size(), 400);
  EXPECT_EQ(tok->eot(), 1);
  EXPECT_EQ(tok->name(), model);
}

TEST_F(SentencePieceTest, RoundTripAndCompression) {
  const SentencePieceTokenizer tok(dir_->file("sp.model"));
  size_t bytes = 0, tokens = 0;
  for (const std::string& doc : *docs_) {
    const std::vector<int32_t> ids = tok.encode(doc);
    for (const int32_t id : ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 400);
      ASSERT_NE(id, tok.eot());
    }
    ASSERT_EQ(tok.decode(ids), doc);
    bytes += doc.size();
    tokens += ids.size();
  }
  // Merges learned on this text make it shorter than one token per byte.
  EXPECT_LT(static_cast<double>(tokens), 0.6 * static_cast<double>(bytes));
}

TEST_F(SentencePieceTest, UnseenTextRoundTripsThroughByteFallback) {
  const SentencePieceTokenizer tok(dir_->file("sp.model"));
  for (const std::string& text :
       {std::string("  Leading spaces,\ttabs\tand\n\n\nblank lines  \n"),
        std::string("Ünïcödé → 日本語 😀 and ZEBRA QUIZ"), std::string("x"), std::string("")}) {
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
  // An end-of-text token between documents decodes to nothing.
  std::vector<int32_t> ids = tok.encode("the cat");
  ids.push_back(tok.eot());
  const std::vector<int32_t> more = tok.encode(" sat.");
  ids.insert(ids.end(), more.begin(), more.end());
  EXPECT_EQ(tok.decode(ids), "the cat sat.");
  EXPECT_THROW(tok.decode(std::vector<int32_t>{400}), Error);
}

TEST_F(SentencePieceTest, TrainingIsDeterministic) {
  SentencePieceTokenizer::train(*docs_, dir_->file("again"), 400, 7);
  EXPECT_EQ(read_bytes(dir_->file("again.model")), read_bytes(dir_->file("sp.model")));
}

TEST_F(SentencePieceTest, TrainsFromTextFileAndUnigram) {
  std::string text;
  for (const std::string& doc : *docs_) text += doc;
  testing::write_text(dir_->file("text.txt"), text);
  SentencePieceTokenizer::train(dir_->file("text.txt"), dir_->file("file"), 310, 1,
                                SentencePieceType::unigram);
  const SentencePieceTokenizer tok(dir_->file("file.model"));
  EXPECT_EQ(tok.vocab_size(), 310);
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST_F(SentencePieceTest, TrainingErrorsNameTheProblem) {
  try {
    SentencePieceTokenizer::train(*docs_, dir_->file("big"), 5000, 7);
    FAIL() << "a 5000-piece vocabulary trained on 6 KB";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir_->file("big.model")));
    EXPECT_THAT(e.what(), HasSubstr("Vocabulary size too high"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_->file("big.model")));
  try {
    SentencePieceTokenizer::train(dir_->file("absent.txt"), dir_->file("x"), 400, 7);
    FAIL() << "trained on a missing file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir_->file("absent.txt")));
  }
}

}  // namespace
}  // namespace meshtrain::data
