// File: varlen/backend/elements.h
// -----------------------------------------------------------------------------
//
// Element access for host kernels (the oracle, cpu_flash), and the one place
// where a runtime dtype becomes a C++ element type.
//
// Half-precision values are stored as their 16-bit encodings; Float16 and
// BFloat16 are tag types over those bits so templates can tell them apart.
// VARLEN_DISPATCH_FLOAT_TYPES(dtype, T, body) runs `body` with `T` bound to
// the element type of a floating dtype (float, Float16, BFloat16, double).

#ifndef VARLEN_BACKEND_ELEMENTS_H_
#define VARLEN_BACKEND_ELEMENTS_H_

#include <cstdint>
#include <cstring>

#include "varlen/core/dtype.h"

namespace varlen::kernels {

struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline double ToDouble(float x) { return x; }
inline double ToDouble(double x) { return x; }
inline double ToDouble(Float16 x) { return Float16BitsToDouble(x.bits); }

template <typename T>
T FromDouble(double x);
template <>
inline float FromDouble<float>(double x) {
  return static_cast<float>(x);
}
template <>
inline double FromDouble<double>(double x) {
  return x;
}
template <>
inline Float16 FromDouble<Float16>(double x) {
  return {DoubleToFloat16Bits(x)};
}
template <>
inline BFloat16 FromDouble<BFloat16>(double x) {
  return {DoubleToBFloat16Bits(x)};
}

template <typename T>
double LoadAsDouble(const void* base, int64_t index) {
  return ToDouble(static_cast<const T*>(base)[index]);
}

// Single-precision paths for float32-accumulating kernels: a bfloat16 is the
// top half of a float32, so its conversions are bit operations.
inline float ToFloat(float x) { return x; }
inline float ToFloat(double x) { return static_cast<float>(x); }
inline float ToFloat(Float16 x) { return static_cast<float>(Float16BitsToDouble(x.bits)); }
inline float ToFloat(BFloat16 x) {
  const uint32_t bits = uint32_t{x.bits} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline double ToDouble(BFloat16 x) { return ToFloat(x); }

template <typename T>
float LoadAsFloat(const void* base, int64_t index) {
  return ToFloat(static_cast<const T*>(base)[index]);
}

// x rounded to T and back (round to nearest even), as storing a float32
// value into a T register does.
template <typename T>
float RoundFloatTo(float x) {
  return static_cast<float>(ToDouble(FromDouble<T>(x)));
}
template <>
inline float RoundFloatTo<float>(float x) {
  return x;
}
// float16: the same bits as the conversion through double, from float's
// own bits (this runs once per probability in cpu_flash and the emulation).
template <>
inline float RoundFloatTo<Float16>(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t sign = bits & 0x80000000u;
  uint32_t magnitude = bits ^ sign;
  if (magnitude >= 0x7f800000u) return x;  // infinities and NaN stay
  if (magnitude >= 0x477ff000u) {          // from 65520 on: infinity (65520 ties to it)
    magnitude = 0x7f800000u;
  } else if (magnitude < 0x38800000u) {
    // Below 2^-14, float16's step is 2^-24: adding 0.5 leaves exactly that
    // step in float's significand, so the sum rounds to it (nearest even).
    float small;
    std::memcpy(&small, &magnitude, sizeof small);
    small = (small + 0.5f) - 0.5f;
    std::memcpy(&magnitude, &small, sizeof magnitude);
  } else {  // normal: 23 fraction bits to 10, nearest even
    magnitude += 0xfffu + ((magnitude >> 13) & 1u);
    magnitude &= 0xffffe000u;
  }
  bits = magnitude | sign;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
template <>
inline float RoundFloatTo<BFloat16>(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return x;  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

template <typename T>
void StoreFromDouble(void* base, int64_t index, double value) {
  static_cast<T*>(base)[index] = FromDouble<T>(value);
}

}  // namespace varlen::kernels

// REQUIRES: IsFloatingPoint(dtype).
#define VARLEN_DISPATCH_FLOAT_TYPES(dtype, T, ...) \
  [&] {                                            \
    switch (dtype) {                               \
      case ::varlen::DType::kFloat32: {            \
        using T = float;                           \
        return __VA_ARGS__();                      \
      }                                            \
      case ::varlen::DType::kFloat16: {            \
        using T = ::varlen::kernels::Float16;      \
        return __VA_ARGS__();                      \
      }                                            \
      case ::varlen::DType::kBFloat16: {           \
        using T = ::varlen::kernels::BFloat16;     \
        return __VA_ARGS__();                      \
      }                                            \
      default: {                                   \
        using T = double;                          \
        return __VA_ARGS__();                      \
      }                                            \
    }                                              \
  }()

#endif  // VARLEN_BACKEND_ELEMENTS_H_
