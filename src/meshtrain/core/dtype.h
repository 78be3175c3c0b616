// Element types. Activations and working parameters are stored as `float`
// (fp32 mode) or `bf16` (mixed precision); gradients of parameters, master
// weights and optimizer moments are always fp32. Arithmetic is done in fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace meshtrain {

enum class DType : uint8_t { f32, bf16 };

constexpr size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
constexpr std::string_view dtype_name(DType t) { return t == DType::f32 ? "fp32" : "bf16"; }

// bfloat16: the upper 16 bits of an IEEE fp32. Conversion rounds to nearest
// even; NaN stays NaN.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
static_assert(sizeof(bf16) == 2);

// Uniform load/store so kernels can be written once for float and bf16.
inline float to_f32(float x) { return x; }
inline float to_f32(bf16 x) { return bf16::to_float(x.bits); }
template <typename T> inline T from_f32(float x);
template <> inline float from_f32<float>(float x) { return x; }
template <> inline bf16 from_f32<bf16>(float x) { return bf16(x); }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }

}  // namespace meshtrain
