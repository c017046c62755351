// Element access for host kernels, and the one place where a runtime dtype
// becomes a C++ element type.
//
// Half-precision values are stored as their 16-bit encodings; Float16 and
// BFloat16 are tag types over those bits so templates can tell them apart.
// VARLEN_DISPATCH_FLOAT_TYPES(dtype, T, body) runs `body` with `T` bound to
// the element type of a floating dtype (float, Float16, BFloat16, double).

#ifndef VARLEN_KERNELS_COMMON_ELEMENTS_H_
#define VARLEN_KERNELS_COMMON_ELEMENTS_H_

#include <cstdint>

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
inline double ToDouble(BFloat16 x) { return BFloat16BitsToDouble(x.bits); }

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

#endif  // VARLEN_KERNELS_COMMON_ELEMENTS_H_
