// A pseudo-random permutation of [0, n) that costs O(1) memory: the image of
// each index is computed on demand, as a pure function of (n, key, index).
//
// It is a six-round Feistel network over the smallest even power of two that
// is >= n, keyed by splitmix64 hashes of `key`, restricted to [0, n) by cycle
// walking (re-applying the network until the value falls inside [0, n)).
// Distinct keys give unrelated permutations.
#pragma once

#include <cstdint>

namespace meshtrain::data {

class Permutation {
 public:
  Permutation(uint64_t n, uint64_t key);

  uint64_t size() const { return n_; }
  // The image of i, for 0 <= i < size(); a bijection on [0, size()).
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t feistel(uint64_t x) const;

  uint64_t n_;
  uint64_t key_;
  int half_bits_;  // the network's domain is [0, 4^half_bits)
  uint64_t half_mask_;
};

}  // namespace meshtrain::data
