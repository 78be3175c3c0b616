// Helpers shared by the CPU kernels (internal; not part of the kernel API).
//
// - ld / st: element load and store between an activation type (float or
//   bf16) and fp32. Both are branch-free so loops using them vectorize; st
//   rounds to nearest even and keeps NaN a NaN, bit-identical to
//   meshtrain::from_f32<bf16>.
// - exp_approx: a vectorizable exp (Cody-Waite range reduction, degree-6
//   polynomial); relative error below 4e-7 over the normal range, exactly 0
//   for x < -87 (so exp(-inf) = 0), and finite (about 1.65e38) for x > 88.
// - Fixed row blocking for deterministic reductions: parameter gradients are
//   summed per block of rows into partial buffers, then the partials are
//   added in block order. Blocks do not depend on the number of threads, so
//   results are bitwise identical for any OMP_NUM_THREADS.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels::cpu {

inline float ld(float x) { return x; }
inline float ld(bf16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }

template <class T> inline T st(float x);
template <> inline float st<float>(float x) { return x; }
template <> inline bf16 st<bf16>(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  bf16 b;
  b.bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  return b;
}

inline float exp_approx(float x) {
  const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // k = round(x / ln2) with the 1.5 * 2^23 trick (exact for |k| < 2^22).
  const float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // r = x - k ln2 in two steps (ln2 split into a 16-bit head and a tail).
  const float r = (xc - k * 0.693145751953125f) - k * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_k = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23);
  return x < -87.0f ? 0.0f : p * two_k;
}

// Rows per block in the deterministic parameter-gradient reductions.
inline constexpr int kReduceRows = 32;

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
inline int round_up(int a, int b) { return ceil_div(a, b) * b; }

// 64-byte aligned float scratch, uninitialised.
struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using Scratch = std::unique_ptr<float[], AlignedFree>;
inline Scratch make_scratch(size_t count) {
  const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (p == nullptr) throw std::bad_alloc();
  return Scratch(static_cast<float*>(p));
}

// Adds the per-block partials [nblocks, width] into dst[width] (dst +=),
// summing blocks in index order; parallel over columns.
void reduce_partials_into(float* dst, const float* partials, int nblocks, int width);

}  // namespace meshtrain::kernels::cpu
