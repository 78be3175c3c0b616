// Tokenizers: text to token ids and back.
//
// Every tokenizer has an end-of-text token, eot(), that separates documents in
// a token stream. encode() never produces it; decode() renders it as nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, each in [0, vocab_size()). decode(encode(t)) == t for
  // every valid UTF-8 text t.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The text of `ids`. Throws Error on an id outside [0, vocab_size()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // Number of distinct ids, eot() included.
  virtual int vocab_size() const = 0;
  // The document separator.
  virtual int32_t eot() const = 0;
  // What load_tokenizer() was given to make this tokenizer.
  virtual std::string name() const = 0;
};

// Makes the tokenizer `spec` names: "bytes" gives a ByteTokenizer, a path
// ending in ".model" a SentencePieceTokenizer loaded from it, "gpt2" GPT-2's
// BpeTokenizer (bpe_tokenizer.h: gpt2_ranks_path()), a path ending in
// ".tiktoken" or ".json" a BpeTokenizer loaded from it. Throws Error for
// anything else, or when the file cannot be loaded.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

}  // namespace meshtrain::data
