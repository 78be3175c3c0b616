#include "meshtrain/data/corpus.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/clock.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/data/bpe_tokenizer.h"
#include "meshtrain/data/byte_tokenizer.h"
#include "meshtrain/data/permutation.h"
#include "meshtrain/data/text_input.h"
#include "meshtrain/data/token_file.h"

namespace meshtrain::data {

namespace fs = std::filesystem;

namespace {

constexpr int kCorpusFormat = 2;
constexpr uint64_t kShuffleStream = 0xd0c5u;
constexpr uint64_t kSampleStream = 0x5a3b1eu;
constexpr size_t kBatchBytesPerThread = size_t{1} << 20;

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

// The distinct 64-bit hashes seen so far, in an open-addressed table of at
// most 2 x kMaxRememberedDocuments slots; once full, it only answers.
class SeenSet {
 public:
  // True when `h` is new (and remembered, if there is room).
  bool insert(uint64_t h) {
    h = h == 0 ? 1 : h;
    if (slots_.empty()) slots_.assign(1024, 0);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == h) return false;
      if (slots_[i] == 0) {
        if (used_ >= kMaxRememberedDocuments) return true;
        slots_[i] = h;
        if (static_cast<size_t>(++used_) * 2 > slots_.size()) grow();
        return true;
      }
    }
  }

 private:
  void grow() {
    std::vector<uint64_t> old = std::move(slots_);
    slots_.assign(old.size() * 2, 0);
    for (const uint64_t h : old)
      if (h != 0) {
        size_t i = h & (slots_.size() - 1);
        while (slots_[i] != 0) i = (i + 1) & (slots_.size() - 1);
        slots_[i] = h;
      }
  }
  std::vector<uint64_t> slots_;
  int64_t used_ = 0;
};

// Calls f(document, i) for the i-th distinct document of `files`; returns
// their number. `all` (if set) counts every document.
template <class F>
int64_t for_each_distinct(const std::vector<InputFile>& files, F&& f,
                          const std::function<void(std::string_view)>& raw = {}, int64_t* all = nullptr) {
  SeenSet seen;
  int64_t n = 0;
  read_documents(
      files,
      [&](std::string_view doc) {
        if (all != nullptr) ++*all;
        Fingerprint h;
        h.add(doc);
        if (seen.insert(h.h)) f(doc, n++);
      },
      raw);
  return n;
}

nlohmann::json to_json(const CorpusInfo& c) {
  return nlohmann::json{
      {"format", kCorpusFormat},     {"inputs", c.inputs},
      {"input_files", c.input_files}, {"input_bytes", c.input_bytes},
      {"input_fingerprint", c.input_fingerprint}, {"vocab_size", c.vocab_size},
      {"seed", c.seed},              {"val_fraction", c.val_fraction},
      {"tokenizer", c.tokenizer},    {"eot", c.eot},
      {"duplicates_removed", c.duplicates_removed}, {"train_documents", c.train_documents},
      {"val_documents", c.val_documents}, {"train_tokens", c.train_tokens},
      {"val_tokens", c.val_tokens},  {"train_bytes", c.train_bytes},
      {"val_bytes", c.val_bytes},    {"unigram_entropy", c.unigram_entropy},
  };
}

CorpusInfo from_json(const nlohmann::json& j) {
  check(j.at("format").get<int>() == kCorpusFormat, "format {} is not {}", j.at("format").dump(), kCorpusFormat);
  CorpusInfo c;
  j.at("inputs").get_to(c.inputs);
  j.at("input_files").get_to(c.input_files);
  j.at("input_bytes").get_to(c.input_bytes);
  j.at("input_fingerprint").get_to(c.input_fingerprint);
  j.at("vocab_size").get_to(c.vocab_size);
  j.at("seed").get_to(c.seed);
  j.at("val_fraction").get_to(c.val_fraction);
  j.at("tokenizer").get_to(c.tokenizer);
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

// What one read of the input finds.
struct Scan {
  std::vector<std::string> inputs;  // absolute
  int64_t files = 0, bytes = 0, documents = 0, distinct = 0, distinct_bytes = 0;
  std::string fingerprint;
};

Scan scan_input(const std::vector<std::string>& inputs, const std::vector<InputFile>& files) {
  Scan s;
  for (const std::string& in : inputs) s.inputs.push_back(fs::weakly_canonical(fs::absolute(in)).string());
  s.files = static_cast<int64_t>(files.size());
  Fingerprint fp;
  s.distinct = for_each_distinct(
      files, [&](std::string_view doc, int64_t) { s.distinct_bytes += static_cast<int64_t>(doc.size()); },
      [&](std::string_view raw) {
        fp.add(raw);
        s.bytes += static_cast<int64_t>(raw.size());
      },
      &s.documents);
  s.fingerprint = fp.hex();
  return s;
}

// Which documents go to validation.
struct Split {
  int64_t n, n_val;
  Permutation perm;
  Split(int64_t n_, double fraction, uint64_t seed)
      : n(n_),
        n_val(std::clamp<int64_t>(std::llround(fraction * static_cast<double>(n_)), 1, n_ - 1)),
        perm(static_cast<uint64_t>(n_), hash3(seed, kShuffleStream, 0)) {}
  bool is_val(int64_t i) const { return static_cast<int64_t>(perm(static_cast<uint64_t>(i))) < n_val; }
};

std::string tokenizer_name(const PrepareOptions& o) {
  if (o.tokenizer == "sentencepiece") return "sentencepiece-" + std::string(sentencepiece_type_name(o.tokenizer_type));
  if (o.tokenizer == "bytes" || o.tokenizer == "gpt2") return o.tokenizer;
  return fs::weakly_canonical(fs::absolute(o.tokenizer)).string();
}

// The tokenizer file prepare_corpus() leaves in `out` ("" for bytes).
std::string tokenizer_file(const PrepareOptions& o, const fs::path& out) {
  if (o.tokenizer == "sentencepiece") return (out / kTokenizerModelFile).string();
  if (o.tokenizer == "bytes") return "";
  return (out / kBpeTokenizerFile).string();
}

// True when `out_dir` holds a complete corpus for these options and input.
bool up_to_date(const PrepareOptions& o, const Scan& in, CorpusInfo* info) {
  const fs::path dir(o.out_dir);
  std::error_code ec;
  if (!fs::is_regular_file(dir / kCorpusInfoFile, ec)) return false;
  try {
    const CorpusInfo c = read_corpus_info(o.out_dir);
    if (c.inputs != in.inputs || c.input_fingerprint != in.fingerprint || c.seed != o.seed ||
        c.val_fraction != o.val_fraction || c.tokenizer != tokenizer_name(o) ||
        (o.tokenizer == "sentencepiece" && c.vocab_size != o.vocab_size))
      return false;
    if (TokenFile((dir / kTrainTokensFile).string()).size() != c.train_tokens) return false;
    if (TokenFile((dir / kValTokensFile).string()).size() != c.val_tokens) return false;
    const std::string tk = tokenizer_file(o, dir);
    const std::unique_ptr<Tokenizer> tok = tk.empty() ? std::make_unique<ByteTokenizer>() : load_tokenizer(tk);
    if (tok->vocab_size() != c.vocab_size || tok->eot() != c.eot) return false;
    *info = c;
    return true;
  } catch (const Error&) {
    return false;  // anything unreadable is rebuilt
  }
}

// Trains SentencePiece on a seeded sample of the training documents, or
// loads the tokenizer named, and leaves its file in `out`.
std::unique_ptr<Tokenizer> make_tokenizer(const PrepareOptions& o, const std::vector<InputFile>& files,
                                          const Split& split, const Scan& scan, const fs::path& out) {
  if (o.tokenizer == "bytes") return std::make_unique<ByteTokenizer>();
  if (o.tokenizer != "sentencepiece") {
    std::unique_ptr<BpeTokenizer> bpe =
        load_bpe_tokenizer(o.tokenizer == "gpt2" ? gpt2_ranks_path() : o.tokenizer);
    write_output_file((out / kBpeTokenizerFile).string(), {bpe->to_npm_encoder_json()}, "tokenizer");
    return load_tokenizer((out / kBpeTokenizerFile).string());
  }
  const double keep = std::min(1.0, static_cast<double>(o.tokenizer_sample_bytes) /
                                        static_cast<double>(std::max<int64_t>(1, scan.distinct_bytes)));
  std::vector<std::string> sample;
  int64_t bytes = 0;
  for_each_distinct(files, [&](std::string_view doc, int64_t i) {
    const double u = uniform01(o.seed, kSampleStream, static_cast<uint64_t>(i));
    if (split.is_val(i) || u >= keep || bytes + static_cast<int64_t>(doc.size()) > o.tokenizer_sample_bytes) return;
    bytes += static_cast<int64_t>(doc.size());
    sample.emplace_back(doc);
  });
  SentencePieceTokenizer::train(sample, (out / "tokenizer").string(), o.vocab_size, o.seed, o.tokenizer_type);
  return std::make_unique<SentencePieceTokenizer>((out / kTokenizerModelFile).string());
}

// Token files being written, with the counts corpus.json reports.
struct Outputs {
  TokenFileWriter train, val;
  std::vector<int64_t> train_counts, val_counts;
  CorpusInfo* info;

  void add(const std::vector<int32_t>& ids, bool val_doc, size_t doc_bytes) {
    (val_doc ? val : train).append(ids);
    std::vector<int64_t>& counts = val_doc ? val_counts : train_counts;
    for (const int32_t t : ids) ++counts[static_cast<size_t>(t)];
    (val_doc ? info->val_documents : info->train_documents) += 1;
    (val_doc ? info->val_bytes : info->train_bytes) += static_cast<int64_t>(doc_bytes);
  }
};

// Encodes every distinct document followed by end-of-text into the token
// files, batch by batch: the documents of a batch in parallel, then appended
// in input order. The batch's buffers are reused, so the heap does not grow
// with the input.
void encode_corpus(const PrepareOptions& o, const std::vector<InputFile>& files, const Split& split,
                   const Tokenizer& tok, Outputs& outs) {
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  std::vector<std::string> docs;
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> index;
  size_t count = 0, batch_bytes = 0;
  const auto flush = [&] {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t d = 0; d < count; ++d) {
      const std::vector<int32_t> t = tok.encode(docs[d]);
      ids[d].assign(t.begin(), t.end());
      ids[d].push_back(tok.eot());
    }
    for (size_t d = 0; d < count; ++d) outs.add(ids[d], split.is_val(index[d]), docs[d].size());
    count = batch_bytes = 0;
  };
  for_each_distinct(files, [&](std::string_view doc, int64_t i) {
    if (count == docs.size()) {
      docs.emplace_back();
      ids.emplace_back();
      index.emplace_back();
    }
    docs[count].assign(doc);
    index[count++] = i;
    batch_bytes += doc.size();
    if (batch_bytes >= kBatchBytesPerThread * static_cast<size_t>(threads)) flush();
  });
  flush();
}

}  // namespace

std::vector<std::string> split_fortune_documents(std::string_view text) {
  std::vector<std::string> docs;
  DocumentSplitter split(InputKind::fortune, [&](std::string_view d) { docs.emplace_back(d); });
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    split.line(text.substr(pos, end - pos));
    pos = end;
  }
  split.finish();
  return docs;
}

double unigram_entropy(std::span<const int64_t> train_counts, std::span<const int64_t> val_counts) {
  MT_ASSERT(train_counts.size() == val_counts.size() && !train_counts.empty());
  double train_total = 0, val_total = 0, sum = 0;
  for (const int64_t c : train_counts) train_total += static_cast<double>(c);
  const double log_total = std::log(train_total + static_cast<double>(train_counts.size()));
  for (size_t t = 0; t < val_counts.size(); ++t) {
    if (val_counts[t] == 0) continue;
    val_total += static_cast<double>(val_counts[t]);
    sum += static_cast<double>(val_counts[t]) * (log_total - std::log(static_cast<double>(train_counts[t] + 1)));
  }
  MT_ASSERT(val_total > 0);
  return sum / val_total;
}

double unigram_entropy(std::span<const uint16_t> train, std::span<const uint16_t> val, int vocab_size) {
  MT_ASSERT(vocab_size > 0 && !val.empty());
  std::vector<int64_t> tc(static_cast<size_t>(vocab_size), 0), vc(static_cast<size_t>(vocab_size), 0);
  for (const uint16_t t : train) {
    MT_ASSERT(t < vocab_size);
    ++tc[t];
  }
  for (const uint16_t t : val) {
    MT_ASSERT(t < vocab_size);
    ++vc[t];
  }
  return unigram_entropy(tc, vc);
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
  const Stopwatch watch;
  check(!o.out_dir.empty(), "no output folder given for the corpus");
  check(o.vocab_size >= 1 && o.vocab_size <= 65536,
        "vocabulary size {} is outside 1..65536 (tokens are stored as uint16)", o.vocab_size);
  check(o.val_fraction > 0 && o.val_fraction < 1, "validation fraction {} is outside (0, 1)", o.val_fraction);
  check(o.tokenizer_sample_bytes > 0 && o.threads >= 0, "tokenizer sample bytes and threads must be positive");

  const std::vector<InputFile> files = list_input_files(o.inputs);
  const Scan scan = scan_input(o.inputs, files);
  check(scan.distinct >= 2, "the input holds {} distinct documents; at least 2 are needed", scan.distinct);
  PrepareResult result;
  if (up_to_date(o, scan, &result.info)) {
    result.reused = true;
    result.seconds = watch.elapsed_s();
    return result;
  }
  const fs::path out(o.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec && fs::is_directory(out), "cannot create output folder {}: {}", o.out_dir,
        ec ? ec.message() : std::string("not a folder"));
  fs::remove(out / kCorpusInfoFile, ec);  // a stale description must not outlive this run

  const Split split(scan.distinct, o.val_fraction, o.seed);
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(o, files, split, scan, out);
  CorpusInfo& c = result.info;
  const bool wide = tok->vocab_size() > 65536;
  Outputs outs{TokenFileWriter((out / kTrainTokensFile).string(), wide),
               TokenFileWriter((out / kValTokensFile).string(), wide),
               std::vector<int64_t>(static_cast<size_t>(tok->vocab_size()), 0),
               std::vector<int64_t>(static_cast<size_t>(tok->vocab_size()), 0), &c};
  encode_corpus(o, files, split, *tok, outs);
  c.train_tokens = outs.train.size();
  c.val_tokens = outs.val.size();
  outs.train.finish();
  outs.val.finish();

  c.inputs = scan.inputs;
  c.input_files = scan.files;
  c.input_bytes = scan.bytes;
  c.input_fingerprint = scan.fingerprint;
  c.vocab_size = tok->vocab_size();
  c.seed = o.seed;
  c.val_fraction = o.val_fraction;
  c.tokenizer = tokenizer_name(o);
  c.eot = tok->eot();
  c.duplicates_removed = scan.documents - scan.distinct;
  c.unigram_entropy = unigram_entropy(outs.train_counts, outs.val_counts);
  write_output_file((out / kCorpusInfoFile).string(), {to_json(c).dump(2) + "\n"}, "corpus description");
  result.seconds = watch.elapsed_s();
  return result;
}

int run_prepare_data(const PrepareOptions& options) {
  const PrepareResult r = prepare_corpus(options);
  const CorpusInfo& c = r.info;
  fmt::print("prepare-data: {} {}: {} documents ({} train, {} val, {} repeats dropped), {} train and {} val tokens, "
             "tokenizer {} (vocab {}), unigram entropy {:.4f} nats/token, {:.1f} s\n",
             options.out_dir, r.reused ? "is up to date" : "written", c.train_documents + c.val_documents,
             c.train_documents, c.val_documents, c.duplicates_removed, c.train_tokens, c.val_tokens, c.tokenizer,
             c.vocab_size, c.unigram_entropy, r.seconds);
  std::fflush(stdout);
  return 0;
}

}  // namespace meshtrain::data
