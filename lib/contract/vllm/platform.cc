// vLLM 0.33.0's rules for a call's platform (docs/contract-vllm.md, V11-V15
// and V12). MMEncoderAttention.__init__ asks the platform for its backend
// with the case's profile as mm_encoder_attn_backend (vllm/model_executor/
// models/vision.py: get_vit_attn_backend), then, for FLASH_ATTN, asks
// fa_utils.get_flash_attn_version which FlashAttention runs, the profile's
// version standing for attention_config.flash_attn_version. The layer's
// forward is the platform's: forward_cuda on CUDA and ROCm, forward_xpu,
// and on the CPU and the base platform the SDPA path whatever the backend.
//
// A platform on which the layer would run another backend or another
// FlashAttention than the profile ("vLLM runs X instead"), or a kernel
// whose door was read for another machine, is "not modelled", with the
// reason. python/tests/test_vllm_platform.py holds these rules to the
// wheel's own selection code.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "resolve_internal.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

using Kind = Platform::Kind;

// AttentionBackendEnum's members a vision platform lists, with their values
// (vllm/v1/attention/backends/registry.py).
struct BackendMember {
  absl::string_view name;
  absl::string_view value;
};
constexpr BackendMember kFlashAttn = {
    "FLASH_ATTN", "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"};
constexpr BackendMember kRocmAiterFa = {
    "ROCM_AITER_FA", "vllm.v1.attention.backends.rocm_aiter_fa.AiterFlashAttentionBackend"};
constexpr BackendMember kTritonAttn = {
    "TRITON_ATTN", "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"};
constexpr BackendMember kTorchSdpa = {"TORCH_SDPA", ""};
constexpr BackendMember kFlashinfer = {"FLASHINFER",
                                       "vllm.v1.attention.backends.flashinfer.FlashInferBackend"};

// The member a profile names.
absl::string_view MemberOf(Profile profile) {
  switch (profile) {
    case Profile::kVllmTritonAttn:
      return kTritonAttn.name;
    case Profile::kVllmTorchSdpa:
      return kTorchSdpa.name;
    case Profile::kVllmFlashinfer:
      return kFlashinfer.name;
    default:  // FLASH_ATTN/fa2, FLASH_ATTN/fa3
      return kFlashAttn.name;
  }
}

// The platform class's get_vit_attn_backend with an override: the
// assertion's text differs per class (CUDA and ROCm: ". Supported backends
// are: [...]"; XPU adds a final "."; the base class has no separator).
struct VisionPlatform {
  absl::string_view class_name;
  std::vector<BackendMember> supported;
  absl::string_view separator = ". ";
  absl::string_view ending = "";
};

bool HasCapability(const Platform& p, int capability) {
  return p.major * 10 + p.minor >= capability;  // has_device_capability
}

std::optional<VisionPlatform> VisionPlatformOf(const Platform& p) {
  switch (p.kind) {
    case Kind::kCuda:  // platforms/cuda.py
      if (HasCapability(p, 80)) {
        return VisionPlatform{"CudaPlatform", {kFlashAttn, kTritonAttn, kTorchSdpa, kFlashinfer}};
      }
      return VisionPlatform{"CudaPlatform", {kFlashAttn, kTorchSdpa, kTritonAttn, kFlashinfer}};
    case Kind::kHip:  // platforms/rocm.py
      return VisionPlatform{"RocmPlatform", {kFlashAttn, kRocmAiterFa, kTritonAttn, kTorchSdpa}};
    case Kind::kXpu:  // platforms/xpu.py
      return VisionPlatform{"XPUPlatform", {kFlashAttn, kTritonAttn, kTorchSdpa}, ". ", "."};
    case Kind::kCpu:    // platforms/cpu.py keeps interface.py's rule
    case Kind::kOther:  // interface.py's Platform: TPU and other platforms that keep it
      return VisionPlatform{"Platform", {kTorchSdpa}, ""};
    case Kind::kNpu:  // out of tree (vllm-ascend)
    case Kind::kMusa:
      return std::nullopt;
  }
  return std::nullopt;
}

absl::Status NotModelled(Profile profile, const Platform& p, absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat(ProfileName(profile), " on ", PlatformName(p), ": ", why));
}

// get_vit_attn_backend(head_size, dtype, backend=<the profile's member>).
absl::Status SelectBackend(const VisionPlatform& vision, absl::string_view member) {
  for (const BackendMember& m : vision.supported) {
    if (m.name == member) return absl::OkStatus();
  }
  std::vector<std::string> reprs;
  for (const BackendMember& m : vision.supported) {
    reprs.push_back(absl::StrCat("<AttentionBackendEnum.", m.name, ": '", m.value, "'>"));
  }
  return PythonError(
      PyErrorKind::kAssertionError,
      absl::StrCat("Backend AttentionBackendEnum.", member, " is not supported for vit attention",
                   vision.separator, "Supported backends are: [", absl::StrJoin(reprs, ", "), "]",
                   vision.ending));
}

// FLASH_ATTN on CUDA: whether get_flash_attn_version can give the profile's
// FlashAttention (fa_utils.py; flash_attn_interface.py's _is_fa*_supported),
// and whether that kernel's door was read for this capability.
absl::Status FlashVersionOnCuda(Profile profile, const Platform& p, int64_t head_size) {
  if (profile == Profile::kVllmFlashAttnFa3) {
    if (p.major >= 10) {
      return NotModelled(profile, p,
                         "vLLM runs FlashAttention 4 or 2 instead (get_flash_attn_version: no "
                         "FA3 on Blackwell and later)");
    }
    if (p.major != 9) {
      return NotModelled(profile, p,
                         "vLLM runs FlashAttention 2 instead (get_flash_attn_version: FA3 "
                         "needs compute capability 9.x, and the op's default version is 2)");
    }
    if (head_size > 256) {
      return NotModelled(profile, p,
                         "vLLM runs FlashAttention 4 instead (get_flash_attn_version upgrades FA3 "
                         "for a head size above 256 when the build has FA4)");
    }
    return absl::OkStatus();
  }
  if (!HasCapability(p, 80)) {
    return NotModelled(profile, p,
                       "FlashAttention 2's door is modelled as read for compute capability 8.0 "
                       "and later only");
  }
  return absl::OkStatus();
}

// The platform each kernel's door was read for (bind.cc).
absl::Status KernelReadFor(Profile profile, const Platform& p, int64_t head_size) {
  const bool cuda = p.kind == Kind::kCuda;
  switch (profile) {
    case Profile::kVllmFlashAttnFa2:
    case Profile::kVllmFlashAttnFa3:
      if (p.kind == Kind::kHip) {
        return NotModelled(profile, p,
                           "vLLM runs the upstream flash_attn package instead (no "
                           "FlashAttention version on ROCm), a path not modelled");
      }
      if (p.kind == Kind::kXpu && profile == Profile::kVllmFlashAttnFa3) {
        return NotModelled(profile, p,
                           "vLLM runs FlashAttention 2 instead (get_flash_attn_version: 2 on XPU)");
      }
      if (!cuda) {
        return NotModelled(profile, p, "FLASH_ATTN's kernel is modelled on CUDA only");
      }
      return FlashVersionOnCuda(profile, p, head_size);
    case Profile::kVllmTritonAttn:
      if (cuda && HasCapability(p, 80)) return absl::OkStatus();
      return NotModelled(profile, p,
                         "the Triton kernel's launch is modelled with the tiles of CUDA 8.0 and "
                         "later only (BLOCK 128; ROCm also makes q, k and v contiguous first)");
    case Profile::kVllmFlashinfer:  // CUDA only: the other platforms refuse it above
    default:                        // TORCH_SDPA: torch's own operator, wherever it runs
      return absl::OkStatus();
  }
}

}  // namespace

absl::Status VllmCheckPlatform(const AttentionCall& call, Profile profile, Mode /*mode*/) {
  const Platform& platform = *call.platform;
  const std::optional<VisionPlatform> vision = VisionPlatformOf(platform);
  if (!vision.has_value()) {
    return NotModelled(profile, platform,
                       "vLLM has no platform of this kind in its tree (an out-of-tree plugin's "
                       "rules are not modelled)");
  }
  const absl::string_view member = MemberOf(profile);
  // XPUPlatform.get_vit_attn_backend returns TRITON_ATTN for float32 (the
  // default dtype at init, the model's: q's here) before it looks at the
  // override: no float32 call reaches another backend there.
  if (platform.kind == Kind::kXpu && call.q.dtype() == DType::kFloat32 &&
      member != kTritonAttn.name) {
    return NotModelled(profile, platform,
                       "vLLM runs TRITON_ATTN instead (XPU's choice for float32, whatever the "
                       "override)");
  }
  VARLEN_RETURN_IF_ERROR(SelectBackend(*vision, member));
  // forward_cpu and forward_native take the SDPA path whatever the backend;
  // the only backend those platforms accept is TORCH_SDPA.
  return KernelReadFor(profile, platform, call.vllm_layer.head_size);
}

}  // namespace varlen::internal
