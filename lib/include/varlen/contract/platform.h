// File: varlen/contract/platform.h
// -----------------------------------------------------------------------------
//
// The machine a call runs on, as a case names it: a GPU of a CUDA device
// capability, a ROCm or MUSA GPU, an Ascend NPU, an Intel XPU, or a CPU
// (with or without AMX). An engine's backend-selection rules and its
// backends' constructors depend on it (SGLang: sglang/platform.h), and so
// does where q, k and v live (a CPU platform keeps them in host memory).
//
// Spelled "cuda:9.0", "cuda:10.0", "musa:3.1", "hip:9.4", "hip:9.4+aiter",
// "npu", "xpu", "xpu+intel_xpu_backend", "cpu", "cpu+amx" or "other".
//
// A CUDA platform's flag names a kernel build rather than the machine:
// "cuda:8.9+flash_attn_disable_uneven_k" is a GPU whose FlashAttention 2
// was compiled with FLASHATTENTION_DISABLE_UNEVEN_K, as vllm-flash-attn's
// FA2 was before the flag was commented out and as builds made to cut
// compile time are (vLLM #25582, #29417).

#ifndef VARLEN_CONTRACT_PLATFORM_H_
#define VARLEN_CONTRACT_PLATFORM_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varlen {

struct Platform {
  enum class Kind { kCuda, kNpu, kMusa, kHip, kCpu, kXpu, kOther };
  Kind kind = Kind::kCuda;
  int major = 9;  // device capability (CUDA, MUSA, HIP); unused by the other kinds
  int minor = 0;
  bool cpu_amx = false;            // CPU with AMX support
  bool use_aiter = false;          // SGLANG_USE_AITER on HIP
  bool intel_xpu_backend = false;  // use_intel_xpu_backend()
  bool fa2_disable_uneven_k = false;  // CUDA: FlashAttention 2 built without uneven head dims
  bool operator==(const Platform&) const = default;
};

// Whether a call on `platform` reaches a FlashAttention 2 build compiled
// with FLASHATTENTION_DISABLE_UNEVEN_K.
inline bool Fa2DisablesUnevenK(const std::optional<Platform>& platform) {
  return platform.has_value() && platform->fa2_disable_uneven_k;
}

// The spelling above; ParsePlatform(PlatformName(p)) == p.
std::string PlatformName(const Platform& platform);
absl::StatusOr<Platform> ParsePlatform(absl::string_view name);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_PLATFORM_H_
