#include "varlen/core/dtype.h"

#include <array>
#include <cmath>
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

// A binary floating-point format: `precision` significand bits (with the
// implicit one), exponents of normal numbers in [min_exp, max_exp].
struct Format {
  int precision;
  int min_exp;
  int max_exp;
};

constexpr Format kHalf = {11, -14, 15};
constexpr Format kBFloat = {8, -126, 127};

// Rounds `x` to `format` once, ties to even; overflow gives infinity.
double RoundToFormat(double x, Format format) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int exponent;  // x = m * 2^exponent, 0.5 <= |m| < 1
  std::frexp(x, &exponent);
  const int leading = std::max(exponent - 1, format.min_exp);
  const double quantum = std::ldexp(1.0, leading - format.precision + 1);
  const double rounded = std::nearbyint(x / quantum) * quantum;  // exact scaling
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - format.precision), format.max_exp);
  if (std::fabs(rounded) > max_finite) {
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
  const double r = RoundToFormat(x, kHalf);
  const double a = std::fabs(r);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7c00);
  if (a == 0.0) return sign;
  if (a < std::ldexp(1.0, kHalf.min_exp)) {  // subnormal: a = mantissa * 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(a, 24)));
  }
  int exponent;
  const double m = std::frexp(a, &exponent);  // a = m * 2^exponent
  const uint16_t biased = static_cast<uint16_t>(exponent - 1 + 15);
  const uint16_t mantissa = static_cast<uint16_t>(std::ldexp(m * 2.0 - 1.0, 10));
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
  if (biased == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, biased - 15 - 10);
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
      return std::ldexp(1.0, -24);
    case DType::kFloat16:
      return std::ldexp(1.0, -11);
    case DType::kBFloat16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -53);
  }
}

}  // namespace varlen
