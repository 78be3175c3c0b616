// Counter-based random numbers: the value at (seed, stream, index) is a pure
// function of those three, so a rank can initialise its shard of a tensor by
// global element index and obtain exactly the values the serial run has.
#pragma once

#include <cmath>
#include <cstdint>

namespace meshtrain {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t hash3(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}

// Uniform in (0, 1).
inline double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return (static_cast<double>(hash3(seed, stream, index) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal (Box-Muller on two independent uniforms).
inline float normal01(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = uniform01(seed, stream, 2 * index);
  const double u2 = uniform01(seed, stream, 2 * index + 1);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace meshtrain
