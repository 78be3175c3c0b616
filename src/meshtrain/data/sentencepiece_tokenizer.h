// A SentencePiece tokenizer (BPE or unigram) loaded from a .model file.
//
// Models trained here use no text normalization (identity rule, whitespace
// kept as is, no dummy prefix) and byte fallback, so every valid UTF-8 text
// round-trips exactly and no token is unknown; the end-of-text token is the
// model's eos piece "<|endoftext|>". A model from elsewhere loads if it has an
// eos piece; its round-trip guarantee is whatever its normalization allows.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "meshtrain/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace meshtrain::data {

enum class SentencePieceType { bpe, unigram };

// "bpe" or "unigram", and back; parsing anything else throws Error.
std::string_view sentencepiece_type_name(SentencePieceType type);
SentencePieceType parse_sentencepiece_type(std::string_view name);

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads `model_path`. Throws Error naming it when it is missing, is not a
  // SentencePiece model, or has no eos piece to serve as end-of-text.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return vocab_size_; }
  int32_t eot() const override { return eot_; }
  std::string name() const override { return path_; }

  // Trains a model of exactly `vocab_size` pieces (256 byte pieces, unknown
  // and end-of-text included) on `texts` and writes it to
  // `<model_prefix>.model` (through a temporary file and a rename). Each text
  // is one training sentence and may span lines; at most a million are used
  // (a seeded sample of them beyond that), and texts over 64 KiB are left
  // out of training (they still encode, through smaller pieces). Training is single-threaded and a
  // pure function of (texts, vocab_size, seed, type). Sets SentencePiece's
  // process-wide random seed: do not train from two threads at once. Throws
  // Error when training fails, e.g. when `vocab_size` is too large for the
  // text or too small to hold the characters it needs.
  static void train(std::span<const std::string> texts, const std::string& model_prefix,
                    int vocab_size, uint64_t seed, SentencePieceType type = SentencePieceType::bpe);

  // As above, with the lines of `text_file` (each with its newline) as the
  // training sentences. Throws Error naming the file when it cannot be read or
  // holds no text.
  static void train(const std::string& text_file, const std::string& model_prefix, int vocab_size,
                    uint64_t seed, SentencePieceType type = SentencePieceType::bpe);

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int vocab_size_ = 0;
  int32_t eot_ = -1;
};

}  // namespace meshtrain::data
