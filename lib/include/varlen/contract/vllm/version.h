// File: varlen/contract/vllm/version.h
// -----------------------------------------------------------------------------
//
// The vLLM versions faithful mode models for vLLM's profiles. vLLM is the
// second engine of the contract (SGLang's versions are in sglang/version.h):
// its multimodal encoder attention (MMEncoderAttention and the custom ops of
// vit_attn_wrappers.py) resolves the same varlen arguments under other
// rules. A version is data: when a second one is modelled, what differs gets
// a field in a VllmBehavior here, read by the vLLM resolver, as SglangBehavior
// is for SGLang. Hardened mode is version-independent.
//
//   0.33.0   the release on PyPI (vllm==0.33.0)
//
// docs/contract-vllm.md lists the rules and the corpus case of each.

#ifndef VARLEN_CONTRACT_VLLM_VERSION_H_
#define VARLEN_CONTRACT_VLLM_VERSION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace varlen {

// Oldest first, in the order of the engine's EngineModel::versions
// (engine.h), whose names they are.
enum class VllmVersion {
  k0_33_0,  // the latest release
};

// What a vLLM case runs under when it names no version.
inline constexpr VllmVersion kLatestVllmVersion = VllmVersion::k0_33_0;

absl::string_view VllmVersionName(VllmVersion version);  // "0.33.0"
absl::StatusOr<VllmVersion> ParseVllmVersion(absl::string_view name);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_VLLM_VERSION_H_
