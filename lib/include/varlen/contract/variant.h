// File: varlen/contract/variant.h
// -----------------------------------------------------------------------------
//
// The attention a query row computes besides plain softmax attention over its
// sequence: a sliding window (causal attention is its right bound at 0) and
// attention sinks. It appears twice: in a case's ground truth (what the
// caller means, computed by the float64 oracle) and in the arguments that
// reach a kernel (what the kernel is asked to compute). A profile that drops
// the caller's window or sinks makes the two differ: a silent corruption.
//
// FlashAttention's conventions, which every kernel that takes these follows:
// row i of a sequence with n_q rows and n_k keys attends key j when
//   i + (n_k - n_q) - window_left <= j <= i + (n_k - n_q) + window_right,
// a negative bound being no bound; a sink is one logit per query head, in
// the softmax's units (scaled, as q k^T * scale is), that joins each row's
// denominator and contributes no value.

#ifndef VARLEN_CONTRACT_VARIANT_H_
#define VARLEN_CONTRACT_VARIANT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace varlen {

struct AttentionVariant {
  int64_t window_left = -1;  // < 0: no bound
  int64_t window_right = -1;
  std::vector<float> sinks;  // empty, or one per query head

  bool windowed() const { return window_left >= 0 || window_right >= 0; }
  bool full() const { return !windowed() && sinks.empty(); }
  // Causal attention and nothing else but sinks: a right bound of 0, no left bound.
  bool causal() const { return window_left < 0 && window_right == 0; }
  // "full attention", "causal", "window (128, 0)", each "+ sinks" when set.
  std::string Describe() const;
  bool operator==(const AttentionVariant&) const = default;
};

}  // namespace varlen

#endif  // VARLEN_CONTRACT_VARIANT_H_
