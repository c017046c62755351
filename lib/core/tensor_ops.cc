#include "tensor_ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"

namespace varlen::internal {

Tensor To(const Tensor& t, Device device, DType dtype, absl::string_view what) {
  if (t.device() == device && t.dtype() == dtype) return t;
  if (t.dtype() != dtype) RecordDeviceEvent(DeviceEventKind::kCast, what);
  if (t.device() != device) {
    if (device == Device::kCuda) {
      RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, what);
    } else {
      RecordDeviceEvent(DeviceEventKind::kDeviceToHostCopy, what);
      RecordDeviceEvent(DeviceEventKind::kHostSync, what);
    }
  }
  if (!t.has_storage()) return Tensor::ShapeOnly(dtype, device, t.shape());
  Tensor out = Tensor::Zeros(dtype, device, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (IsFloatingPoint(dtype) || IsFloatingPoint(t.dtype())) {
      out.SetDoubleAt(i, t.DoubleAtLogical(i));
    } else {
      out.SetIntAt(i, t.IntAtLogical(i));
    }
  }
  return out;
}

Tensor Diff(const Tensor& t) {
  // t[1:] - t[:-1] along the first dimension: trailing dimensions are kept.
  Shape shape = t.dim() == 0 ? Shape{0} : t.shape();
  const int64_t rows = t.dim() == 0 ? 0 : shape[0];
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  shape[0] = std::max<int64_t>(rows - 1, 0);
  Tensor out = Tensor::Zeros(t.dtype(), t.device(), shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (IsFloatingPoint(t.dtype())) {
      out.SetDoubleAt(i, t.DoubleAtLogical(i + row) - t.DoubleAtLogical(i));
    } else {
      // Unsigned arithmetic: the difference wraps like the dtype does.
      out.SetIntAt(i, static_cast<int64_t>(static_cast<uint64_t>(t.IntAtLogical(i + row)) -
                                           static_cast<uint64_t>(t.IntAtLogical(i))));
    }
  }
  return out;
}

namespace {

absl::Status ZeroDimSliceError() {
  return PythonError(PyErrorKind::kIndexError, "slice() cannot be applied to a 0-dim tensor.");
}

}  // namespace

absl::StatusOr<Tensor> WithoutLastRow(const Tensor& t) {
  if (t.dim() == 0) return ZeroDimSliceError();
  Shape rows = t.shape();
  rows[0] = std::max<int64_t>(rows[0] - 1, 0);
  return t.AsStrided(rows, t.strides(), 0);
}

absl::StatusOr<Tensor> SubtractShifted(const Tensor& t) {
  if (t.dim() == 0) return ZeroDimSliceError();
  if (t.dtype() == DType::kBool) {
    // aten/src/ATen/native/BinaryOps.cpp, sub_check (TORCH_CHECK_NOT_IMPLEMENTED).
    return PythonError(PyErrorKind::kNotImplementedError,
                       "Subtraction, the `-` operator, with two bool tensors is not supported. "
                       "Use the `^` or `logical_xor()` operator instead.");
  }
  return Diff(t);
}

absl::StatusOr<Tensor> Max(const Tensor& t) {
  if (t.numel() == 0) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "max(): Expected reduction dim to be specified for input.numel() == 0. "
                       "Specify the reduction dim with the 'dim' argument.");
  }
  Tensor out = Tensor::Zeros(t.dtype(), t.device(), {});
  if (IsFloatingPoint(t.dtype())) {
    double best = t.DoubleAtLogical(0);
    for (int64_t i = 1; i < t.numel() && !std::isnan(best); ++i) {
      const double v = t.DoubleAtLogical(i);
      best = std::isnan(v) ? v : std::max(best, v);  // torch propagates NaN
    }
    out.SetDoubleAt(0, best);
  } else {
    int64_t best = t.IntAtLogical(0);
    for (int64_t i = 1; i < t.numel(); ++i) best = std::max(best, t.IntAtLogical(i));
    out.SetIntAt(0, best);
  }
  return out;
}

absl::StatusOr<Value> Item(const Tensor& t, absl::string_view what) {
  if (t.numel() != 1) {
    return PythonError(
        PyErrorKind::kRuntimeError,
        absl::StrCat("a Tensor with ", t.numel(), " elements cannot be converted to Scalar"));
  }
  if (IsFloatingPoint(t.dtype())) return Value::Float(t.ToHostDoubles(what)[0]);
  const int64_t v = t.ToHostInts(what)[0];
  if (t.dtype() == DType::kBool) return Value::Bool(v != 0);
  return Value::Int(v);
}

namespace {
// out[to] = t[from], keeping floating values exact.
void CopyElement(const Tensor& t, int64_t from, const Tensor& out, int64_t to) {
  if (IsFloatingPoint(t.dtype())) {
    out.SetDoubleAt(to, t.DoubleAtLogical(from));
  } else {
    out.SetIntAt(to, t.IntAtLogical(from));
  }
}
}  // namespace

Tensor Cat(const std::vector<Tensor>& parts) {
  assert(!parts.empty());
  int64_t n = 0;
  for (const Tensor& p : parts) n += p.numel();
  Tensor out = Tensor::Zeros(parts.front().dtype(), parts.front().device(), {n});
  int64_t at = 0;
  for (const Tensor& p : parts) {
    for (int64_t i = 0; i < p.numel(); ++i) CopyElement(p, i, out, at++);
  }
  return out;
}

Tensor MulScalar(const Tensor& t, int64_t scalar) {
  Tensor out = Tensor::Zeros(t.dtype(), t.device(), t.shape());
  if (IsFloatingPoint(t.dtype())) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      out.SetDoubleAt(i, t.DoubleAtLogical(i) * static_cast<double>(scalar));
    }
    return out;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    out.SetIntAt(i, static_cast<int64_t>(static_cast<uint64_t>(t.IntAtLogical(i)) *
                                         static_cast<uint64_t>(scalar)));
  }
  return out;
}

absl::StatusOr<Tensor> Arange(int64_t start, int64_t end, int64_t step, DType dtype,
                              Device device) {
  if (step == 0) return PythonError(PyErrorKind::kRuntimeError, "step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "upper bound and lower bound inconsistent with step sign");
  }
  std::vector<int64_t> values;
  for (int64_t v = start; step > 0 ? v < end : v > end; v += step) values.push_back(v);
  return Tensor::FromInts(values, dtype, device);
}

Tensor PadTo(const Tensor& t, int64_t length, int64_t fill) {
  Tensor out = Tensor::Zeros(t.dtype(), t.device(), {length});
  for (int64_t i = 0; i < length; ++i) {
    if (i < t.numel()) {
      CopyElement(t, i, out, i);
    } else {
      out.SetIntAt(i, fill);
    }
  }
  return out;
}

std::optional<std::string> TorchRepr(const Tensor& t) {
  const bool is_bool = t.dtype() == DType::kBool;
  if ((!IsIntegral(t.dtype()) && !is_bool) || t.dim() > 1 || t.numel() == 0 || !t.has_storage()) {
    return std::nullopt;
  }
  std::vector<std::string> items;
  size_t width = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = t.IntAtLogical(i);
    items.push_back(is_bool ? (v != 0 ? "True" : "False") : absl::StrCat(v));
    width = std::max(width, items.back().size());
  }
  if (items.size() * (width + 2) > 72) return std::nullopt;  // torch wraps the line
  std::string body;
  if (t.dim() == 0) {
    body = items[0];
  } else {
    for (std::string& item : items) item.insert(0, width - item.size(), ' ');
    body = absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  std::string repr = absl::StrCat("tensor(", body);
  if (t.device() != Device::kCpu) absl::StrAppend(&repr, ", device='cuda:0'");
  if (t.dtype() != DType::kInt64 && !is_bool)
    absl::StrAppend(&repr, ", dtype=torch.", DTypeName(t.dtype()));
  return absl::StrCat(repr, ")");
}

std::optional<std::string> DispatcherRepr(const Value& value) {
  if (value.is_tensor()) return TorchRepr(value.as_tensor());
  if (value.kind() != Value::Kind::kList) return value.Repr();
  std::vector<std::string> items;
  for (const Value& item : value.as_list()) {
    std::optional<std::string> repr = DispatcherRepr(item);
    if (!repr.has_value()) return std::nullopt;
    items.push_back(*repr);
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

}  // namespace varlen::internal
