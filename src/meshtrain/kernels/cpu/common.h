// Helpers shared by the CPU kernels (internal; not part of the kernel API).
//
// - ld / st: element load and store between an activation type (float or
//   bf16) and fp32. Both are branch-free so loops using them vectorize; st
//   rounds to nearest even and keeps NaN a NaN, bit-identical to
//   meshtrain::from_f32<bf16>.
// - exp_approx: a vectorizable exp (Cody-Waite range reduction, degree-6
//   polynomial); relative error below 5e-7 on [-87, 88], exactly 0 for
//   x < -87 (so exp(-inf) = 0), and finite (about 1.65e38) for x > 88.
// - vfloat: one SIMD register of fp32 lanes (GCC/Clang vector extension;
//   16 lanes with AVX-512, else 8), with loads/stores from float or bf16,
//   horizontal sum/max as a tree, and vexp (the same function as exp_approx,
//   lane by lane). Used where the compiler's own vectorisation is poor:
//   row reductions (it finishes those with a serial chain of scalar adds)
//   and exp-heavy loops.
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
#include <cstring>
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

#if defined(__AVX512F__)
inline constexpr int kVL = 16;
typedef float vfloat __attribute__((vector_size(64)));
typedef int32_t vint __attribute__((vector_size(64)));
typedef uint32_t vuint __attribute__((vector_size(64)));
typedef uint16_t vhalf __attribute__((vector_size(32)));
inline vfloat vbroadcast(float x) { return vfloat{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
#else
inline constexpr int kVL = 8;
typedef float vfloat __attribute__((vector_size(32)));
typedef int32_t vint __attribute__((vector_size(32)));
typedef uint32_t vuint __attribute__((vector_size(32)));
typedef uint16_t vhalf __attribute__((vector_size(16)));
inline vfloat vbroadcast(float x) { return vfloat{x, x, x, x, x, x, x, x}; }
#endif

inline vfloat vload(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline vfloat vload(const bf16* p) {
  vhalf h;
  std::memcpy(&h, p, sizeof(h));
  return reinterpret_cast<vfloat>(__builtin_convertvector(h, vuint) << 16);
}
inline void vstore(float* p, vfloat v) { std::memcpy(p, &v, sizeof(v)); }
inline void vstore(bf16* p, vfloat v) {
  const vuint u = reinterpret_cast<vuint>(v);
  const vuint rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const vuint quiet_nan = (u >> 16) | 0x40u;
  const vuint is_nan = reinterpret_cast<vuint>((u & 0x7fffffffu) > 0x7f800000u);
  const vhalf h = __builtin_convertvector((quiet_nan & is_nan) | (rounded & ~is_nan), vhalf);
  std::memcpy(static_cast<void*>(p), &h, sizeof(h));
}
// The first n (< kVL) elements; the other lanes hold `fill`.
template <class T>
inline vfloat vload_partial(const T* p, int n, float fill) {
  alignas(64) float tmp[kVL];
  for (int i = 0; i < kVL; ++i) tmp[i] = i < n ? ld(p[i]) : fill;
  return vload(tmp);
}
template <class T>
inline void vstore_partial(T* p, vfloat v, int n) {
  alignas(64) float tmp[kVL];
  vstore(tmp, v);
  for (int i = 0; i < n; ++i) p[i] = st<T>(tmp[i]);
}

// Sum over c = 0, kVL, 2 kVL, ... < Cv (Cv a multiple of kVL) of f(c),
// with four independent accumulators so the additions do not wait on each
// other (a single accumulator makes the loop latency bound).
template <class F>
inline vfloat sum_blocks(int Cv, F&& f) {
  vfloat a0 = vbroadcast(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int c = 0;
  for (; c + 4 * kVL <= Cv; c += 4 * kVL) {
    a0 += f(c);
    a1 += f(c + kVL);
    a2 += f(c + 2 * kVL);
    a3 += f(c + 3 * kVL);
  }
  for (; c < Cv; c += kVL) a0 += f(c);
  return (a0 + a1) + (a2 + a3);
}

// The n elements of p as fp32: p itself when T is float, else converted into
// buf (n floats).
inline const float* as_f32(const float* p, int, float*) { return p; }
inline const float* as_f32(const bf16* p, int n, float* buf) {
  int i = 0;
  for (; i + kVL <= n; i += kVL) vstore(buf + i, vload(p + i));
  for (; i < n; ++i) buf[i] = ld(p[i]);
  return buf;
}

// Tree reductions over the lanes: v op (v rotated by half), then by a
// quarter, ...; the result is in every lane.
#if defined(__AVX512F__)
#define MT_LANE_TREE(v, OP)                                                                     \
  v = OP(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)); \
  v = OP(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)); \
  v = OP(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)); \
  v = OP(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
#else
#define MT_LANE_TREE(v, OP)                                                \
  v = OP(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));        \
  v = OP(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));        \
  v = OP(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6));
#endif
inline vfloat vadd(vfloat a, vfloat b) { return a + b; }
inline vfloat vmax(vfloat a, vfloat b) { return a > b ? a : b; }
inline float hsum(vfloat v) {
  MT_LANE_TREE(v, vadd)
  return v[0];
}
inline float hmax(vfloat v) {
  MT_LANE_TREE(v, vmax)
  return v[0];
}
#undef MT_LANE_TREE

// exp_approx on every lane (same constants and result).
inline vfloat vexp(vfloat x) {
  const vfloat lo = vbroadcast(-87.0f), hi = vbroadcast(88.0f);
  vfloat xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const vfloat k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const vfloat r = (xc - k * 0.693145751953125f) - k * 1.428606765330187e-06f;
  vfloat p = vbroadcast(1.0f / 720.0f);
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const vfloat two_k = reinterpret_cast<vfloat>((__builtin_convertvector(k, vint) + 127) << 23);
  return x < lo ? vbroadcast(0.0f) : p * two_k;
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
