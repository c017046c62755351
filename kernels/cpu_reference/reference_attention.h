// The float64 attention oracle and its same-precision emulation.
//
// ReferenceAttention computes softmax(scale * q k^T) v for every sequence of
// `params` (non-causal, GQA, any head dims), with the max subtracted before
// exp so logits of +-1e4 stay finite:
//
//   * kFloat64: every product, sum and exp in double; the result is rounded
//     once, to params.output_dtype. This is the oracle.
//   * kEmulated: what a careful kernel in the input dtype computes: float32
//     accumulation (float64 for float64 inputs), probabilities rounded to the
//     input dtype before P*V, the output rounded to params.output_dtype. The
//     numerical judge measures a backend's error against the oracle in units
//     of this emulation's error.
//
// A query row of a sequence with no keys is written as 0.

#ifndef VARLEN_KERNELS_CPU_REFERENCE_REFERENCE_ATTENTION_H_
#define VARLEN_KERNELS_CPU_REFERENCE_REFERENCE_ATTENTION_H_

#include "absl/status/status.h"
#include "varlen/backend/params.h"

namespace varlen {

enum class ReferencePrecision { kFloat64, kEmulated };

// REQUIRES: CheckKernelBounds(params).ok(), floating input and output dtypes.
void ReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision);

}  // namespace varlen

#endif  // VARLEN_KERNELS_CPU_REFERENCE_REFERENCE_ATTENTION_H_
