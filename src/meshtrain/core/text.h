// Case folding of free text read from users' files (CSV fields, names):
// ASCII only, one byte at a time, whatever the locale.
#pragma once

#include <cctype>
#include <string>

namespace meshtrain {

inline std::string ascii_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace meshtrain
