// File: varlen/cases/npy.h
// -----------------------------------------------------------------------------
//
// Tensors as NumPy .npy files (format version 1.0), so a user can load what
// a case fed a backend and what came back: numpy.load("q.npy").
//
// Elements are written in logical row-major order whatever the strides.
// numpy has no bfloat16: bfloat16 tensors are written as float32, exactly.

#ifndef VARLEN_CASES_NPY_H_
#define VARLEN_CASES_NPY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "varlen/core/tensor.h"

namespace varlen {

// REQUIRES: t.has_storage().
absl::Status WriteNpy(const std::string& path, const Tensor& t);

// float64 values of `shape` (for the oracle).
absl::Status WriteNpy(const std::string& path, absl::Span<const double> values, const Shape& shape);

}  // namespace varlen

#endif  // VARLEN_CASES_NPY_H_
