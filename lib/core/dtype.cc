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

constexpr std::array<DTypeInfo, 8> kDTypes = {{
    {DType::kFloat32, "float32", 4},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat64, "float64", 8},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kBool, "bool", 1},
    {DType::kInt16, "int16", 2},
}};

const DTypeInfo& Info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

// 2^k, exactly, for k in double's normal exponent range.
constexpr double Pow2(int k) {
  return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52);
}

}  // namespace

absl::string_view DTypeName(DType dtype) { return Info(dtype).name; }

absl::string_view TorchScalarTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "Float";
    case DType::kFloat16:
      return "Half";
    case DType::kBFloat16:
      return "BFloat16";
    case DType::kFloat64:
      return "Double";
    case DType::kInt32:
      return "Int";
    case DType::kInt64:
      return "Long";
    case DType::kBool:
      return "Bool";
    case DType::kInt16:
      return "Short";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype \"", name,
      "\" is not one of float32, float16, bfloat16, float64, int16, int32, int64, bool"));
}

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat64;
}

bool IsIntegral(DType dtype) {
  return dtype == DType::kInt16 || dtype == DType::kInt32 || dtype == DType::kInt64;
}

absl::string_view DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

absl::StatusOr<Device> ParseDevice(absl::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return absl::InvalidArgumentError(absl::StrCat("device \"", name, "\" is not one of cpu, cuda"));
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
