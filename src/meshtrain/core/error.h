// Errors. Every user-facing failure is a meshtrain::Error whose what() is one
// line naming the problem; the CLI prints it (rank 0, or every rank where the
// ranks may disagree) and exits non-zero. Internal invariants use MT_ASSERT.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace meshtrain {

// A configuration or input the user can fix.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Throws Error(fmt::format(...)) when `cond` is false.
template <typename... Args>
inline void check(bool cond, fmt::format_string<Args...> f, Args&&... args) {
  if (!cond) throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace meshtrain

// A broken internal invariant (a bug, not bad input).
#define MT_ASSERT(cond)                                                       \
  do {                                                                        \
    if (!(cond))                                                              \
      throw std::logic_error(fmt::format("internal error: {} ({}:{})", #cond, \
                                         __FILE__, __LINE__));                \
  } while (0)
