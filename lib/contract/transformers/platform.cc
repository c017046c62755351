// transformers' rules for a call's platform. Its attention functions make
// the same call on every machine; what the platform decides is which
// kernel answers it, so a platform is modelled where the profile's kernel
// was read for it and "not modelled" elsewhere, with the reason:
//   - flash_attention_2 and the hub's flash-attn2: FlashAttention 2, on
//     CUDA from compute capability 8.0 (Ampere) on; a "+flash_attn_disable_
//     uneven_k" build is modelled at the kernel's door (backend/bind.cc);
//   - flash_attention_3: FlashAttention 3's hopper build, on 9.x;
//   - flash_attention_4: flash_attn.cute, on Hopper (9.x) and Blackwell
//     (10.x), whose interface this model reads before any arch-specific code;
//   - sdpa and eager: torch's own operators, on any CUDA GPU.
// Off CUDA, transformers swaps in other kernels (torch_npu's fused
// attention for the flash names on Ascend, ROCm's and XPU's builds), none
// read here, and q, k and v on the host change which reads are device
// syncs: not modelled.

#include "absl/strings/str_cat.h"
#include "resolve_internal.h"

namespace varlen::internal {
namespace {

absl::Status NotModelled(Profile profile, const Platform& p, absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat(ProfileName(profile), " on ", PlatformName(p), ": ", why));
}

}  // namespace

absl::Status TransformersCheckPlatform(const AttentionCall& call, Profile profile, Mode /*mode*/) {
  const Platform& p = *call.platform;
  if (p.kind != Platform::Kind::kCuda) {
    return NotModelled(profile, p,
                       "transformers' attention off CUDA runs kernels not read here (torch_npu's "
                       "fused attention for the flash names on Ascend, ROCm's and XPU's builds), "
                       "and host tensors change which reads are device syncs");
  }
  switch (profile) {
    case Profile::kTfFlashAttention2:
    case Profile::kTfHubFlashAttn2:
      if (p.major >= 8) return absl::OkStatus();
      return NotModelled(profile, p,
                         "FlashAttention 2 runs on compute capability 8.0 and later; its "
                         "refusal of older GPUs is not modelled");
    case Profile::kTfFlashAttention3:
      if (p.major == 9) return absl::OkStatus();
      return NotModelled(profile, p,
                         "FlashAttention 3's kernels are modelled on Hopper (9.x) only");
    case Profile::kTfFlashAttention4:
      if (p.major == 9 || p.major == 10) return absl::OkStatus();
      return NotModelled(profile, p,
                         "flash_attn.cute's kernels are modelled on Hopper (9.x) and Blackwell "
                         "(10.x) only");
    default:  // sdpa, eager: torch's own operators
      return absl::OkStatus();
  }
}

}  // namespace varlen::internal
