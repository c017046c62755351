// File: varlen/contract/sglang/platform.h
// -----------------------------------------------------------------------------
//
// The parts of SGLang's vision attention contract that depend on the platform
// rather than on the arguments (contract §2.10, rules 22 and 26): which
// backend a VisionAttention picks, the "...is only available for..."
// exceptions of wrong-platform constructors, and the Ascend backend's
// conversion of cu_seqlens into cumulative ends.

#ifndef VARLEN_CONTRACT_SGLANG_PLATFORM_H_
#define VARLEN_CONTRACT_SGLANG_PLATFORM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/contract/platform.h"
#include "varlen/contract/sglang/version.h"
#include "varlen/core/tensor.h"

namespace varlen {

// _determine_attention_backend: the server override, else the constructor
// argument, else the platform default (which depends on the SGLang
// version); ValueError("The 'fa3' backend is not supported on Blackwell
// GPUs") when the result is fa3 on Blackwell.
absl::StatusOr<std::string> DetermineAttentionBackend(
    const Platform& platform, const std::optional<std::string>& server_override,
    const std::optional<std::string>& passed_backend, SglangVersion version = kLatestSglangVersion);

// The backend's constructor platform check: OK, or the bare Exception its
// constructor raises ("VisionFlash3Attention is only available for cuda or
// musa", ...). sdpa and triton_attn construct anywhere.
absl::Status ConstructBackend(absl::string_view backend, const Platform& platform);

// VisionAscendAttention's actual_seq_lengths: cumulative ends
// cu_seqlens[1:] as a host list (reading cu on the host is a sync when it
// lives on the device). The fused NPU kernel requires the last end to equal
// the number of tokens it is given, else RuntimeError("queryT(T) must be
// equal to the last element of actualSequenceLengthQ(end)"). Since 0.5.23
// the backend first drops padding (fewer real tokens than rows: each image's
// rows are gathered from its padded slot), so only a last end beyond the
// rows still fails: with the queryT error for one image; for several, the
// gather indexes past q (Unimplemented: the NPU's message is not modelled).
absl::StatusOr<std::vector<int64_t>> AscendActualSeqLengths(
    const Tensor& cu_seqlens, int64_t total_tokens, SglangVersion version = kLatestSglangVersion);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_SGLANG_PLATFORM_H_
