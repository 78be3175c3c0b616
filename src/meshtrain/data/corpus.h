// Preparing a training corpus from fortune files.
//
// prepare_corpus() reads every fortune file of `input_dir` (the regular files
// whose names have no extension, in name order; subfolders such as off/ and
// the .dat/.u8 companions are ignored), splits them into documents at lines
// holding only "%", drops blank and repeated documents, shuffles them with
// `seed`, puts the first round(val_fraction x count) of them (at least one) in
// validation and the rest in training, trains a SentencePiece tokenizer on the
// training documents, encodes each document followed by end-of-text, and
// writes into `out_dir`:
//   train.bin, val.bin   token files (token_file.h)
//   tokenizer.model      the SentencePiece model (sentencepiece_tokenizer.h)
//   corpus.json          the options, a fingerprint of the input and the
//                        counts (CorpusInfo), written last
// The result is a pure function of the input files and the options. When
// corpus.json already describes the same options and input and the other
// three files are intact, nothing is rebuilt.
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
inline constexpr const char* kCorpusInfoFile = "corpus.json";

struct PrepareOptions {
  std::string out_dir;                                  // created if missing
  std::string input_dir = "/usr/share/games/fortunes";  // Debian's fortunes
  int vocab_size = 4096;                                // at most 65536 (uint16 tokens)
  uint64_t seed = 1234;                                 // document shuffle and tokenizer training
  double val_fraction = 0.05;                           // in (0, 1)
  SentencePieceType tokenizer_type = SentencePieceType::bpe;
};

// What corpus.json holds.
struct CorpusInfo {
  // The options and the input they were applied to.
  std::string input_dir;  // absolute
  int64_t input_files = 0;
  int64_t input_bytes = 0;
  std::string input_fingerprint;  // 16 hex digits, over file names and contents
  int vocab_size = 0;
  uint64_t seed = 0;
  double val_fraction = 0;
  std::string tokenizer_type;  // "bpe" or "unigram"

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
// naming the problem when an option is out of range, the input folder is
// missing or holds no fortune files or fewer than two documents, the tokenizer
// cannot be trained, or an output cannot be written.
PrepareResult prepare_corpus(const PrepareOptions& options);

// Runs prepare_corpus() and prints one summary line to stdout; returns the
// process exit code (0). Errors propagate as Error. This is the body of
// `meshtrain prepare-data`.
int run_prepare_data(const PrepareOptions& options);

// Reads `<dir>/corpus.json`. Throws Error naming the file when it is missing
// or malformed.
CorpusInfo read_corpus_info(const std::string& dir);

// The fortune files of `dir` as described above, sorted by name. Throws Error
// when `dir` is not a folder or holds none.
std::vector<std::string> list_fortune_files(const std::string& dir);

// The documents of one fortune file's text: the runs of lines between lines
// that hold only "%", each line with its newline. Blank documents are dropped.
std::vector<std::string> split_fortune_documents(std::string_view text);

// The cross-entropy in nats per token of `val` under the add-one smoothed
// unigram distribution of `train` over `vocab_size` ids:
//   -mean over t in val of log((count_train(t) + 1) / (|train| + vocab_size)).
// Requires every token < vocab_size and a non-empty `val`.
double unigram_entropy(std::span<const uint16_t> train, std::span<const uint16_t> val,
                       int vocab_size);

}  // namespace meshtrain::data
