// Formatting for signal handlers, which may call only async-signal-safe
// functions (no malloc, no stdio): appends to a caller's buffer, stopping
// one byte short of its end.
#pragma once

#include <cstddef>

namespace meshtrain::signal_safe {

inline void put_str(char* buf, size_t cap, size_t& n, const char* s) {
  while (*s && n + 1 < cap) buf[n++] = *s++;
}

inline void put_int(char* buf, size_t cap, size_t& n, long v) {
  char digits[24];
  int d = 0;
  if (v < 0 && n + 1 < cap) buf[n++] = '-';
  unsigned long u = v < 0 ? 0UL - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
  do digits[d++] = char('0' + u % 10), u /= 10;
  while (u > 0 && d < 23);
  while (d > 0 && n + 1 < cap) buf[n++] = digits[--d];
}

}  // namespace meshtrain::signal_safe
