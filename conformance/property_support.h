// What the suite's properties share (internal): running a backend on a
// ground-truth launch without the contract, and moving token rows between
// packed tensors to build the launches a metamorphic property compares.

#ifndef VARLEN_CONFORMANCE_PROPERTY_SUPPORT_H_
#define VARLEN_CONFORMANCE_PROPERTY_SUPPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "properties.h"
#include "varlen/backend/backend.h"
#include "varlen/backend/bind.h"
#include "varlen/cases/case.h"

namespace varlen::internal {

// The ground truth's launch (with `variant`) on `backend`. Returns
// Unimplemented when `backend` does not support the launch, the backend's
// error when its run fails, else the call with its output.
absl::StatusOr<KernelCall> RunGroundTruth(const Backend& backend, const Tensor& q, const Tensor& k,
                                          const Tensor& v, const std::vector<int64_t>& lengths,
                                          double scale, const AttentionVariant& variant = {});
// The same for a case's geometry: its sequences where its padding puts them,
// its scale and its variant.
absl::StatusOr<KernelCall> RunGroundTruth(const Backend& backend, const Tensor& q, const Tensor& k,
                                          const Tensor& v, const Geometry& g);

// Why a property fails when its first launch did not run: nothing when the
// backend does not support the launch (the case is counted unsupported),
// else the backend's error.
std::string FailureOf(const absl::Status& status, PropertyRun* run);

// The failure of a property's later call (after a first one the backend
// took): always a failure, an unsupported one too, with its fault noted.
std::string FailureOfLaterCall(const absl::Status& status, PropertyRun* run);

// The sequences with at least one token.
std::vector<int64_t> NonEmptySequences(const Geometry& g);

// A forward case as plain packed data: the metamorphic properties run on
// the ground-truth launch, with every layout and contract question left to
// Numerics and the call properties.
Case AsPackedData(Case c, Distribution distribution);

// The geometry of `c` as one line of JSON, for messages.
std::string GeometryJson(const Case& c);

// Dense [tokens, heads, dim] copy of `t` with `extra` more tokens, filled
// with `fill`.
Tensor WithTail(const Tensor& t, int64_t extra, double fill);

// Copies `count` token rows of `from`, starting at `from_token`, to `to` at
// `to_token`. Both dense with the same heads and dim.
void CopyTokens(const Tensor& from, int64_t from_token, const Tensor& to, int64_t to_token,
                int64_t count);

// Sets every element of `count` token rows, starting at `first`.
void FillTokens(const Tensor& t, int64_t first, int64_t count, double value);

// Whether `count` token rows of `a` from `a_token` equal those of `b` from
// `b_token` bit for bit.
bool SameBits(const Tensor& a, int64_t a_token, const Tensor& b, int64_t b_token, int64_t count);

}  // namespace varlen::internal

#endif  // VARLEN_CONFORMANCE_PROPERTY_SUPPORT_H_
