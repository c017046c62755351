// File: varlen/contract/seqlens.h
// -----------------------------------------------------------------------------
//
// SGLang's shared helpers for cu_seqlens and max_seqlen, reproduced exactly
// (contract rules 1-4), plus the strict checks hardened mode adds on top.
//
// Faithful helpers validate nothing SGLang does not validate: "17" and True
// are fine max_seqlen values, 5.9 truncates to 5, and a negative value is
// accepted. The hardened checks reject each of those with a message that
// names the argument, the value and the rule.

#ifndef VARLEN_CONTRACT_SEQLENS_H_
#define VARLEN_CONTRACT_SEQLENS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {

// _get_cu_seqlens_for_shape(bsz, seqlen, device): int32 [0, s, ..., bsz*s].
// RuntimeError("step must be nonzero") when seqlen == 0.
absl::StatusOr<Tensor> GetCuSeqlensForShape(int64_t bsz, int64_t seqlen, Device device);

// resolve_seqlens(cu, bsz, seq_len, device): None -> the uniform tensor; an
// empty SingletonCache is filled with it; a SingletonCache -> its data;
// anything else unchanged, then AssertionError("cu_seqlens must be a
// torch.Tensor") unless it is a Tensor.
absl::StatusOr<Tensor> ResolveSeqlens(const Value& cu_seqlens, int64_t bsz, int64_t seq_len,
                                      Device device);

// resolve_max_seqlen(source, cu): int(max(diff(cu)).item()); caches the
// result on `source` only when it is a SingletonCache.
absl::StatusOr<int64_t> ResolveMaxSeqlen(const Value& source, const Tensor& cu_seqlens);

// resolve_precomputed_max_seqlen(cu, m): None -> max(diff(cu)); a Tensor ->
// int(m.item()); anything else -> int(m).
absl::StatusOr<int64_t> ResolvePrecomputedMaxSeqlen(const Tensor& cu_seqlens,
                                                    const Value& max_seqlen);

// Hardened checks ------------------------------------------------------------

// Token offsets as host integers after checking that `cu` (named `name` in
// messages) is a 1-d int32/int64 tensor with at least one entry, starting at
// 0, non-decreasing, within int32, and ending at `total_tokens` when that is
// given. Reads the tensor on the host (a sync if it lives on the device).
absl::StatusOr<std::vector<int64_t>> CheckTokenOffsets(const Tensor& cu, absl::string_view name,
                                                       std::optional<int64_t> total_tokens);

// A max_seqlen given as an int or a one-element integer tensor, checked to
// be a non-negative integer no smaller than `longest` (the longest real
// sequence, described by `longest_source` in messages). Floats, strings,
// bools and None are rejected: hardened mode never guesses. `name` is the
// argument as the caller spelled it ("max_seqlen",
// "forward_metadata.flashinfer_max_seqlen", "cu_seqlens[1]").
absl::StatusOr<int64_t> CheckMaxSeqlen(const Value& max_seqlen, int64_t longest,
                                       absl::string_view longest_source,
                                       absl::string_view name = "max_seqlen");

// Sequence lengths (an integer tensor of any shape, read flattened, as
// `.view(-1)` does) as host integers, each non-negative. Reads the tensor on
// the host. `name` is the argument as the caller spelled it.
absl::StatusOr<std::vector<int64_t>> CheckSequenceLengths(
    const Value& sequence_lengths, absl::string_view name = "sequence_lengths");

// Rule 25: element offsets are int32 in the kernels, so
// total_tokens * elem_per_token must not exceed INT32_MAX. The names say
// where each number comes from ("cu_seqlens[-1]", "elem_per_token").
absl::Status CheckElementOffsetsFitInt32(int64_t total_tokens, absl::string_view tokens_name,
                                         int64_t elem_per_token, absl::string_view elem_name);

// The index and value of the longest entry ("sequence_lengths[1]=720").
struct Longest {
  int64_t value = 0;
  int64_t index = -1;  // -1 when there are no lengths
  std::string source;
};
Longest FindLongest(const std::vector<int64_t>& lengths, absl::string_view name);

// Differences of consecutive offsets.
std::vector<int64_t> OffsetsToLengths(const std::vector<int64_t>& offsets);
// Running sums of lengths, from 0: [0, l0, l0+l1, ...].
std::vector<int64_t> LengthsToOffsets(const std::vector<int64_t>& lengths);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_SEQLENS_H_
