#include "varlen/core/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace varlen {
namespace {

struct DTypeInfo {
  DType dtype;
  absl::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 7> kDTypes = {{
    {DType::kFloat32, "float32", 4},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat64, "float64", 8},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kBool, "bool", 1},
}};

const DTypeInfo& Info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

// 2^k, exactly, for k in double's normal exponent range.
constexpr double Pow2(int k) {
  return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52);
}

// A binary floating-point format: `precision` significand bits (with the
// implicit one), exponents of normal numbers in [min_exp, max_exp].
struct Format {
  int precision;
  int min_exp;
  int max_exp;
  double max_finite() const { return (2.0 - Pow2(1 - precision)) * Pow2(max_exp); }
};

constexpr Format kHalf = {11, -14, 15};
constexpr Format kBFloat = {8, -126, 127};

// Rounds `x` to `format` once, ties to even; overflow gives infinity. The
// scalings by powers of two are exact, and built from bits: this runs on
// every element a case synthesizes or a kernel model rounds.
double RoundToFormat(double x, Format format) {
  if (!std::isfinite(x) || x == 0.0) return x;
  // floor(log2 |x|); double subnormals read as -1023, below every format.
  const int exponent = static_cast<int>((std::bit_cast<uint64_t>(x) >> 52) & 0x7ff) - 1023;
  const int quantum = std::max(exponent, format.min_exp) - format.precision + 1;
  const double rounded = std::nearbyint(x * Pow2(-quantum)) * Pow2(quantum);
  if (std::fabs(rounded) > format.max_finite()) {
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  }
  return rounded;
}

}  // namespace

absl::string_view DTypeName(DType dtype) { return Info(dtype).name; }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype \"", name,
                   "\" is not one of float32, float16, bfloat16, float64, int32, int64, bool"));
}

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat64;
}

bool IsIntegral(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

absl::string_view DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

absl::StatusOr<Device> ParseDevice(absl::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return absl::InvalidArgumentError(absl::StrCat("device \"", name, "\" is not one of cpu, cuda"));
}

uint16_t DoubleToFloat16Bits(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7e00);
  const double a = std::fabs(RoundToFormat(x, kHalf));
  if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7c00);
  if (a == 0.0) return sign;
  if (a < Pow2(kHalf.min_exp)) {  // subnormal: a = mantissa * 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(a * Pow2(24)));
  }
  // a is a normal half: its double exponent re-biased, the top 10 bits of
  // its double mantissa (the rest are zero).
  const uint64_t bits = std::bit_cast<uint64_t>(a);
  const uint16_t biased = static_cast<uint16_t>(static_cast<int>(bits >> 52) - 1023 + 15);
  const uint16_t mantissa = static_cast<uint16_t>((bits >> 42) & 0x3ff);
  return static_cast<uint16_t>(sign | (biased << 10) | mantissa);
}

uint16_t DoubleToBFloat16Bits(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xffc0 : 0x7fc0;
  // The rounded value is exactly representable in float32, whose top 16 bits
  // are the bfloat16 encoding.
  const float f = static_cast<float>(RoundToFormat(x, kBFloat));
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

double Float16BitsToDouble(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int biased = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (biased == 0x1f) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (biased == 0) return sign * mantissa * Pow2(-24);
  return sign * (1024 + mantissa) * Pow2(biased - 15 - 10);
}

double BFloat16BitsToDouble(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

double RoundToDType(double x, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<float>(x);
    case DType::kFloat16:
      return Float16BitsToDouble(DoubleToFloat16Bits(x));
    case DType::kBFloat16:
      return BFloat16BitsToDouble(DoubleToBFloat16Bits(x));
    default:
      return x;
  }
}

double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return Pow2(-24);
    case DType::kFloat16:
      return Pow2(-11);
    case DType::kBFloat16:
      return Pow2(-8);
    default:
      return Pow2(-53);
  }
}

}  // namespace varlen
