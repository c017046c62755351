#include "varlen/contract/sglang/platform.h"

#include "absl/strings/str_cat.h"
#include "resolve_internal.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

bool IsBlackwell(const Platform& p) {
  // is_blackwell_supported(): sm100 or sm120 (with CUDA >= 12.8).
  return p.kind == Platform::Kind::kCuda && (p.major == 10 || p.major == 12);
}

std::string PlatformDefault(const Platform& p, const SglangBehavior& sglang) {
  switch (p.kind) {
    case Platform::Kind::kCuda:
      if (p.major == 9) return "fa3";
      if (p.major == 10 && (p.minor != 3 || sglang.sm103_defaults_to_fa4)) return "fa4";
      return "triton_attn";
    case Platform::Kind::kNpu:
      return "ascend_attn";
    case Platform::Kind::kMusa:
      return (p.major > 3 || (p.major == 3 && p.minor >= 1)) ? "fa3" : "triton_attn";
    case Platform::Kind::kHip:
      return ((p.major > 9 || (p.major == 9 && p.minor >= 4)) && p.use_aiter) ? "aiter_attn"
                                                                              : "triton_attn";
    case Platform::Kind::kCpu:
      return p.cpu_amx ? "amx_attn" : "sdpa";
    case Platform::Kind::kXpu:
      return p.intel_xpu_backend || sglang.xpu_defaults_to_xpu_attn ? "xpu_attn" : "triton_attn";
    case Platform::Kind::kOther:
      return "sdpa";
  }
  return "sdpa";
}

absl::Status OnlyAvailable(absl::string_view message) {
  return PythonError(PyErrorKind::kException, message);
}

}  // namespace

absl::StatusOr<std::string> DetermineAttentionBackend(
    const Platform& platform, const std::optional<std::string>& server_override,
    const std::optional<std::string>& passed_backend, SglangVersion version) {
  std::string backend = server_override.has_value() ? *server_override
                        : passed_backend.has_value()
                            ? *passed_backend
                            : PlatformDefault(platform, BehaviorOf(version));
  if (backend == "fa3" && IsBlackwell(platform)) {
    return PythonError(PyErrorKind::kValueError,
                       "The 'fa3' backend is not supported on Blackwell GPUs");
  }
  return backend;
}

absl::Status ConstructBackend(absl::string_view backend, const Platform& platform) {
  using Kind = Platform::Kind;
  const Kind kind = platform.kind;
  if (backend == "fa3" && kind != Kind::kCuda && kind != Kind::kMusa) {
    return OnlyAvailable("VisionFlash3Attention is only available for cuda or musa");
  }
  if (backend == "fa4" && kind != Kind::kCuda) {
    return OnlyAvailable("VisionFlash4Attention is only available for cuda");
  }
  if (backend == "flashinfer_cudnn" && kind != Kind::kCuda) {
    return OnlyAvailable("VisionFlashInferAttention is only available for cuda");
  }
  if (backend == "aiter_attn" && kind != Kind::kHip) {
    return OnlyAvailable("aiter_attn is only available for AMD");
  }
  if (backend == "ascend_attn" && kind != Kind::kNpu) {
    return OnlyAvailable("VisionAscendAttention is only available for ascend npu");
  }
  if (backend == "amx_attn" && !(kind == Kind::kCpu && platform.cpu_amx)) {
    return OnlyAvailable("VisionAMXAttention is only available for cpu with amx support");
  }
  if (backend == "xpu_attn" && kind != Kind::kXpu) {
    return OnlyAvailable("VisionIntelXPUAttention is only available for Intel XPU");
  }
  return absl::OkStatus();
}

namespace internal {
namespace {

bool CudaMajor(const Platform& p, int major) {
  return p.kind == Platform::Kind::kCuda && p.major == major;
}

// The platform each backend's kernel door was read for (bind.cc): elsewhere
// the kernel is another build, with other tiles or other checks.
absl::Status KernelReadFor(Profile profile, const Platform& p) {
  bool read = true;
  absl::string_view where;
  switch (profile) {
    case Profile::kFa3:
      read = CudaMajor(p, 9);
      where = "FA3's mha_fwd on Hopper (cuda:9.x)";
      break;
    case Profile::kFa4:
      read = CudaMajor(p, 10);
      where = "FA4's CuTe interface on sm100 (cuda:10.x)";
      break;
    case Profile::kTritonAttn:
      read = CudaMajor(p, 9);
      where = "the Triton kernel's launch with an H100's tiles (cuda:9.x)";
      break;
    case Profile::kFlashinferCudnn:
      read = p.kind == Platform::Kind::kCuda;
      where = "cuDNN's prefill on CUDA";
      break;
    case Profile::kAiterAttn:
      read = p.kind == Platform::Kind::kHip && p.major == 9 && p.minor == 4;
      where = "aiter on an MI300 (hip:9.4)";
      break;
    default:  // sdpa (torch), and the backends whose constructors pin the platform
      break;
  }
  if (read) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(ProfileName(profile), " on ", PlatformName(p),
                                               ": its kernel is modelled as ", where, " only"));
}

}  // namespace

absl::Status SglangCheckPlatform(const AttentionCall& call, Profile profile, Mode mode) {
  const Platform& platform = *call.platform;
  const std::string backend(ProfileName(profile));
  // VisionAttention.__init__ picks its backend (the case's profile, passed
  // as qkv_backend), then constructs that class; a direct call constructs
  // the class alone.
  if (call.entry == Entry::kLayer) {
    const SglangVersion version =
        mode == Mode::kHardened ? kLatestSglangVersion : call.version.sglang();
    VARLEN_RETURN_IF_ERROR(
        DetermineAttentionBackend(platform, std::nullopt, backend, version).status());
  }
  VARLEN_RETURN_IF_ERROR(ConstructBackend(backend, platform));
  return KernelReadFor(profile, platform);
}

}  // namespace internal

absl::StatusOr<std::vector<int64_t>> AscendActualSeqLengths(const Tensor& cu_seqlens,
                                                            int64_t total_tokens,
                                                            SglangVersion version) {
  std::vector<int64_t> cu = cu_seqlens.ToHostInts("cu_seqlens.to(\"cpu\")");
  std::vector<int64_t> ends;
  for (size_t i = 1; i < cu.size(); ++i) ends.push_back(WrapInt32(cu[i]));  // .to(torch.int32)
  VARLEN_ASSIGN_OR_RETURN(AscendArgs args, internal::AscendLaunch(std::move(ends), total_tokens,
                                                                  BehaviorOf(version)));
  return args.actual_seq_lengths;
}

}  // namespace varlen
