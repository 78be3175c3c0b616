#include "meshtrain/data/byte_tokenizer.h"

#include "meshtrain/core/error.h"

namespace meshtrain::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    check(id >= 0 && id <= kEot, "cannot decode token {} at position {}: the byte tokenizer's ids are 0..{}",
          id, i, kEot);
    if (id != kEot) text.push_back(static_cast<char>(id));
  }
  return text;
}

}  // namespace meshtrain::data
