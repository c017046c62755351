// File: varlen/contract/sglang/version.h
// -----------------------------------------------------------------------------
//
// The SGLang versions faithful mode models, and the few steps in which they
// differ. Faithful resolution, the attention layer and backend selection
// read every version-dependent step from one SglangBehavior, so a version is
// data, not a fork of the resolvers. Hardened mode is version-independent.
//
//   0026249  sgl-project/sglang 00262495044993539b2740746aaa531e62f377ab, the
//            commit the contract document was written from
//   0.5.23   the release on PyPI (sglang==0.5.23)
//
// docs/contract.md lists every difference between the two vision.py files,
// the rule it touches and the test or corpus case that pins it.

#ifndef VARLEN_CONTRACT_SGLANG_VERSION_H_
#define VARLEN_CONTRACT_SGLANG_VERSION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace varlen {

// Oldest first, in the order of the engine's EngineModel::versions
// (engine.h), whose names they are.
enum class SglangVersion {
  k0026249,  // the documented commit
  k0_5_23,   // the latest release
};

// What a case runs under when it names no version.
inline constexpr SglangVersion kLatestSglangVersion = SglangVersion::k0_5_23;

absl::string_view SglangVersionName(SglangVersion version);  // "0026249", "0.5.23"
// Accepts the names above (and the full commit hash for 0026249).
absl::StatusOr<SglangVersion> ParseSglangVersion(absl::string_view name);

// The behaviour that differs between versions, one field per difference.
struct SglangBehavior {
  // VisionTritonAttention without metadata or graph list: sequence lengths
  // derived from cu_seqlens are moved to q's device as int32
  // (`seq_lens.to(q.device, torch.int32)`), as given sequence_lengths are.
  // Before, derived lengths reached the kernel on cu_seqlens' device and in
  // its dtype.
  bool triton_moves_derived_seq_lens = false;
  // VisionAttention with use_qkv_parallel hands the backends of
  // STRIDED_QKV_BACKENDS (fa3, fa4, triton_attn, amx_attn) the strided
  // column views of the fused qkv projection (`pass_strided_qkv`), and makes
  // q, k and v contiguous only for the others. Before, it made them
  // contiguous for every backend except on CPU with AMX.
  bool layer_passes_strided_qkv = false;
  // _determine_attention_backend on CUDA: capability 10.3 defaults to fa4
  // like the rest of sm10x (before: triton_attn).
  bool sm103_defaults_to_fa4 = false;
  // _determine_attention_backend on XPU: always xpu_attn (before:
  // triton_attn unless use_intel_xpu_backend()).
  bool xpu_defaults_to_xpu_attn = false;
  // VisionAscendAttention drops per-image padding (q has more rows than
  // cu_seqlens[-1]) before the fused kernel, which then no longer fails its
  // queryT check.
  bool ascend_unpads_padded_items = false;
  // VisionFlash4Attention takes a list cu_seqlens as the graph runner's
  // [cu_seqlens, max_seqlen], in graph mode or not. Before, a list went to
  // resolve_seqlens and failed its tensor assertion.
  bool fa4_reads_list = false;
  // VisionIntelXPUAttention reads forward_metadata (cu_seqlens, max_seqlen)
  // and the max_seqlen keyword (resolve_precomputed_max_seqlen). Without
  // this, it ignores both and derives the maximum with resolve_max_seqlen
  // (a host sync per call unless cu_seqlens is a filled SingletonCache).
  bool xpu_reads_metadata = false;
};

const SglangBehavior& BehaviorOf(SglangVersion version);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_SGLANG_VERSION_H_
