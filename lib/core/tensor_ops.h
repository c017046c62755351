// Internal: the few torch operations the calling contract is written in,
// with torch's semantics (dtype of the result, int32 wrap-around, error
// messages) and with their device effects recorded in the device ledger.
//
// Operations that torch would run on the tensor's own device (diff, max, cat,
// multiply) record nothing; only host reads, device moves and casts do.

#ifndef VARLEN_LIB_CORE_TENSOR_OPS_H_
#define VARLEN_LIB_CORE_TENSOR_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen::internal {

// t.to(device, dtype): `t` itself when nothing changes; otherwise a new
// contiguous tensor. Records a cast when the dtype changes, a copy when the
// device changes, and a host sync for a device-to-host copy. `what` labels
// the ledger entries (e.g. "cu_seqlens.to(q.device, torch.int32)").
Tensor To(const Tensor& t, Device device, DType dtype, absl::string_view what);

// t[1:] - t[:-1] along the first dimension (trailing ones kept), in t's dtype
// (int32 wraps).
Tensor Diff(const Tensor& t);

// t[:-1]: a view of all rows but the last, trailing dimensions and strides
// kept; IndexError for a 0-d tensor.
absl::StatusOr<Tensor> WithoutLastRow(const Tensor& t);

// `t[1:] - t[:-1]` as the engines write it: Diff with torch's errors, an
// IndexError for a 0-d tensor (the slice) and a NotImplementedError for bool
// (torch refuses `-` on bool tensors).
absl::StatusOr<Tensor> SubtractShifted(const Tensor& t);

// t.max() as a 0-d tensor on t's device. Empty input raises torch's
// RuntimeError.
absl::StatusOr<Tensor> Max(const Tensor& t);

// t.item(): a Python int, float or bool. A host sync when t is on cuda;
// RuntimeError("a Tensor with N elements cannot be converted to Scalar")
// unless numel() == 1.
absl::StatusOr<Value> Item(const Tensor& t, absl::string_view what);

// torch.cat of 1-d tensors that share dtype and device. REQUIRES: non-empty.
Tensor Cat(const std::vector<Tensor>& parts);

// t * scalar in t's dtype (an int32 product wraps modulo 2^32).
Tensor MulScalar(const Tensor& t, int64_t scalar);

// torch.arange(start, end, step, dtype, device), with torch's RuntimeErrors
// for step == 0 and for a step pointing away from `end`.
absl::StatusOr<Tensor> Arange(int64_t start, int64_t end, int64_t step, DType dtype, Device device);

// A copy of 1-d `t` padded to `length` entries by repeating `fill`.
Tensor PadTo(const Tensor& t, int64_t length, int64_t fill);

// repr() of a small 0-d or 1-d integer or bool tensor as torch prints it
// ("tensor([ 0,  4, 10], device='cuda:0', dtype=torch.int32)"), as error
// messages quote it; unset for anything else (float formatting, line
// wrapping and nesting are torch's printer's, not modelled).
std::optional<std::string> TorchRepr(const Tensor& t);

// repr() of a Python value as torch's dispatcher quotes it in a type error
// ("Value: ..."); unset where a tensor inside it is beyond TorchRepr.
std::optional<std::string> DispatcherRepr(const Value& value);

}  // namespace varlen::internal

#endif  // VARLEN_LIB_CORE_TENSOR_OPS_H_
