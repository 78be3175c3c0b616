#include "meshtrain/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/core/output_file.h"

namespace meshtrain::data {

namespace {

constexpr const char* kEotPiece = "<|endoftext|>";

// Feeds in-memory texts to the SentencePiece trainer.
class TextIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit TextIterator(std::span<const std::string> texts) : texts_(texts) {}
  bool done() const override { return i_ >= texts_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return texts_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::span<const std::string> texts_;
  size_t i_ = 0;
};

// SentencePiece's failed checks read "Internal: file.cc(580) [condition]
// message"; the message alone is what a user can act on.
std::string reason(const sentencepiece::util::Status& status) {
  std::string text = status.ToString();
  const size_t at = text.find(") [");
  const size_t end = at == std::string::npos ? at : text.find("] ", at);
  if (end != std::string::npos) text = text.substr(end + 2);
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace

std::string_view sentencepiece_type_name(SentencePieceType type) {
  return type == SentencePieceType::bpe ? "bpe" : "unigram";
}

SentencePieceType parse_sentencepiece_type(std::string_view name) {
  if (name == "bpe") return SentencePieceType::bpe;
  if (name == "unigram") return SentencePieceType::unigram;
  throw Error(fmt::format("unknown tokenizer type '{}': expected 'bpe' or 'unigram'", name));
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::error_code ec;
  check(std::filesystem::is_regular_file(model_path, ec), "tokenizer model {} does not exist", model_path);
  const auto status = sp_->Load(model_path);
  check(status.ok(), "tokenizer model {} cannot be loaded: {}", model_path, reason(status));
  vocab_size_ = sp_->GetPieceSize();
  eot_ = sp_->eos_id();
  check(eot_ >= 0 && eot_ < vocab_size_,
        "tokenizer model {} has no eos piece to serve as the end-of-text token", model_path);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  check(status.ok(), "tokenizer {} cannot encode text: {}", path_, reason(status));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i)
    check(ids[i] >= 0 && ids[i] < vocab_size_,
          "cannot decode token {} at position {}: tokenizer {} has ids 0..{}", ids[i], i, path_,
          vocab_size_ - 1);
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  check(status.ok(), "tokenizer {} cannot decode: {}", path_, reason(status));
  return text;
}

void SentencePieceTokenizer::train(std::span<const std::string> texts, const std::string& model_prefix,
                                   int vocab_size, uint64_t seed, SentencePieceType type) {
  const std::string model_path = model_prefix + ".model";
  check(!texts.empty(), "cannot train tokenizer {}: no training text", model_path);
  check(vocab_size > 0, "cannot train tokenizer {}: vocabulary size {} is not positive", model_path,
        vocab_size);
  const std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", std::string(sentencepiece_type_name(type))},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      // No normalization: the text is tokenized as written, newlines and runs
      // of spaces included, so decoding gives it back byte for byte.
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"unk_id", "0"},
      {"eos_id", "1"},
      {"eos_piece", kEotPiece},
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"hard_vocab_limit", "true"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", "1000000"},
      {"shuffle_input_sentence", "true"},
      {"num_threads", "1"},
      {"minloglevel", "2"},
  };
  // SentencePiece reserves UINT_MAX for "seed from the clock".
  unsigned int sp_seed = static_cast<unsigned int>(splitmix64(seed));
  if (sp_seed == UINT_MAX) --sp_seed;
  sentencepiece::SetRandomGeneratorSeed(sp_seed);

  TextIterator iterator(texts);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator, &model);
  check(status.ok(), "cannot train tokenizer {} with {} pieces: {}", model_path, vocab_size,
        reason(status));
  write_output_file(model_path, {model}, "tokenizer model");
}

void SentencePieceTokenizer::train(const std::string& text_file, const std::string& model_prefix,
                                   int vocab_size, uint64_t seed, SentencePieceType type) {
  std::ifstream in(text_file, std::ios::binary);
  check(in.good(), "cannot read tokenizer training text {}", text_file);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!in.eof()) line.push_back('\n');
    if (!line.empty()) lines.push_back(std::move(line));
  }
  check(in.eof(), "cannot read tokenizer training text {}", text_file);
  check(!lines.empty(), "tokenizer training text {} is empty", text_file);
  train(std::span<const std::string>(lines), model_prefix, vocab_size, seed, type);
}

}  // namespace meshtrain::data
