// File: varlen/core/dtype.h
// -----------------------------------------------------------------------------
//
// Element types and devices, named as PyTorch names them ("bfloat16", "cuda"),
// and exact conversions between float64 and the 16-bit float formats.
//
// The 16-bit conversions round a double straight to the target format
// (round to nearest, ties to even, with subnormals and overflow to infinity).
// Going through float first would round twice, and the numerical judge
// relies on "the input rounded to the dtype" meaning exactly that.

#ifndef VARLEN_CORE_DTYPE_H_
#define VARLEN_CORE_DTYPE_H_

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varlen {

enum class DType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt32,
  kInt64,
  kBool,
  kInt16,
};

// "float32", "float16", "bfloat16", "float64", "int32", "int64", "bool", "int16".
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);
// torch's C++ name of the dtype (c10::ScalarType), as ATen's checks print
// it: "Float", "Half", "BFloat16", "Double", "Int", "Long", "Bool", "Short".
absl::string_view TorchScalarTypeName(DType dtype);
size_t DTypeSize(DType dtype);
bool IsFloatingPoint(DType dtype);
bool IsIntegral(DType dtype);  // int16, int32, int64 (not bool)

// Where a tensor lives. On a build without CUDA, "cuda" tensors are kept in
// host memory; every host read of one still counts as a host sync (see
// device_ledger.h), so the contract's sync behaviour is testable anywhere.
enum class Device : uint8_t { kCpu, kCuda };

absl::string_view DeviceName(Device device);  // "cpu", "cuda"
absl::StatusOr<Device> ParseDevice(absl::string_view name);

// Bit-exact float16 / bfloat16 encodings of a double, rounded once to
// nearest, ties to even; overflow gives infinity, NaN a quiet NaN. Inline:
// every element a case synthesizes or a kernel model rounds goes through them.
// (Defined below, after their helper.)

namespace dtype_internal {

// The encoding of |x| (not NaN) in a 16-bit format with `kMantissaBits`
// stored significand bits and exponent bias `kBias`, from x's own bits:
// adding the rounding increment to the double's bits carries into its
// exponent when the significand rounds up, and past the largest finite
// value lands on the infinity encoding.
template <int kMantissaBits, int kBias>
inline uint16_t EncodeMagnitude(double x) {
  constexpr int kDropped = 52 - kMantissaBits;
  constexpr uint64_t kInfinity = uint64_t{2 * kBias + 1} << kMantissaBits;
  const uint64_t magnitude = std::bit_cast<uint64_t>(x) & ~(uint64_t{1} << 63);
  const int exponent = static_cast<int>(magnitude >> 52) - 1023;
  if (exponent > kBias) return static_cast<uint16_t>(kInfinity);
  if (exponent >= 1 - kBias) {  // a normal number of the format
    const uint64_t rounded =
        magnitude + ((uint64_t{1} << (kDropped - 1)) - 1) + ((magnitude >> kDropped) & 1);
    const uint64_t encoded = (rounded >> kDropped) - (uint64_t{1023 - kBias} << kMantissaBits);
    return static_cast<uint16_t>(encoded < kInfinity ? encoded : kInfinity);
  }
  // Subnormal (or zero): |x| in units of the smallest subnormal, rounded to an
  // integer by adding 2^52 (ties to even); rounding up to 2^kMantissaBits
  // gives the smallest normal's encoding. The scaling by 2^k is exact.
  const double units = std::bit_cast<double>(magnitude) *
                       std::bit_cast<double>(uint64_t{1023 + kBias - 1 + kMantissaBits} << 52);
  return static_cast<uint16_t>((units + 0x1p52) - 0x1p52);
}

}  // namespace dtype_internal

inline uint16_t DoubleToFloat16Bits(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (x != x) return static_cast<uint16_t>(sign | 0x7e00);
  return static_cast<uint16_t>(sign | dtype_internal::EncodeMagnitude<10, 15>(x));
}

inline uint16_t DoubleToBFloat16Bits(double x) {
  if (x != x) return std::signbit(x) ? 0xffc0 : 0x7fc0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  return static_cast<uint16_t>(sign | dtype_internal::EncodeMagnitude<7, 127>(x));
}

inline double Float16BitsToDouble(uint16_t bits) {
  const uint64_t magnitude = bits & 0x7fffu;
  double value;
  if (magnitude >= 0x7c00u) {
    if (magnitude > 0x7c00u) return std::numeric_limits<double>::quiet_NaN();
    value = std::numeric_limits<double>::infinity();
  } else if (magnitude >= 0x0400u) {  // normal: re-biased exponent, the same significand bits
    value = std::bit_cast<double>((magnitude + (uint64_t{1023 - 15} << 10)) << 42);
  } else {  // subnormal: magnitude x 2^-24
    value = static_cast<double>(magnitude) * 0x1p-24;
  }
  return (bits & 0x8000u) ? -value : value;
}

inline double BFloat16BitsToDouble(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// `x` rounded to the nearest value representable in `dtype` (a floating
// type); float64 returns `x` unchanged.
double RoundToDType(double x, DType dtype);

// Unit roundoff (half the machine epsilon) of a floating dtype.
double UnitRoundoff(DType dtype);

// `v` narrowed to 32 bits, two's complement: what an int32 tensor, a C++
// `int` parameter and int32 kernel arithmetic keep of it.
inline int32_t WrapInt32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
inline int16_t WrapInt16(int64_t v) { return static_cast<int16_t>(static_cast<uint16_t>(v)); }

}  // namespace varlen

#endif  // VARLEN_CORE_DTYPE_H_
