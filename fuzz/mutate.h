// A seeded mutator for the mutation run: the same seed gives the same
// inputs on every machine. Mutations of bytes (bit flips, interesting bytes,
// insertions, deletions, repeats, truncation) and of the numbers and values
// inside text (a number replaced by -1, 0, 2.7, 1e309, 4294967360, ...; a
// value by null, "x", [], {}, true).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshtrain::fuzz {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}

  uint64_t next();                       // xorshift64*
  size_t below(size_t n) { return n == 0 ? 0 : size_t(next() % n); }

  // 1-4 mutations of `input`.
  std::string mutate(const std::string& input);
  // One hostile value for a flag or field: numbers at and past every limit,
  // non-numbers, empty.
  std::string hostile_value();

 private:
  std::string mutate_once(std::string s);
  uint64_t state_;
};

}  // namespace meshtrain::fuzz
