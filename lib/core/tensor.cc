#include "varlen/core/tensor.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/core/device_ledger.h"

namespace varlen {
namespace {

// A float truncated to an integer dtype the way the tensor's device does it,
// which is what torch's casts produce there (a plain static_cast of NaN or an
// out-of-range value would be undefined behaviour):
//   cpu (x86 cvttsd2si): NaN and out-of-range values give the "integer
//     indefinite" value, the dtype's minimum;
//   cuda (PTX cvt.rzi): NaN gives 0, out-of-range values saturate.
int64_t FloatToInt(double value, DType dtype, Device device) {
  const int bits = static_cast<int>(DTypeSize(dtype)) * 8;  // 16, 32 or 64
  const int64_t max = bits == 64 ? std::numeric_limits<int64_t>::max()
                                 : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
  const int64_t min = -max - 1;
  const double bound = std::ldexp(1.0, bits - 1);  // exact: a power of two
  if (value >= -bound && value < bound) return static_cast<int64_t>(value);
  // torch's CPU casts to int16 go through int32 (x86's cvttss2si), then
  // keep the low 16 bits: 40000.0 becomes -25536, 3e9 becomes 0.
  if (device == Device::kCpu && bits == 16) {
    return WrapInt16(FloatToInt(value, DType::kInt32, device));
  }
  if (device == Device::kCpu) return min;
  if (std::isnan(value)) return 0;
  return value < 0 ? min : max;
}

}  // namespace

int64_t ShapeNumel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

Shape ContiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

Tensor FlattenBatch(const Tensor& t) {
  if (t.dim() != 4) return t;
  if (t.is_contiguous()) return t.Reshape({t.size(0) * t.size(1), t.size(2), t.size(3)});
  const Shape& st = t.strides();
  // With one token per item the items are the tokens: their stride is the
  // batch stride (torch merges a size-1 dimension whatever its stride).
  const int64_t token_stride = t.size(1) == 1 ? st[0] : st[1];
  return t.AsStrided({t.size(0) * t.size(1), t.size(2), t.size(3)}, {token_stride, st[2], st[3]},
                     0);
}

bool CanFlattenBatch(const Tensor& t) {
  return t.dim() != 4 || t.is_contiguous() || t.size(0) <= 1 || t.size(1) == 1 ||
         t.strides()[0] == t.size(1) * t.strides()[1];
}

Tensor Tensor::ShapeOnly(DType dtype, Device device, Shape shape) {
  Tensor t;
  t.defined_ = true;
  t.dtype_ = dtype;
  t.device_ = device;
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  t.storage_elements_ = t.numel();
  return t;
}

Tensor Tensor::Zeros(DType dtype, Device device, Shape shape) {
  Tensor t = ShapeOnly(dtype, device, std::move(shape));
  const size_t bytes = static_cast<size_t>(t.numel()) * DTypeSize(dtype);
  t.storage_ = std::make_shared<Storage>();
  t.storage_->bytes = std::make_unique<unsigned char[]>(bytes == 0 ? 1 : bytes);
  std::memset(t.storage_->bytes.get(), 0, bytes);
  return t;
}

Tensor Tensor::FromInts(absl::Span<const int64_t> values, DType dtype, Device device,
                        std::optional<Shape> shape) {
  Tensor t = Zeros(dtype, device, shape.value_or(Shape{static_cast<int64_t>(values.size())}));
  assert(t.numel() == static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (IsFloatingPoint(dtype)) {
      t.SetDoubleAt(static_cast<int64_t>(i), static_cast<double>(values[i]));
    } else {
      t.SetIntAt(static_cast<int64_t>(i), values[i]);
    }
  }
  return t;
}

Tensor Tensor::FromDoubles(absl::Span<const double> values, DType dtype, Device device,
                           std::optional<Shape> shape) {
  Tensor t = Zeros(dtype, device, shape.value_or(Shape{static_cast<int64_t>(values.size())}));
  assert(t.numel() == static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) t.SetDoubleAt(static_cast<int64_t>(i), values[i]);
  return t;
}

bool Tensor::is_contiguous() const {
  // torch's rule: an empty tensor is contiguous, and a size-1 dimension's
  // stride does not matter.
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

bool Tensor::SharesStorageWith(const Tensor& other) const {
  return storage_ != nullptr && storage_ == other.storage_ && offset_ == other.offset_;
}

int64_t Tensor::StorageIndex(int64_t i) const {
  if (is_contiguous()) return i;
  int64_t at = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    at += (i % shape_[d]) * strides_[d];
    i /= shape_[d];
  }
  return at;
}

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  if (!has_storage()) return ShapeOnly(dtype_, device_, shape_);
  Tensor out = Zeros(dtype_, device_, shape_);
  const size_t size = DTypeSize(dtype_);
  std::vector<int64_t> index(shape_.size(), 0);  // an odometer over the row-major indices
  int64_t source = 0;
  for (int64_t i = 0; i < numel(); ++i) {
    std::memcpy(out.mutable_data<unsigned char>() + i * size, data<unsigned char>() + source * size,
                size);
    for (size_t d = index.size(); d-- > 0;) {
      source += strides_[d];
      if (++index[d] < shape_[d]) break;
      source -= index[d] * strides_[d];
      index[d] = 0;
    }
  }
  return out;
}

Tensor Tensor::Reshape(Shape shape) const {
  if (!is_contiguous()) return Contiguous().Reshape(std::move(shape));
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      inferred = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) shape[inferred] = known == 0 ? 0 : numel() / known;
  assert(ShapeNumel(shape) == numel());
  Tensor t = *this;
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::AsStrided(Shape shape, Shape strides, int64_t offset) const {
  assert(shape.size() == strides.size() && offset >= 0);
  [[maybe_unused]] bool empty = false;
  [[maybe_unused]] int64_t last = offset_ + offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    assert(shape[i] >= 0 && strides[i] >= 0);
    empty |= shape[i] == 0;
    last += (shape[i] - 1) * strides[i];
  }
  assert(empty || last < storage_elements_);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset_ + offset;
  return t;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  assert((dim() == 1 || is_contiguous()) && 0 <= begin && begin <= end && end <= numel());
  const int64_t stride = dim() == 1 ? strides_[0] : 1;
  Tensor t = *this;
  t.shape_ = {end - begin};
  t.strides_ = {stride};
  t.offset_ = offset_ + begin * stride;
  return t;
}

int64_t Tensor::IntAt(int64_t i) const {
  switch (dtype_) {
    case DType::kInt16:
      return data<int16_t>()[i];
    case DType::kInt32:
      return data<int32_t>()[i];
    case DType::kInt64:
      return data<int64_t>()[i];
    case DType::kBool:
      return data<uint8_t>()[i] != 0;
    default:
      return FloatToInt(DoubleAt(i), DType::kInt64, device_);
  }
}

double Tensor::DoubleAt(int64_t i) const {
  switch (dtype_) {
    case DType::kFloat32:
      return data<float>()[i];
    case DType::kFloat16:
      return Float16BitsToDouble(data<uint16_t>()[i]);
    case DType::kBFloat16:
      return BFloat16BitsToDouble(data<uint16_t>()[i]);
    case DType::kFloat64:
      return data<double>()[i];
    default:
      return static_cast<double>(IntAt(i));
  }
}

void Tensor::SetIntAt(int64_t i, int64_t value) const {
  switch (dtype_) {
    case DType::kInt16:  // two's-complement wrap, as torch's integer arithmetic does
      mutable_data<int16_t>()[i] = WrapInt16(value);
      return;
    case DType::kInt32:
      mutable_data<int32_t>()[i] = WrapInt32(value);
      return;
    case DType::kInt64:
      mutable_data<int64_t>()[i] = value;
      return;
    case DType::kBool:
      mutable_data<uint8_t>()[i] = value != 0;
      return;
    default:
      SetDoubleAt(i, static_cast<double>(value));
  }
}

void Tensor::SetDoubleAt(int64_t i, double value) const {
  switch (dtype_) {
    case DType::kFloat32:
      mutable_data<float>()[i] = static_cast<float>(value);
      return;
    case DType::kFloat16:
      mutable_data<uint16_t>()[i] = DoubleToFloat16Bits(value);
      return;
    case DType::kBFloat16:
      mutable_data<uint16_t>()[i] = DoubleToBFloat16Bits(value);
      return;
    case DType::kFloat64:
      mutable_data<double>()[i] = value;
      return;
    case DType::kBool:
      mutable_data<uint8_t>()[i] = value != 0.0;  // NaN is truthy, as in torch
      return;
    default:
      SetIntAt(i, FloatToInt(value, dtype_, device_));
  }
}

std::vector<int64_t> Tensor::ToHostInts(absl::string_view what) const {
  if (device_ == Device::kCuda) RecordDeviceEvent(DeviceEventKind::kHostSync, what);
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = IntAtLogical(i);
  return out;
}

std::vector<double> Tensor::ToHostDoubles(absl::string_view what) const {
  if (device_ == Device::kCuda) RecordDeviceEvent(DeviceEventKind::kHostSync, what);
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = DoubleAtLogical(i);
  return out;
}

std::string Tensor::DebugString() const {
  if (!defined_) return "<undefined tensor>";
  std::string values;
  if (!has_storage()) {
    values = absl::StrCat("shape=", ShapeToString(shape_));
  } else {
    constexpr int64_t kShown = 6;
    std::vector<std::string> parts;
    const int64_t n = numel();
    for (int64_t i = 0; i < n; ++i) {
      if (n > 2 * kShown && i == kShown) {
        parts.push_back("...");
        i = n - kShown;
      }
      parts.push_back(IsFloatingPoint(dtype_) ? absl::StrCat(DoubleAtLogical(i))
                                              : absl::StrCat(IntAtLogical(i)));
    }
    values = absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    if (dim() != 1) absl::StrAppend(&values, ", shape=", ShapeToString(shape_));
  }
  return absl::StrCat("tensor(", values, ", dtype=", DTypeName(dtype_),
                      ", device=", DeviceName(device_), ")");
}

}  // namespace varlen
