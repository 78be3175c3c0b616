// 64-bit size arithmetic that cannot wrap: sizes, element and byte counts
// computed from user input (a model shape, a batch) go through these, and a
// product or sum past int64_t throws Error "<what> overflows 64 bits" instead
// of turning into a negative or small number.
#pragma once

#include <cstdint>
#include <string_view>

#include "meshtrain/core/error.h"

namespace meshtrain {

inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw Error(fmt::format("{} overflows 64 bits", what));
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw Error(fmt::format("{} overflows 64 bits", what));
  return r;
}

}  // namespace meshtrain
