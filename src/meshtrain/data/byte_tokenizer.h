// The byte tokenizer: each byte of the text is one token (ids 0..255) and the
// end-of-text token is 256, so vocab_size() is 257. It needs no model file and
// round-trips any byte string, valid UTF-8 or not.
#pragma once

#include "meshtrain/data/tokenizer.h"

namespace meshtrain::data {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEot = 256;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return kEot + 1; }
  int32_t eot() const override { return kEot; }
  std::string name() const override { return "bytes"; }
};

}  // namespace meshtrain::data
