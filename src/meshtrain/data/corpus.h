// Preparing a training corpus from the text users have, streamed.
//
// prepare_corpus() reads the documents of the inputs (text_input.h: .txt,
// .jsonl and fortune files, and folders of them), drops repeated documents
// (by a 64-bit hash of their text; the first kMaxRememberedDocuments distinct
// documents are remembered, later ones are still checked against them),
// numbers the n distinct documents in input order, and puts document i in
// validation when perm(i) < round(val_fraction x n) (at least one, at most
// n - 1; perm a permutation of [0, n) keyed by `seed`), the rest in training.
// The tokenizer is SentencePiece trained here (on a seeded sample of at most
// tokenizer_sample_bytes of the training documents), the byte tokenizer, or
// a byte-level BPE (tokenizer.h: "gpt2" or a ranks file). Each document is
// encoded followed by end-of-text, in parallel over batches of documents,
// and appended in input order to the token files. Written into `out_dir`:
//   train.bin, val.bin   token files (token_file.h: uint16, or uint32 when the
//                        vocabulary exceeds 65536)
//   tokenizer.model      SentencePiece's model, or
//   tokenizer.json       the BPE tokenizer (a tiktoken npm encoder), or none
//                        for bytes
//   corpus.json          the options, a fingerprint of the input and the
//                        counts (CorpusInfo), written last
// The input is read twice (three times to sample SentencePiece's training
// text); memory stays bounded by the batches in flight (a few MiB per
// thread), the sample, the remembered hashes and the longest input line,
// whatever the size of the input. The result is a pure function of the input
// files and the options, whatever the thread count. When corpus.json already
// describes the same options and input and the outputs are intact, nothing
// is rebuilt.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/data/sentencepiece_tokenizer.h"

namespace meshtrain::data {

inline constexpr const char* kTrainTokensFile = "train.bin";
inline constexpr const char* kValTokensFile = "val.bin";
inline constexpr const char* kTokenizerModelFile = "tokenizer.model";
inline constexpr const char* kBpeTokenizerFile = "tokenizer.json";
inline constexpr const char* kCorpusInfoFile = "corpus.json";
inline constexpr int64_t kMaxRememberedDocuments = int64_t{1} << 23;

struct PrepareOptions {
  std::string out_dir;                                              // created if missing
  std::vector<std::string> inputs = {"/usr/share/games/fortunes"};  // Debian's fortunes
  // "sentencepiece" (trained here), "bytes", "gpt2", or a .tiktoken,
  // encoder.json or tiktoken encoder .json file.
  std::string tokenizer = "sentencepiece";
  int vocab_size = 4096;  // of a trained SentencePiece model; at most 65536
  uint64_t seed = 1234;   // validation split and tokenizer training
  double val_fraction = 0.05;  // in (0, 1)
  SentencePieceType tokenizer_type = SentencePieceType::bpe;
  int64_t tokenizer_sample_bytes = int64_t{64} << 20;  // SentencePiece's training text
  int threads = 0;                                     // 0: every core
};

// What corpus.json holds.
struct CorpusInfo {
  // The options and the input they were applied to.
  std::vector<std::string> inputs;  // absolute
  int64_t input_files = 0;
  int64_t input_bytes = 0;
  std::string input_fingerprint;  // 16 hex digits, over file names and contents
  int vocab_size = 0;
  uint64_t seed = 0;
  double val_fraction = 0;
  std::string tokenizer;  // "sentencepiece-bpe", "sentencepiece-unigram", "bytes", "gpt2" or a file

  // The result.
  int32_t eot = 0;
  int64_t duplicates_removed = 0;
  int64_t train_documents = 0, val_documents = 0;
  int64_t train_tokens = 0, val_tokens = 0;  // end-of-text tokens included
  int64_t train_bytes = 0, val_bytes = 0;    // UTF-8 bytes of the documents' text
  // Cross-entropy, in nats per token, of the validation tokens under the
  // unigram distribution of the training tokens with add-one smoothing: the
  // loss of a model that ignores context. A trained model's validation loss
  // should fall below it.
  double unigram_entropy = 0;
};

struct PrepareResult {
  CorpusInfo info;
  bool reused = false;  // the outputs were already up to date
  double seconds = 0;
};

// Builds the corpus described above, or finds it up to date. Throws Error
// naming the problem when an option is out of range, an input is missing or
// malformed, there are fewer than two distinct documents, the tokenizer
// cannot be made, or an output cannot be written.
PrepareResult prepare_corpus(const PrepareOptions& options);

// Runs prepare_corpus() and prints one summary line to stdout; returns the
// process exit code (0). Errors propagate as Error. This is the body of
// `meshtrain prepare-data`.
int run_prepare_data(const PrepareOptions& options);

// Reads `<dir>/corpus.json`. Throws Error naming the file when it is missing
// or malformed.
CorpusInfo read_corpus_info(const std::string& dir);

// The documents of one fortune file's text: the runs of lines between lines
// that hold only "%", each line with its newline. Blank documents are dropped.
std::vector<std::string> split_fortune_documents(std::string_view text);

// The cross-entropy in nats per token of `val` under the add-one smoothed
// unigram distribution of `train` over `vocab_size` ids:
//   -mean over t in val of log((count_train(t) + 1) / (|train| + vocab_size)).
// Requires every token < vocab_size and a non-empty `val`.
double unigram_entropy(std::span<const uint16_t> train, std::span<const uint16_t> val,
                       int vocab_size);
// The same from the token counts of each split (counts[t] for t < vocab size).
double unigram_entropy(std::span<const int64_t> train_counts, std::span<const int64_t> val_counts);

}  // namespace meshtrain::data
