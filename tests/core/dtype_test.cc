// Tests for dtype and device names, and the exact 16-bit float conversions.

#include "varlen/core/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                DType::kInt32,   DType::kInt64,   DType::kBool,     DType::kInt16};

bool IsFloat16NaN(uint16_t bits) { return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0; }
bool IsBFloat16NaN(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0; }

// ---------------------------------------------------------------------------
// Names and parsing

TEST(DTypeNameTest, NamesMatchPyTorch) {
  EXPECT_EQ(DTypeName(DType::kFloat32), "float32");
  EXPECT_EQ(DTypeName(DType::kFloat16), "float16");
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeName(DType::kFloat64), "float64");
  EXPECT_EQ(DTypeName(DType::kInt32), "int32");
  EXPECT_EQ(DTypeName(DType::kInt64), "int64");
  EXPECT_EQ(DTypeName(DType::kBool), "bool");
  EXPECT_EQ(DTypeName(DType::kInt16), "int16");
}

TEST(DTypeNameTest, ParseRoundTripsEveryName) {
  for (DType dtype : kAllDTypes) {
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << DTypeName(dtype) << ": " << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
}

TEST(DTypeNameTest, ParseRejectsUnknownNamesWithTheListOfValidOnes) {
  for (const char* name : {"float", "Float32", "half", "torch.float16", "", "int8", " int32"}) {
    absl::StatusOr<DType> parsed = ParseDType(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(PythonErrorKindOf(parsed.status()), std::nullopt);
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("dtype \"", name,
                           "\" is not one of float32, float16, bfloat16, float64, int16, "
                           "int32, int64, bool"));
  }
}

TEST(DeviceNameTest, NamesAndParsing) {
  EXPECT_EQ(DeviceName(Device::kCpu), "cpu");
  EXPECT_EQ(DeviceName(Device::kCuda), "cuda");
  ASSERT_TRUE(ParseDevice("cpu").ok());
  EXPECT_EQ(*ParseDevice("cpu"), Device::kCpu);
  ASSERT_TRUE(ParseDevice("cuda").ok());
  EXPECT_EQ(*ParseDevice("cuda"), Device::kCuda);
}

TEST(DeviceNameTest, ParseRejectsUnknownDevices) {
  for (const char* name : {"gpu", "CUDA", "cuda:0", "", "meta"}) {
    absl::StatusOr<Device> parsed = ParseDevice(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(PythonErrorKindOf(parsed.status()), std::nullopt);
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("device \"", name, "\" is not one of cpu, cuda"));
  }
}

TEST(DTypeSizeTest, SizesInBytes) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt16), 2u);
}

TEST(DTypeClassTest, FloatingPointAndIntegral) {
  EXPECT_TRUE(IsFloatingPoint(DType::kFloat32));
  EXPECT_TRUE(IsFloatingPoint(DType::kFloat16));
  EXPECT_TRUE(IsFloatingPoint(DType::kBFloat16));
  EXPECT_TRUE(IsFloatingPoint(DType::kFloat64));
  EXPECT_FALSE(IsFloatingPoint(DType::kInt32));
  EXPECT_FALSE(IsFloatingPoint(DType::kInt64));
  EXPECT_FALSE(IsFloatingPoint(DType::kBool));

  EXPECT_FALSE(IsFloatingPoint(DType::kInt16));

  EXPECT_TRUE(IsIntegral(DType::kInt16));
  EXPECT_TRUE(IsIntegral(DType::kInt32));
  EXPECT_TRUE(IsIntegral(DType::kInt64));
  EXPECT_FALSE(IsIntegral(DType::kBool));  // bool is its own class, as in torch
  EXPECT_FALSE(IsIntegral(DType::kFloat32));
  EXPECT_FALSE(IsIntegral(DType::kFloat16));
  EXPECT_FALSE(IsIntegral(DType::kBFloat16));
  EXPECT_FALSE(IsIntegral(DType::kFloat64));
}

// ---------------------------------------------------------------------------
// float16 encodings

TEST(Float16Test, KnownEncodings) {
  EXPECT_EQ(DoubleToFloat16Bits(0.0), 0x0000);
  EXPECT_EQ(DoubleToFloat16Bits(-0.0), 0x8000);
  EXPECT_EQ(DoubleToFloat16Bits(1.0), 0x3c00);
  EXPECT_EQ(DoubleToFloat16Bits(-2.0), 0xc000);
  EXPECT_EQ(DoubleToFloat16Bits(0.5), 0x3800);
  EXPECT_EQ(DoubleToFloat16Bits(1.0 + 1.0 / 1024), 0x3c01);
  EXPECT_EQ(DoubleToFloat16Bits(65504.0), 0x7bff);  // largest finite
  EXPECT_EQ(DoubleToFloat16Bits(-65504.0), 0xfbff);
  EXPECT_EQ(DoubleToFloat16Bits(std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(DoubleToFloat16Bits(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(DoubleToFloat16Bits(-std::ldexp(1.0, -24)), 0x8001);
  EXPECT_EQ(DoubleToFloat16Bits(std::ldexp(1023.0, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(DoubleToFloat16Bits(kInf), 0x7c00);
  EXPECT_EQ(DoubleToFloat16Bits(-kInf), 0xfc00);
}

TEST(Float16Test, OverflowRoundsToInfinityFromTheHalfwayPointUp) {
  // 65520 lies halfway between 65504 (odd mantissa) and 2^16: ties to even
  // means it overflows.
  EXPECT_EQ(DoubleToFloat16Bits(65520.0), 0x7c00);
  EXPECT_EQ(DoubleToFloat16Bits(-65520.0), 0xfc00);
  EXPECT_EQ(DoubleToFloat16Bits(std::nextafter(65520.0, 0.0)), 0x7bff);
  EXPECT_EQ(DoubleToFloat16Bits(65519.0), 0x7bff);
  EXPECT_EQ(DoubleToFloat16Bits(1e10), 0x7c00);
  EXPECT_EQ(DoubleToFloat16Bits(std::numeric_limits<double>::max()), 0x7c00);
  EXPECT_EQ(DoubleToFloat16Bits(-std::numeric_limits<double>::max()), 0xfc00);
}

TEST(Float16Test, UnderflowKeepsTheSign) {
  // 2^-25 is halfway between 0 and the smallest subnormal: ties to even -> 0.
  EXPECT_EQ(DoubleToFloat16Bits(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(DoubleToFloat16Bits(-std::ldexp(1.0, -25)), 0x8000);
  EXPECT_EQ(DoubleToFloat16Bits(std::nextafter(std::ldexp(1.0, -25), 1.0)), 0x0001);
  EXPECT_EQ(DoubleToFloat16Bits(1e-8), 0x0000);
  EXPECT_EQ(DoubleToFloat16Bits(-1e-8), 0x8000);
  EXPECT_EQ(DoubleToFloat16Bits(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(DoubleToFloat16Bits(-std::numeric_limits<double>::denorm_min()), 0x8000);
}

TEST(Float16Test, HalfwayValuesRoundToEven) {
  // Normal range: ulp at 1 is 2^-10.
  EXPECT_EQ(DoubleToFloat16Bits(1.0 + std::ldexp(1.0, -11)), 0x3c00);      // 1 | 1+u: to 1
  EXPECT_EQ(DoubleToFloat16Bits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);  // 1+u | 1+2u
  EXPECT_EQ(DoubleToFloat16Bits(-(1.0 + std::ldexp(1.0, -11))), 0xbc00);
  EXPECT_EQ(DoubleToFloat16Bits(-(1.0 + 3 * std::ldexp(1.0, -11))), 0xbc02);
  // Integers: above 2048 the spacing is 2.
  EXPECT_EQ(DoubleToFloat16Bits(2049.0), DoubleToFloat16Bits(2048.0));
  EXPECT_EQ(DoubleToFloat16Bits(2051.0), DoubleToFloat16Bits(2052.0));
  // Subnormal range: spacing 2^-24.
  EXPECT_EQ(DoubleToFloat16Bits(3 * std::ldexp(1.0, -25)), 0x0002);
  EXPECT_EQ(DoubleToFloat16Bits(5 * std::ldexp(1.0, -25)), 0x0002);
  // Halfway between the largest subnormal and the smallest normal: to even.
  EXPECT_EQ(DoubleToFloat16Bits(std::ldexp(2047.0, -25)), 0x0400);
  // Just off the halfway point goes to the nearer neighbour.
  EXPECT_EQ(DoubleToFloat16Bits(std::nextafter(1.0 + std::ldexp(1.0, -11), 2.0)), 0x3c01);
  EXPECT_EQ(DoubleToFloat16Bits(std::nextafter(1.0 + 3 * std::ldexp(1.0, -11), 0.0)), 0x3c01);
}

TEST(Float16Test, RoundsOnceNotThroughFloat) {
  // x is just above the midpoint of 1 and 1 + 2^-10. Rounded to float first
  // the 2^-40 tail is lost, leaving an exact tie that would go down to 1.0.
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(x)), 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(DoubleToFloat16Bits(x), 0x3c01);
  EXPECT_EQ(RoundToDType(x, DType::kFloat16), 1.0 + std::ldexp(1.0, -10));
  // The mirror case just below a midpoint must round down, not up to even.
  const double y = 1.0 + 3 * std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(y)), 1.0 + 3 * std::ldexp(1.0, -11));
  EXPECT_EQ(DoubleToFloat16Bits(y), 0x3c01);
}

TEST(Float16Test, NaN) {
  const uint16_t bits = DoubleToFloat16Bits(kNaN);
  EXPECT_TRUE(IsFloat16NaN(bits)) << std::hex << bits;
  EXPECT_EQ(bits, 0x7e00);  // the canonical quiet NaN
  EXPECT_TRUE(IsFloat16NaN(DoubleToFloat16Bits(-kNaN)));
  EXPECT_TRUE(std::isnan(Float16BitsToDouble(0x7e00)));
  EXPECT_TRUE(std::isnan(Float16BitsToDouble(0x7c01)));  // signalling pattern
  EXPECT_TRUE(std::isnan(Float16BitsToDouble(0xffff)));
}

TEST(Float16Test, KnownDecodings) {
  EXPECT_EQ(Float16BitsToDouble(0x3c00), 1.0);
  EXPECT_EQ(Float16BitsToDouble(0xc000), -2.0);
  EXPECT_EQ(Float16BitsToDouble(0x7bff), 65504.0);
  EXPECT_EQ(Float16BitsToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(Float16BitsToDouble(0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(Float16BitsToDouble(0x7c00), kInf);
  EXPECT_EQ(Float16BitsToDouble(0xfc00), -kInf);
  EXPECT_EQ(Float16BitsToDouble(0x3555), 0.333251953125);
  const double negative_zero = Float16BitsToDouble(0x8000);
  EXPECT_EQ(negative_zero, 0.0);
  EXPECT_TRUE(std::signbit(negative_zero));
}

TEST(Float16Test, ExhaustiveRoundTripOfEveryBitPattern) {
  int nans = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const double value = Float16BitsToDouble(bits);
    if (IsFloat16NaN(bits)) {
      ++nans;
      ASSERT_TRUE(std::isnan(value)) << std::hex << b;
      continue;
    }
    ASSERT_FALSE(std::isnan(value)) << std::hex << b;
    ASSERT_EQ(DoubleToFloat16Bits(value), bits) << std::hex << b << " decodes to " << value;
    ASSERT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << b;
    if (std::isfinite(value)) {
      ASSERT_EQ(RoundToDType(value, DType::kFloat16), value) << std::hex << b;
    }
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST(Float16Test, PositivePatternsDecodeInIncreasingOrder) {
  for (uint32_t b = 1; b <= 0x7c00; ++b) {
    ASSERT_LT(Float16BitsToDouble(static_cast<uint16_t>(b - 1)),
              Float16BitsToDouble(static_cast<uint16_t>(b)))
        << std::hex << b;
  }
}

// ---------------------------------------------------------------------------
// bfloat16 encodings

TEST(BFloat16Test, KnownEncodings) {
  EXPECT_EQ(DoubleToBFloat16Bits(0.0), 0x0000);
  EXPECT_EQ(DoubleToBFloat16Bits(-0.0), 0x8000);
  EXPECT_EQ(DoubleToBFloat16Bits(1.0), 0x3f80);
  EXPECT_EQ(DoubleToBFloat16Bits(-2.0), 0xc000);
  EXPECT_EQ(DoubleToBFloat16Bits(1.0 + 1.0 / 128), 0x3f81);
  EXPECT_EQ(DoubleToBFloat16Bits(kInf), 0x7f80);
  EXPECT_EQ(DoubleToBFloat16Bits(-kInf), 0xff80);
  EXPECT_EQ(DoubleToBFloat16Bits(std::ldexp(1.0, -126)), 0x0080);   // smallest normal
  EXPECT_EQ(DoubleToBFloat16Bits(std::ldexp(1.0, -133)), 0x0001);   // smallest subnormal
  EXPECT_EQ(DoubleToBFloat16Bits(std::ldexp(255.0, 120)), 0x7f7f);  // largest finite
  // 65504 = 0b1111111111100000 needs 11 bits; bfloat16 keeps 8 and rounds up.
  EXPECT_EQ(DoubleToBFloat16Bits(65504.0), 0x4780);
  EXPECT_EQ(DoubleToBFloat16Bits(65520.0), 0x4780);
}

TEST(BFloat16Test, OverflowAndUnderflow) {
  // Halfway between the largest finite value (odd mantissa) and 2^128.
  EXPECT_EQ(DoubleToBFloat16Bits(std::ldexp(511.0, 119)), 0x7f80);
  EXPECT_EQ(DoubleToBFloat16Bits(std::nextafter(std::ldexp(511.0, 119), 0.0)), 0x7f7f);
  EXPECT_EQ(DoubleToBFloat16Bits(static_cast<double>(std::numeric_limits<float>::max())), 0x7f80);
  EXPECT_EQ(DoubleToBFloat16Bits(1e300), 0x7f80);
  EXPECT_EQ(DoubleToBFloat16Bits(-1e300), 0xff80);
  EXPECT_EQ(DoubleToBFloat16Bits(std::ldexp(1.0, -134)), 0x0000);  // tie to even zero
  EXPECT_EQ(DoubleToBFloat16Bits(-std::ldexp(1.0, -134)), 0x8000);
  EXPECT_EQ(DoubleToBFloat16Bits(3 * std::ldexp(1.0, -134)), 0x0002);
  EXPECT_EQ(DoubleToBFloat16Bits(1e-300), 0x0000);
  EXPECT_EQ(DoubleToBFloat16Bits(-1e-300), 0x8000);
}

TEST(BFloat16Test, HalfwayValuesRoundToEven) {
  EXPECT_EQ(DoubleToBFloat16Bits(1.0 + std::ldexp(1.0, -8)), 0x3f80);
  EXPECT_EQ(DoubleToBFloat16Bits(1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82);
  EXPECT_EQ(DoubleToBFloat16Bits(-(1.0 + std::ldexp(1.0, -8))), 0xbf80);
  EXPECT_EQ(DoubleToBFloat16Bits(-(1.0 + 3 * std::ldexp(1.0, -8))), 0xbf82);
  EXPECT_EQ(DoubleToBFloat16Bits(257.0), DoubleToBFloat16Bits(256.0));
  EXPECT_EQ(DoubleToBFloat16Bits(259.0), DoubleToBFloat16Bits(260.0));
  EXPECT_EQ(DoubleToBFloat16Bits(std::nextafter(1.0 + std::ldexp(1.0, -8), 2.0)), 0x3f81);
}

TEST(BFloat16Test, RoundsOnceNotThroughFloat) {
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(x)), 1.0 + std::ldexp(1.0, -8));
  EXPECT_EQ(DoubleToBFloat16Bits(x), 0x3f81);
  EXPECT_EQ(RoundToDType(x, DType::kBFloat16), 1.0 + std::ldexp(1.0, -7));
  const double y = 1.0 + 3 * std::ldexp(1.0, -8) - std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(y)), 1.0 + 3 * std::ldexp(1.0, -8));
  EXPECT_EQ(DoubleToBFloat16Bits(y), 0x3f81);
}

TEST(BFloat16Test, NaN) {
  const uint16_t bits = DoubleToBFloat16Bits(kNaN);
  EXPECT_TRUE(IsBFloat16NaN(bits)) << std::hex << bits;
  EXPECT_EQ(bits, 0x7fc0);
  EXPECT_TRUE(IsBFloat16NaN(DoubleToBFloat16Bits(-kNaN)));
  EXPECT_TRUE(std::isnan(BFloat16BitsToDouble(0x7fc0)));
  EXPECT_TRUE(std::isnan(BFloat16BitsToDouble(0x7f81)));
  EXPECT_TRUE(std::isnan(BFloat16BitsToDouble(0xffff)));
}

TEST(BFloat16Test, KnownDecodings) {
  EXPECT_EQ(BFloat16BitsToDouble(0x3f80), 1.0);
  EXPECT_EQ(BFloat16BitsToDouble(0xc000), -2.0);
  EXPECT_EQ(BFloat16BitsToDouble(0x7f7f), std::ldexp(255.0, 120));
  EXPECT_EQ(BFloat16BitsToDouble(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(BFloat16BitsToDouble(0x7f80), kInf);
  EXPECT_EQ(BFloat16BitsToDouble(0xff80), -kInf);
  EXPECT_EQ(BFloat16BitsToDouble(0x3dcd), 0.10009765625);
  const double negative_zero = BFloat16BitsToDouble(0x8000);
  EXPECT_EQ(negative_zero, 0.0);
  EXPECT_TRUE(std::signbit(negative_zero));
}

TEST(BFloat16Test, ExhaustiveRoundTripOfEveryBitPattern) {
  int nans = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const double value = BFloat16BitsToDouble(bits);
    if (IsBFloat16NaN(bits)) {
      ++nans;
      ASSERT_TRUE(std::isnan(value)) << std::hex << b;
      continue;
    }
    ASSERT_FALSE(std::isnan(value)) << std::hex << b;
    ASSERT_EQ(DoubleToBFloat16Bits(value), bits) << std::hex << b << " decodes to " << value;
    ASSERT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << b;
    if (std::isfinite(value)) {
      ASSERT_EQ(RoundToDType(value, DType::kBFloat16), value) << std::hex << b;
    }
  }
  EXPECT_EQ(nans, 2 * 127);
}

TEST(BFloat16Test, PositivePatternsDecodeInIncreasingOrder) {
  for (uint32_t b = 1; b <= 0x7f80; ++b) {
    ASSERT_LT(BFloat16BitsToDouble(static_cast<uint16_t>(b - 1)),
              BFloat16BitsToDouble(static_cast<uint16_t>(b)))
        << std::hex << b;
  }
}

// ---------------------------------------------------------------------------
// Randomised comparison with a brute-force oracle: the nearest representable
// value found by search over the table of all finite values, ties to the
// even encoding, and overflow from the midpoint above the largest finite.

struct Format16 {
  double (*decode)(uint16_t);
  uint16_t (*encode)(double);
  uint16_t max_finite_bits;
  uint16_t inf_bits;
};

uint16_t OracleEncode(const Format16& format, const std::vector<double>& table, double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const double max_finite = table.back();
  const double ulp_at_max = max_finite - table[table.size() - 2];
  if (a >= max_finite + ulp_at_max / 2) return static_cast<uint16_t>(sign | format.inf_bits);
  auto hi = std::lower_bound(table.begin(), table.end(), a);
  if (hi == table.end()) return static_cast<uint16_t>(sign | format.max_finite_bits);
  if (*hi == a) return static_cast<uint16_t>(sign | (hi - table.begin()));
  auto lo = hi - 1;
  // Neighbours within a factor of two: both differences are exact.
  const double below = a - *lo;
  const double above = *hi - a;
  size_t index;
  if (below < above) {
    index = static_cast<size_t>(lo - table.begin());
  } else if (above < below) {
    index = static_cast<size_t>(hi - table.begin());
  } else {
    index = static_cast<size_t>(((lo - table.begin()) % 2 == 0 ? lo : hi) - table.begin());
  }
  return static_cast<uint16_t>(sign | index);
}

void CompareWithOracle(const Format16& format, int min_exponent, int max_exponent) {
  std::vector<double> table;  // every finite non-negative value, by encoding
  for (uint32_t b = 0; b <= format.max_finite_bits; ++b) {
    table.push_back(format.decode(static_cast<uint16_t>(b)));
  }
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<size_t> pick(0, table.size() - 2);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int i = 0; i < 200000; ++i) {
    double x;
    switch (i % 3) {
      case 0:  // an arbitrary double in range
        x = std::ldexp(mantissa(rng), exponent(rng));
        break;
      case 1: {  // an exact midpoint between neighbours
        const size_t k = pick(rng);
        x = (table[k] + table[k + 1]) / 2;
        break;
      }
      default: {  // one double-ulp off a midpoint
        const size_t k = pick(rng);
        const double mid = (table[k] + table[k + 1]) / 2;
        x = std::nextafter(mid, coin(rng) ? kInf : 0.0);
        break;
      }
    }
    if (coin(rng)) x = -x;
    const uint16_t expected = OracleEncode(format, table, x);
    ASSERT_EQ(format.encode(x), expected) << "x = " << x << " (" << std::hexfloat << x << ")";
  }
}

TEST(Float16Test, MatchesBruteForceNearestOnRandomInputs) {
  CompareWithOracle({&Float16BitsToDouble, &DoubleToFloat16Bits, 0x7bff, 0x7c00}, -28, 17);
}

TEST(BFloat16Test, MatchesBruteForceNearestOnRandomInputs) {
  CompareWithOracle({&BFloat16BitsToDouble, &DoubleToBFloat16Bits, 0x7f7f, 0x7f80}, -137, 129);
}

// ---------------------------------------------------------------------------
// RoundToDType and UnitRoundoff

TEST(RoundToDTypeTest, Float64IsTheIdentity) {
  for (double x : {0.1, -1.0 / 3.0, 1e300, 5e-324, -0.0}) {
    EXPECT_EQ(RoundToDType(x, DType::kFloat64), x);
  }
  EXPECT_TRUE(std::signbit(RoundToDType(-0.0, DType::kFloat64)));
  EXPECT_TRUE(std::isnan(RoundToDType(kNaN, DType::kFloat64)));
  EXPECT_EQ(RoundToDType(kInf, DType::kFloat64), kInf);
}

TEST(RoundToDTypeTest, Float32RoundsToNearestFloat) {
  EXPECT_EQ(RoundToDType(0.1, DType::kFloat32), 0.100000001490116119384765625);
  EXPECT_EQ(RoundToDType(1.0 + std::ldexp(1.0, -24), DType::kFloat32), 1.0);  // tie to even
  EXPECT_EQ(RoundToDType(1.0 + 3 * std::ldexp(1.0, -24), DType::kFloat32),
            1.0 + std::ldexp(1.0, -22));
  EXPECT_EQ(RoundToDType(16777217.0, DType::kFloat32), 16777216.0);
  EXPECT_EQ(RoundToDType(1e39, DType::kFloat32), kInf);
  EXPECT_EQ(RoundToDType(-1e39, DType::kFloat32), -kInf);
  EXPECT_EQ(RoundToDType(1e-50, DType::kFloat32), 0.0);
  EXPECT_TRUE(std::signbit(RoundToDType(-0.0, DType::kFloat32)));
  EXPECT_TRUE(std::isnan(RoundToDType(kNaN, DType::kFloat32)));
}

TEST(RoundToDTypeTest, Float16) {
  EXPECT_EQ(RoundToDType(0.1, DType::kFloat16), 0.0999755859375);
  EXPECT_EQ(RoundToDType(2049.0, DType::kFloat16), 2048.0);
  EXPECT_EQ(RoundToDType(65519.0, DType::kFloat16), 65504.0);
  EXPECT_EQ(RoundToDType(65520.0, DType::kFloat16), kInf);
  EXPECT_EQ(RoundToDType(-1e-9, DType::kFloat16), 0.0);
  EXPECT_TRUE(std::signbit(RoundToDType(-1e-9, DType::kFloat16)));
  EXPECT_TRUE(std::isnan(RoundToDType(kNaN, DType::kFloat16)));
  EXPECT_EQ(RoundToDType(-kInf, DType::kFloat16), -kInf);
}

TEST(RoundToDTypeTest, BFloat16) {
  EXPECT_EQ(RoundToDType(0.1, DType::kBFloat16), 0.10009765625);
  EXPECT_EQ(RoundToDType(257.0, DType::kBFloat16), 256.0);
  EXPECT_EQ(RoundToDType(65504.0, DType::kBFloat16), 65536.0);
  EXPECT_EQ(RoundToDType(1e39, DType::kBFloat16), kInf);
  EXPECT_TRUE(std::signbit(RoundToDType(-1e-300, DType::kBFloat16)));
  EXPECT_TRUE(std::isnan(RoundToDType(kNaN, DType::kBFloat16)));
  EXPECT_EQ(RoundToDType(-kInf, DType::kBFloat16), -kInf);
}

TEST(RoundToDTypeTest, IsIdempotentAndWithinUnitRoundoff) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-1000.0, 1000.0);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (int i = 0; i < 2000; ++i) {
      const double x = dist(rng);
      const double r = RoundToDType(x, dtype);
      ASSERT_EQ(RoundToDType(r, dtype), r) << DTypeName(dtype) << " x=" << x;
      // Normal range: relative error at most the unit roundoff.
      if (std::fabs(x) > 1e-3) {
        ASSERT_LE(std::fabs(r - x), UnitRoundoff(dtype) * std::fabs(x))
            << DTypeName(dtype) << " x=" << x;
      }
    }
  }
}

TEST(UnitRoundoffTest, HalfTheMachineEpsilon) {
  EXPECT_EQ(UnitRoundoff(DType::kFloat64), std::ldexp(1.0, -53));
  EXPECT_EQ(UnitRoundoff(DType::kFloat32), std::ldexp(1.0, -24));
  EXPECT_EQ(UnitRoundoff(DType::kFloat16), std::ldexp(1.0, -11));
  EXPECT_EQ(UnitRoundoff(DType::kBFloat16), std::ldexp(1.0, -8));
  EXPECT_EQ(UnitRoundoff(DType::kFloat64), std::numeric_limits<double>::epsilon() / 2);
  EXPECT_EQ(UnitRoundoff(DType::kFloat32),
            static_cast<double>(std::numeric_limits<float>::epsilon()) / 2);
  // 1 + u is the first tie above 1: it rounds back down to 1.
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    EXPECT_EQ(RoundToDType(1.0 + UnitRoundoff(dtype), dtype), 1.0) << DTypeName(dtype);
    EXPECT_GT(RoundToDType(std::nextafter(1.0 + UnitRoundoff(dtype), 2.0), dtype), 1.0)
        << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace varlen
