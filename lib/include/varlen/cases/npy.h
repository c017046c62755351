// File: varlen/cases/npy.h
// -----------------------------------------------------------------------------
//
// Tensors as NumPy .npy files, so a user can load what a case fed a backend
// and what came back (numpy.load("q.npy")), and a case can take q, k and v
// from a recorded call (numpy.save of the live tensors).
//
// Elements are written in logical row-major order whatever the strides, in
// format version 1.0. numpy has no bfloat16: bfloat16 tensors are written as
// float32, exactly. Reading takes what numpy.save writes for a floating
// array (versions 1.0 to 3.0, little-endian float16, float32 or float64,
// C order) and refuses anything else by name.

#ifndef VARLEN_CASES_NPY_H_
#define VARLEN_CASES_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/core/tensor.h"

namespace varlen {

// REQUIRES: t.has_storage().
absl::Status WriteNpy(const std::string& path, const Tensor& t);

// float64 values of `shape` (for the oracle).
absl::Status WriteNpy(const std::string& path, absl::Span<const double> values, const Shape& shape);

// A floating array read from a .npy file: its shape and its values, widened
// to double exactly.
struct NpyArray {
  Shape shape;
  std::vector<double> values;  // row-major
};

// The array `bytes` holds (a .npy file's contents). Errors name `origin`,
// what was found and the rule, e.g.
//   q.npy: 'descr' is '<i8': an array of float16, float32 or float64 ...
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view origin);

// The file at `path`, refused without reading when larger than `max_bytes`.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path, int64_t max_bytes);

}  // namespace varlen

#endif  // VARLEN_CASES_NPY_H_
