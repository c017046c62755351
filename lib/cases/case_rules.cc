// What the case reader's validation and the engines' call rules share.

#include "case_rules.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "varlen/cases/limits.h"

namespace varlen::internal {
namespace {

absl::Status ValidateTensorLiteral(const TensorLiteral& t, const std::string& path) {
  const int64_t count =
      static_cast<int64_t>(IsFloatingPoint(t.dtype) ? t.floats.size() : t.ints.size());
  if (t.shape.has_value()) {
    if (t.shape->size() > 8) return PathError(path + ".shape", "at most 8 dimensions");
    // Bound the product of the non-zero sizes too, so strides cannot overflow
    // even when a zero size makes the tensor empty.
    int64_t numel = 1, extent = 1;
    for (int64_t d : *t.shape) {
      extent = std::min<int64_t>(extent * std::max<int64_t>(d, 1), kMaxLiteralValues + 1);
      numel = std::min<int64_t>(numel * d, kMaxLiteralValues + 1);
    }
    if (extent > kMaxLiteralValues) {
      return PathError(path + ".shape",
                       absl::StrCat("shape ", ShapeToString(*t.shape), " spans more than ",
                                    kMaxLiteralValues, " elements"));
    }
    if (numel != count) {
      return PathError(path + ".shape", absl::StrCat("shape ", ShapeToString(*t.shape), " holds ",
                                                     numel, " values but ", count, " are given"));
    }
  }
  if (t.step != 1) {
    VARLEN_RETURN_IF_ERROR(CheckRange(path + ".step", t.step, 1, kMaxLiteralValues,
                                      "a view takes every step-th row of its base"));
    if (t.shape.has_value() && t.shape->empty()) {
      return PathError(path + ".step", "a 0-d tensor has no rows to step over");
    }
    if (count * t.step > kMaxLiteralValues) {
      return PathError(path + ".step", absl::StrCat("a base of ", count, " x ", t.step,
                                                    " elements exceeds the limit of ",
                                                    kMaxLiteralValues, " per literal tensor"));
    }
  }
  if (t.dtype == DType::kInt32 || t.dtype == DType::kInt16) {
    const int64_t max = t.dtype == DType::kInt32 ? std::numeric_limits<int32_t>::max()
                                                 : std::numeric_limits<int16_t>::max();
    for (size_t i = 0; i < t.ints.size(); ++i) {
      if (t.ints[i] < -max - 1 || t.ints[i] > max) {
        return PathError(absl::StrCat(path, ".tensor[", i, "]"),
                         absl::StrCat(t.ints[i], " does not fit in ", DTypeName(t.dtype)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PathError(absl::string_view path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

absl::Status CheckRange(absl::string_view path, int64_t value, int64_t lo, int64_t hi,
                        absl::string_view rule) {
  if (value < lo || value > hi) {
    return PathError(path, absl::StrCat(value, " is outside [", lo, ", ", hi, "]: ", rule));
  }
  return absl::OkStatus();
}

absl::Status ValidateArg(const ArgLiteral& a, const std::string& path) {
  switch (a.kind) {
    case ArgLiteral::Kind::kTensor:
      return ValidateTensorLiteral(a.tensor, path);
    case ArgLiteral::Kind::kSingletonCache:
      return a.cache_has_data ? ValidateTensorLiteral(a.tensor, path + ".singleton_cache")
                              : absl::OkStatus();
    case ArgLiteral::Kind::kList:
      for (size_t i = 0; i < a.list.size(); ++i) {
        VARLEN_RETURN_IF_ERROR(ValidateArg(a.list[i], absl::StrCat(path, "[", i, "]")));
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

std::string RowsOfGeometry(const Geometry& g) {
  return g.padding_rows() > 0 ? "the total of geometry.seq_lens and geometry.padding"
                              : "the total of geometry.seq_lens";
}

}  // namespace varlen::internal
