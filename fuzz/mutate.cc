#include "mutate.h"

#include <cctype>

namespace meshtrain::fuzz {

namespace {

const std::vector<std::string>& hostile_values() {
  static const std::vector<std::string> v = {
      "-1",   "0",          "1",    "2.7",        "-0",  "1e309",      "-1e309", "nan",   "inf",   "4294967360",
      "2147483647", "2147483648", "-2147483649", "9223372036854775807", "18446744073709551616", "1e-320",
      "0.5",  "1.5",  "\"x\"", "null", "[]",  "{}",   "true", "\"\"",   "65535", "65536", "3", "8", "1000000"};
  return v;
}

}  // namespace

uint64_t Mutator::next() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1Dull;
}

std::string Mutator::hostile_value() {
  const auto& v = hostile_values();
  return v[below(v.size())];
}

std::string Mutator::mutate(const std::string& input) {
  std::string s = input;
  const int n = 1 + int(below(4));
  for (int i = 0; i < n; ++i) s = mutate_once(std::move(s));
  return s;
}

std::string Mutator::mutate_once(std::string s) {
  const size_t pos = below(s.size() + 1);
  switch (below(9)) {
    case 0:  // flip a bit
      if (!s.empty()) s[pos % s.size()] ^= char(1u << below(8));
      break;
    case 1: {  // an interesting byte
      static const char bytes[] = {0, '\xff', '\x7f', '\x80', '-', '9', '"', ',', '\n', '{', '['};
      if (!s.empty()) s[pos % s.size()] = bytes[below(sizeof(bytes))];
      break;
    }
    case 2:  // insert random bytes
      for (size_t i = 0, k = 1 + below(8); i < k; ++i) s.insert(s.begin() + long(pos), char(next()));
      break;
    case 3:  // delete a span
      s.erase(pos, 1 + below(16));
      break;
    case 4:  // repeat a span
      if (!s.empty()) {
        const size_t at = pos % s.size(), len = 1 + below(std::min<size_t>(64, s.size() - at));
        s.insert(at, s.substr(at, len));
      }
      break;
    case 5:  // truncate
      s.resize(pos);
      break;
    default: {  // replace the number (or word) found after a random position by a hostile value
      size_t at = pos;
      while (at < s.size() && !(std::isdigit(static_cast<unsigned char>(s[at])) || s[at] == '-' || s[at] == 't' ||
                                s[at] == 'f' || s[at] == '"'))
        ++at;
      if (at >= s.size()) break;
      size_t end = at + 1;
      if (s[at] == '"') {
        end = s.find('"', at + 1);
        end = end == std::string::npos ? s.size() : end + 1;
      } else {
        while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '.' ||
                                  s[end] == '+' || s[end] == '-'))
          ++end;
      }
      s.replace(at, end - at, hostile_value());
      break;
    }
  }
  return s;
}

}  // namespace meshtrain::fuzz
