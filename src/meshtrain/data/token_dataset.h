// TokenDataset: the token stream a --data-path names, from any of the formats
// users bring, read as int32 ids:
//   - an llm.c token file (token_file.h; uint16 version 1 or uint32 version 7);
//   - a glob of them, e.g. 'dir/fineweb_train_*.bin': the matches in name
//     order, concatenated (llm.c's shards);
//   - a Megatron indexed dataset (indexed_dataset.h), named by its prefix or
//     by its .bin or .idx file.
// Files are mapped, never copied; a dataset of many shards costs no heap
// beyond one small record per file.
//
// resolve_data_path() turns --data-path into the training and validation
// datasets and the tokenizer that goes with them:
//   a folder      train.bin, val.bin (if present) and tokenizer.model,
//                 tokenizer.json or tokenizer.tiktoken (if present): what
//                 prepare-data writes;
//   a glob        the training shards; validation is the same glob with its
//                 file name's last "train" replaced by "val", when that
//                 matches files (llm.c's fineweb_train_* / fineweb_val_*);
//   anything else a single token file or indexed dataset, no validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/data/indexed_dataset.h"
#include "meshtrain/data/token_file.h"

namespace meshtrain::data {

class TokenDataset {
 public:
  // Opens every file `spec` names and checks each (token_file.h,
  // indexed_dataset.h). Throws Error naming `spec` when a glob matches
  // nothing, or the file and the problem.
  explicit TokenDataset(const std::string& spec);

  const std::string& spec() const { return spec_; }
  int64_t size() const { return size_; }
  int num_files() const { return static_cast<int>(parts_.size()); }
  // Tokens [start, start + n) of the concatenated stream.
  void read(int64_t start, int64_t n, int32_t* out) const;
  // Throws Error naming the file, the position in it and the token when a
  // token is outside [0, vocab_size). Reads every token.
  void validate_vocab(int vocab_size) const;

 private:
  struct Part {
    std::string path;
    TokenArray tokens;
    int64_t start = 0;  // position of its first token in the stream
  };
  void add(const std::string& path);

  std::string spec_;
  std::vector<TokenFile> files_;
  std::vector<IndexedDataset> indexed_;
  std::vector<Part> parts_;
  int64_t size_ = 0;
};

struct DataPaths {
  std::string train;      // a TokenDataset spec
  std::string val;        // "" when there is none
  std::string tokenizer;  // "" when none is found beside the data
};

// As described above. Throws Error when `data_path` names nothing that exists.
DataPaths resolve_data_path(const std::string& data_path);

// The files a glob pattern matches, in name order ({} when none).
std::vector<std::string> glob_files(const std::string& pattern);

}  // namespace meshtrain::data
