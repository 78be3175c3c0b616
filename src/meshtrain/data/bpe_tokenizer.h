// The byte-level BPE tokenizer of GPT-2 and of tiktoken's encodings.
//
// encode(): the text is cut into pieces by the encoding's regular expression
// (GPT-2's: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+),
// run with PCRE2 on UTF-8 with Unicode properties; bytes that are not valid
// UTF-8 form pieces of their own. A piece that is a token is that token;
// otherwise its bytes are merged as tiktoken merges them (its byte_pair_merge,
// after Sennrich et al. 2016 and Radford et al. 2019): repeatedly the adjacent
// pair whose concatenated bytes have the lowest rank, until no adjacent pair
// is a token. The ids are the ranks. encode() never produces a special token;
// "<|endoftext|>" in the text is encoded as ordinary text (tiktoken's
// encode_ordinary).
//
// Files (load_bpe_tokenizer):
//   NAME.tiktoken   tiktoken's ranks: lines "<base64 of the token's bytes> <rank>";
//                   GPT-2's pattern, <|endoftext|> after the last rank;
//   encoder.json    GPT-2's {"<token in GPT-2's byte-to-unicode alphabet>": id}
//                   with its vocab.bpe beside it: merge i must make token
//                   256 + i (checked), so the merge order is the ranks' order;
//   NAME.json       an encoder of the tiktoken npm package (encoders/gpt2.json:
//                   pat_str, special_tokens, explicit_n_vocab and bpe_ranks,
//                   the ranks as lines "<ignored> <first rank> <base64> <base64> ...").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meshtrain/data/tokenizer.h"

namespace meshtrain::data {

// Heterogeneous lookup of byte strings.
struct BytesHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using RankMap = std::unordered_map<std::string, int32_t, BytesHash, std::equal_to<>>;

class BpeTokenizer final : public Tokenizer {
 public:
  // `ranks`: every token's bytes and id; `pattern`: the pre-tokenizer (a
  // regular expression in tiktoken's dialect); `special`: the special tokens,
  // which must include "<|endoftext|>"; `vocab_size`: 0 for one past the
  // largest id. Throws Error when the pattern does not compile, ids repeat or
  // a byte has no token.
  BpeTokenizer(RankMap ranks, const std::string& pattern, const std::unordered_map<std::string, int32_t>& special,
               int vocab_size, std::string name);
  ~BpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return vocab_size_; }
  int32_t eot() const override { return eot_; }
  std::string name() const override { return name_; }

  // Appends the tokens of one piece (a match of the pattern) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;

  // The tokenizer as a tiktoken npm encoder .json (one rank per bpe_ranks
  // line), which load_bpe_tokenizer() reads back.
  std::string to_npm_encoder_json() const;

 private:
  struct Regex;
  RankMap ranks_;
  std::string pattern_;
  std::unordered_map<std::string, int32_t> special_;
  std::vector<std::string> bytes_;  // by id; special tokens included
  std::unique_ptr<Regex> regex_;
  int vocab_size_ = 0;
  int32_t eot_ = -1;
  std::string name_;
};

// GPT-2's pre-tokenizer pattern.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Loads one of the files above (by its name). Throws Error naming the file
// when it is missing or malformed.
std::unique_ptr<BpeTokenizer> load_bpe_tokenizer(const std::string& path);

// Where "gpt2" is found: $MESHTRAIN_GPT2_RANKS, else the tiktoken npm
// package that scripts/install-deps installs under third_party/node. Throws
// Error saying how to get it when neither exists.
std::string gpt2_ranks_path();

}  // namespace meshtrain::data
