#include "meshtrain/data/permutation.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"

namespace meshtrain::data {

namespace {
constexpr int kRounds = 6;
}

Permutation::Permutation(uint64_t n, uint64_t key) : n_(n), key_(splitmix64(key)) {
  check(n <= (uint64_t{1} << 62), "cannot permute {} items: at most 2^62 are supported", n);
  int bits = 2;
  while ((uint64_t{1} << bits) < n) ++bits;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t Permutation::feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t mixed = left ^ (hash3(key_, static_cast<uint64_t>(round), right) & half_mask_);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::operator()(uint64_t i) const {
  MT_ASSERT(i < n_);
  uint64_t x = i;
  do {
    x = feistel(x);
  } while (x >= n_);
  return x;
}

}  // namespace meshtrain::data
