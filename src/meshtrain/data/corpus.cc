#include "meshtrain/data/corpus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/data/permutation.h"
#include "meshtrain/data/token_file.h"

namespace meshtrain::data {

namespace fs = std::filesystem;

namespace {

constexpr int kCorpusFormat = 1;
constexpr uint64_t kShuffleStream = 0xd0c5u;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot read {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  check(!in.bad(), "cannot read {}", path);
  return std::move(text).str();
}

// FNV-1a, 64 bits.
struct Fingerprint {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(std::string_view bytes) {
    for (const char c : bytes) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ull;
    }
    h ^= 0xff;  // separates consecutive pieces
    h *= 0x100000001b3ull;
  }
  std::string hex() const { return fmt::format("{:016x}", h); }
};

nlohmann::json to_json(const CorpusInfo& c) {
  return nlohmann::json{
      {"format", kCorpusFormat},
      {"input_dir", c.input_dir},
      {"input_files", c.input_files},
      {"input_bytes", c.input_bytes},
      {"input_fingerprint", c.input_fingerprint},
      {"vocab_size", c.vocab_size},
      {"seed", c.seed},
      {"val_fraction", c.val_fraction},
      {"tokenizer_type", c.tokenizer_type},
      {"eot", c.eot},
      {"duplicates_removed", c.duplicates_removed},
      {"train_documents", c.train_documents},
      {"val_documents", c.val_documents},
      {"train_tokens", c.train_tokens},
      {"val_tokens", c.val_tokens},
      {"train_bytes", c.train_bytes},
      {"val_bytes", c.val_bytes},
      {"unigram_entropy", c.unigram_entropy},
  };
}

CorpusInfo from_json(const nlohmann::json& j) {
  check(j.at("format").get<int>() == kCorpusFormat, "format {} is not {}", j.at("format").dump(),
        kCorpusFormat);
  CorpusInfo c;
  j.at("input_dir").get_to(c.input_dir);
  j.at("input_files").get_to(c.input_files);
  j.at("input_bytes").get_to(c.input_bytes);
  j.at("input_fingerprint").get_to(c.input_fingerprint);
  j.at("vocab_size").get_to(c.vocab_size);
  j.at("seed").get_to(c.seed);
  j.at("val_fraction").get_to(c.val_fraction);
  j.at("tokenizer_type").get_to(c.tokenizer_type);
  j.at("eot").get_to(c.eot);
  j.at("duplicates_removed").get_to(c.duplicates_removed);
  j.at("train_documents").get_to(c.train_documents);
  j.at("val_documents").get_to(c.val_documents);
  j.at("train_tokens").get_to(c.train_tokens);
  j.at("val_tokens").get_to(c.val_tokens);
  j.at("train_bytes").get_to(c.train_bytes);
  j.at("val_bytes").get_to(c.val_bytes);
  j.at("unigram_entropy").get_to(c.unigram_entropy);
  return c;
}

// The input as read: the fingerprint and the documents in file order.
struct Input {
  std::string dir;
  int64_t files = 0;
  int64_t bytes = 0;
  std::string fingerprint;
  std::vector<std::string> documents;
};

Input read_input(const std::string& input_dir) {
  Input in;
  const std::vector<std::string> files = list_fortune_files(input_dir);
  in.dir = fs::weakly_canonical(fs::absolute(input_dir)).string();
  in.files = static_cast<int64_t>(files.size());
  Fingerprint fp;
  for (const std::string& path : files) {
    const std::string text = read_file(path);
    fp.add(fs::path(path).filename().string());
    fp.add(text);
    in.bytes += static_cast<int64_t>(text.size());
    for (std::string& doc : split_fortune_documents(text)) in.documents.push_back(std::move(doc));
  }
  in.fingerprint = fp.hex();
  return in;
}

// True when `out_dir` holds a complete corpus for these options and input.
bool up_to_date(const std::string& out_dir, const PrepareOptions& o, const Input& in,
                CorpusInfo* info) {
  const fs::path dir(out_dir);
  std::error_code ec;
  if (!fs::is_regular_file(dir / kCorpusInfoFile, ec)) return false;
  try {
    const CorpusInfo c = read_corpus_info(out_dir);
    if (c.input_dir != in.dir || c.input_fingerprint != in.fingerprint ||
        c.vocab_size != o.vocab_size || c.seed != o.seed || c.val_fraction != o.val_fraction ||
        c.tokenizer_type != std::string(sentencepiece_type_name(o.tokenizer_type)))
      return false;
    if (TokenFile((dir / kTrainTokensFile).string()).size() != c.train_tokens) return false;
    if (TokenFile((dir / kValTokensFile).string()).size() != c.val_tokens) return false;
    const SentencePieceTokenizer tok((dir / kTokenizerModelFile).string());
    if (tok.vocab_size() != c.vocab_size || tok.eot() != c.eot) return false;
    *info = c;
    return true;
  } catch (const Error&) {
    return false;  // anything unreadable is rebuilt
  }
}

// Appends the tokens of `documents`, each followed by end-of-text, to `out`.
void encode_documents(const Tokenizer& tok, std::span<const std::string> documents,
                      std::vector<uint16_t>* out, int64_t* bytes) {
  for (const std::string& doc : documents) {
    for (const int32_t id : tok.encode(doc)) out->push_back(static_cast<uint16_t>(id));
    out->push_back(static_cast<uint16_t>(tok.eot()));
    *bytes += static_cast<int64_t>(doc.size());
  }
}

}  // namespace

std::vector<std::string> list_fortune_files(const std::string& dir) {
  std::error_code ec;
  check(fs::is_directory(dir, ec), "fortune folder {} does not exist or is not a folder", dir);
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path name = e.path().filename();
    if (name.has_extension() || name.string().starts_with(".")) continue;
    if (!e.is_regular_file(ec)) continue;
    files.push_back(e.path().string());
  }
  check(!ec, "cannot list fortune folder {}: {}", dir, ec.message());
  check(!files.empty(), "fortune folder {} holds no fortune files (files without an extension)", dir);
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> split_fortune_documents(std::string_view text) {
  std::vector<std::string> docs;
  std::string doc;
  const auto finish = [&] {
    if (doc.find_first_not_of(" \t\r\n\f\v") != std::string::npos) docs.push_back(doc);
    doc.clear();
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line = text.substr(pos, end - pos);
    pos = end;
    std::string_view bare = line;
    while (!bare.empty() && (bare.back() == '\n' || bare.back() == '\r')) bare.remove_suffix(1);
    if (bare == "%") {
      finish();
    } else {
      doc.append(line);
    }
  }
  finish();
  return docs;
}

double unigram_entropy(std::span<const uint16_t> train, std::span<const uint16_t> val,
                       int vocab_size) {
  MT_ASSERT(vocab_size > 0 && !val.empty());
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (const uint16_t t : train) {
    MT_ASSERT(t < vocab_size);
    ++counts[t];
  }
  const double log_total = std::log(static_cast<double>(train.size()) + vocab_size);
  double sum = 0;
  for (const uint16_t t : val) {
    MT_ASSERT(t < vocab_size);
    sum += log_total - std::log(static_cast<double>(counts[t] + 1));
  }
  return sum / static_cast<double>(val.size());
}

CorpusInfo read_corpus_info(const std::string& dir) {
  const std::string path = (fs::path(dir) / kCorpusInfoFile).string();
  std::error_code ec;
  check(fs::is_regular_file(path, ec), "corpus description {} does not exist", path);
  try {
    return from_json(nlohmann::json::parse(read_file(path)));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("corpus description {} is malformed: {}", path, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("corpus description {} is malformed: {}", path, e.what()));
  }
}

PrepareResult prepare_corpus(const PrepareOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  check(!o.out_dir.empty(), "no output folder given for the corpus");
  check(o.vocab_size >= 1 && o.vocab_size <= 65536,
        "vocabulary size {} is outside 1..65536 (tokens are stored as uint16)", o.vocab_size);
  check(o.val_fraction > 0 && o.val_fraction < 1, "validation fraction {} is outside (0, 1)",
        o.val_fraction);

  const Input in = read_input(o.input_dir);
  PrepareResult result;
  if (up_to_date(o.out_dir, o, in, &result.info)) {
    result.reused = true;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // Distinct documents in first-seen order, then shuffled.
  std::vector<std::string> unique;
  {
    std::unordered_set<std::string_view> seen;
    for (const std::string& doc : in.documents)
      if (seen.insert(doc).second) unique.push_back(doc);
  }
  const int64_t n = static_cast<int64_t>(unique.size());
  check(n >= 2, "fortune folder {} holds {} distinct documents; at least 2 are needed", o.input_dir, n);
  std::vector<std::string> shuffled(static_cast<size_t>(n));
  const Permutation perm(static_cast<uint64_t>(n), hash3(o.seed, kShuffleStream, 0));
  for (int64_t i = 0; i < n; ++i) shuffled[static_cast<size_t>(i)] = std::move(unique[perm(i)]);
  const int64_t n_val = std::clamp<int64_t>(std::llround(o.val_fraction * static_cast<double>(n)), 1, n - 1);
  const std::span<const std::string> val_docs(shuffled.data(), static_cast<size_t>(n_val));
  const std::span<const std::string> train_docs(shuffled.data() + n_val, static_cast<size_t>(n - n_val));

  const fs::path out(o.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec && fs::is_directory(out), "cannot create output folder {}: {}", o.out_dir,
        ec ? ec.message() : std::string("not a folder"));
  fs::remove(out / kCorpusInfoFile, ec);  // a stale description must not outlive this run

  const fs::path model_path = out / kTokenizerModelFile;
  SentencePieceTokenizer::train(train_docs, (out / "tokenizer").string(), o.vocab_size, o.seed,
                                o.tokenizer_type);
  const SentencePieceTokenizer tok(model_path.string());
  MT_ASSERT(tok.vocab_size() == o.vocab_size);

  CorpusInfo& c = result.info;
  std::vector<uint16_t> train_tokens, val_tokens;
  train_tokens.reserve(static_cast<size_t>(in.bytes / 3));
  encode_documents(tok, train_docs, &train_tokens, &c.train_bytes);
  encode_documents(tok, val_docs, &val_tokens, &c.val_bytes);
  write_token_file((out / kTrainTokensFile).string(), train_tokens);
  write_token_file((out / kValTokensFile).string(), val_tokens);

  c.input_dir = in.dir;
  c.input_files = in.files;
  c.input_bytes = in.bytes;
  c.input_fingerprint = in.fingerprint;
  c.vocab_size = o.vocab_size;
  c.seed = o.seed;
  c.val_fraction = o.val_fraction;
  c.tokenizer_type = std::string(sentencepiece_type_name(o.tokenizer_type));
  c.eot = tok.eot();
  c.duplicates_removed = static_cast<int64_t>(in.documents.size()) - n;
  c.train_documents = n - n_val;
  c.val_documents = n_val;
  c.train_tokens = static_cast<int64_t>(train_tokens.size());
  c.val_tokens = static_cast<int64_t>(val_tokens.size());
  c.unigram_entropy = unigram_entropy(train_tokens, val_tokens, o.vocab_size);
  write_output_file((out / kCorpusInfoFile).string(), {to_json(c).dump(2) + "\n"},
                        "corpus description");
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

int run_prepare_data(const PrepareOptions& options) {
  const PrepareResult r = prepare_corpus(options);
  const CorpusInfo& c = r.info;
  fmt::print("prepare-data: {} {}: {} documents ({} train, {} val), {} train and {} val tokens, "
             "vocab {}, unigram entropy {:.4f} nats/token, {:.1f} s\n",
             options.out_dir, r.reused ? "is up to date" : "written", c.train_documents + c.val_documents,
             c.train_documents, c.val_documents, c.train_tokens, c.val_tokens, c.vocab_size,
             c.unigram_entropy, r.seconds);
  std::fflush(stdout);
  return 0;
}

}  // namespace meshtrain::data
