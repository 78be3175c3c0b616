#include "meshtrain/data/token_array.h"

#include <bit>

#include "meshtrain/core/error.h"

namespace meshtrain::data {

static_assert(std::endian::native == std::endian::little, "token files are little-endian");

int token_type_bytes(TokenType t) {
  switch (t) {
    case TokenType::u8: case TokenType::i8: return 1;
    case TokenType::i16: case TokenType::u16: return 2;
    case TokenType::i32: case TokenType::u32: return 4;
    case TokenType::i64: return 8;
  }
  MT_ASSERT(false);
}

std::string_view token_type_name(TokenType t) {
  switch (t) {
    case TokenType::u8: return "uint8";
    case TokenType::i8: return "int8";
    case TokenType::i16: return "int16";
    case TokenType::u16: return "uint16";
    case TokenType::i32: return "int32";
    case TokenType::u32: return "uint32";
    case TokenType::i64: return "int64";
  }
  MT_ASSERT(false);
}

namespace {

// Calls f(p) with p the array's base as a pointer to its element type.
template <class F>
auto with_type(const TokenArray& a, F&& f) {
  switch (a.type) {
    case TokenType::u8: return f(static_cast<const uint8_t*>(a.base));
    case TokenType::i8: return f(static_cast<const int8_t*>(a.base));
    case TokenType::i16: return f(static_cast<const int16_t*>(a.base));
    case TokenType::u16: return f(static_cast<const uint16_t*>(a.base));
    case TokenType::i32: return f(static_cast<const int32_t*>(a.base));
    case TokenType::u32: return f(static_cast<const uint32_t*>(a.base));
    case TokenType::i64: return f(static_cast<const int64_t*>(a.base));
  }
  MT_ASSERT(false);
}

}  // namespace

void TokenArray::read(int64_t start, int64_t n, int32_t* out) const {
  MT_ASSERT(start >= 0 && n >= 0 && start + n <= count);
  with_type(*this, [&](const auto* p) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(p[start + i]);
  });
}

int64_t TokenArray::first_outside(int64_t limit) const {
  return with_type(*this, [&](const auto* p) -> int64_t {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t v = static_cast<int64_t>(p[i]);
      if (v < 0 || v >= limit) return i;
    }
    return -1;
  });
}

int64_t TokenArray::at(int64_t i) const {
  MT_ASSERT(i >= 0 && i < count);
  return with_type(*this, [&](const auto* p) { return static_cast<int64_t>(p[i]); });
}

}  // namespace meshtrain::data
