// TokenArray: a view of N tokens of one integer type laid out contiguously in
// memory (a mapped file's body), read as int32 ids.
#pragma once

#include <cstdint>
#include <string_view>

namespace meshtrain::data {

enum class TokenType { u8, i8, i16, u16, i32, u32, i64 };

// Bytes per token of `t`, and its name ("uint16", ...).
int token_type_bytes(TokenType t);
std::string_view token_type_name(TokenType t);

struct TokenArray {
  const void* base = nullptr;  // little-endian tokens
  int64_t count = 0;
  TokenType type = TokenType::u16;

  // Tokens [start, start + n) as int32 (values outside int32 wrap; callers
  // check ranges with max_token()). Requires 0 <= start, start + n <= count.
  void read(int64_t start, int64_t n, int32_t* out) const;
  // The position of the first token outside [0, limit), or -1 if none. Reads
  // every token.
  int64_t first_outside(int64_t limit) const;
  // The token at position i as int64.
  int64_t at(int64_t i) const;
};

}  // namespace meshtrain::data
