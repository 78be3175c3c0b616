#include "meshtrain/data/tokenizer.h"

#include "meshtrain/core/error.h"
#include "meshtrain/data/bpe_tokenizer.h"
#include "meshtrain/data/byte_tokenizer.h"
#include "meshtrain/data/sentencepiece_tokenizer.h"

namespace meshtrain::data {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  if (spec.ends_with(".model")) return std::make_unique<SentencePieceTokenizer>(spec);
  if (spec == "gpt2") return load_bpe_tokenizer(gpt2_ranks_path());
  if (spec.ends_with(".tiktoken") || spec.ends_with(".json")) return load_bpe_tokenizer(spec);
  throw Error(fmt::format("unknown tokenizer '{}': expected 'bytes', 'gpt2', a SentencePiece .model file, "
                          "a .tiktoken ranks file, GPT-2's encoder.json or a tiktoken encoder .json",
                          spec));
}

}  // namespace meshtrain::data
