#include "meshtrain/data/tokenizer.h"

#include "meshtrain/core/error.h"
#include "meshtrain/data/byte_tokenizer.h"
#include "meshtrain/data/sentencepiece_tokenizer.h"

namespace meshtrain::data {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  if (spec.ends_with(".model")) return std::make_unique<SentencePieceTokenizer>(spec);
  throw Error(fmt::format(
      "unknown tokenizer '{}': expected a SentencePiece .model file or 'bytes'", spec));
}

}  // namespace meshtrain::data
