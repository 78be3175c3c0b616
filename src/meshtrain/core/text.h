// Case folding and word search in free text read from users' files (CSV
// fields, names): ASCII only, one byte at a time, whatever the locale.
#pragma once

#include <cctype>
#include <string>

namespace meshtrain {

inline std::string ascii_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether `word` occurs in `text` between characters that are not letters
// or digits (or the ends): "mics" in "deepspeed-mics", not in "dynamics".
inline bool has_word(const std::string& text, const std::string& word) {
  auto alnum = [&](size_t k) { return k < text.size() && std::isalnum(static_cast<unsigned char>(text[k])); };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1))
    if ((at == 0 || !alnum(at - 1)) && !alnum(at + word.size())) return true;
  return false;
}

}  // namespace meshtrain
