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

#include <cstddef>
#include <cstdint>

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
};

// "float32", "float16", "bfloat16", "float64", "int32", "int64", "bool".
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);
size_t DTypeSize(DType dtype);
bool IsFloatingPoint(DType dtype);
bool IsIntegral(DType dtype);  // int32, int64 (not bool)

// Where a tensor lives. On a build without CUDA, "cuda" tensors are kept in
// host memory; every host read of one still counts as a host sync (see
// device_ledger.h), so the contract's sync behaviour is testable anywhere.
enum class Device : uint8_t { kCpu, kCuda };

absl::string_view DeviceName(Device device);  // "cpu", "cuda"
absl::StatusOr<Device> ParseDevice(absl::string_view name);

// Bit-exact float16 / bfloat16 encodings of a double, rounded once.
uint16_t DoubleToFloat16Bits(double x);
uint16_t DoubleToBFloat16Bits(double x);
double Float16BitsToDouble(uint16_t bits);
double BFloat16BitsToDouble(uint16_t bits);

// `x` rounded to the nearest value representable in `dtype` (a floating
// type); float64 returns `x` unchanged.
double RoundToDType(double x, DType dtype);

// Unit roundoff (half the machine epsilon) of a floating dtype.
double UnitRoundoff(DType dtype);

// `v` narrowed to 32 bits, two's complement: what an int32 tensor, a C++
// `int` parameter and int32 kernel arithmetic keep of it.
inline int32_t WrapInt32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

}  // namespace varlen

#endif  // VARLEN_CORE_DTYPE_H_
