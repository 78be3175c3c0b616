// Integers read from untrusted JSON: a value must be a JSON integer within
// [lo, hi]. 2.7, 1e300, "3" or 4294967360 (for an int field) are errors,
// never truncated, converted or wrapped; the Error names `what` and the value.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain {

inline int64_t json_integer(const nlohmann::json& x, int64_t lo, int64_t hi, std::string_view what) {
  bool ok = x.is_number_integer();
  if (ok && x.is_number_unsigned())
    ok = x.get<uint64_t>() <= uint64_t(INT64_MAX) && int64_t(x.get<uint64_t>()) >= lo &&
         int64_t(x.get<uint64_t>()) <= hi;
  else if (ok)
    ok = x.get<int64_t>() >= lo && x.get<int64_t>() <= hi;
  check(ok, "{} must be an integer in [{}, {}] (got {})", what, lo, hi, x.dump());
  return x.is_number_unsigned() ? int64_t(x.get<uint64_t>()) : x.get<int64_t>();
}

}  // namespace meshtrain
