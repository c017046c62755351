// vLLM's calls as cases describe them: MMEncoderAttention.forward, its one
// entry, with [b, s, H, D] q, k and v (or [b, s, H * D]), the encoder
// metadata builders, and what a vLLM model passes each backend.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "case_rules.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/engine_calls.h"
#include "varlen/cases/limits.h"

namespace varlen {
namespace {

using internal::CheckRange;
using internal::PathError;
using internal::ValidateArg;

absl::Status ValidateVllmCall(const CallSpec& c, const Geometry&) {
  const std::string p = "$.call";
  if (c.merged_heads && c.layout != QLayout::kBatched && c.layout != QLayout::kBatchedFusedQkv) {
    return PathError(p + ".merged_heads",
                     "[bsz, seq_len, H * D] is vLLM's form of a batched layout: use layout "
                     "\"batched\" or \"batched_fused_qkv\"");
  }
  if (c.entry != Entry::kDirect) {
    return PathError(p + ".entry",
                     "vLLM has one entry, MMEncoderAttention.forward: leave "
                     "\"direct\"");
  }
  if (c.graph_mode || c.rotary || c.sdpa != SdpaOptions{}) {
    return PathError(p, "graph_mode, rotary and sdpa are SGLang's; a vLLM call has none");
  }
  if (!c.vllm_metadata.has_value()) return absl::OkStatus();
  const VllmMetadataSpec& m = *c.vllm_metadata;
  VARLEN_RETURN_IF_ERROR(ValidateArg(m.cu_seqlens, p + ".vllm_metadata.cu_seqlens"));
  if (m.cu_seqlens.kind != ArgLiteral::Kind::kTensor ||
      m.cu_seqlens.tensor.device != Device::kCpu || !IsIntegral(m.cu_seqlens.tensor.dtype) ||
      m.cu_seqlens.tensor.shape.has_value()) {
    return PathError(p + ".vllm_metadata.cu_seqlens",
                     "the builders take host token offsets: a 1-d int32 or int64 cpu tensor");
  }
  VARLEN_RETURN_IF_ERROR(
      CheckRange(p + ".vllm_metadata.tp_size", m.tp_size, 1, kMaxHeads, "tensor-parallel ranks"));
  for (const auto& [name, value] :
       {std::pair<const char*, std::optional<int64_t>>{"hidden_size", m.hidden_size},
        {"fp8_padded_hidden_size", m.fp8_padded_hidden_size}}) {
    if (value.has_value()) {
      VARLEN_RETURN_IF_ERROR(CheckRange(absl::StrCat(p, ".vllm_metadata.", name), *value, 1,
                                        kMaxTotalTokens, "elements per token"));
    }
  }
  for (const auto& [key, value] : c.kwargs) {
    if (key == "max_seqlen" || key == "sequence_lengths") {
      return PathError(absl::StrCat(p, ".kwargs.", key),
                       "vllm_metadata makes this keyword; give one or the other");
    }
  }
  if (c.cu_seqlens.kind != ArgLiteral::Kind::kNone) {
    return PathError(p + ".cu_seqlens", "vllm_metadata makes cu_seqlens; give one or the other");
  }
  return absl::OkStatus();
}

// One head_size for q, k and v, and at least one sequence (the kernels
// refuse an empty batch; torch.cat an empty split); FLASHINFER offsets q, k
// and v with one per-token width.
bool VllmCanCarry(Profile profile, const Geometry& g) {
  const bool common = g.head_dim_v == g.head_dim && !g.seq_lens.empty();
  if (profile == Profile::kVllmFlashinfer) return common && g.num_heads == g.num_kv_heads;
  return common;
}

bool VllmTakesFusedQkv(Profile, const Geometry& g) { return g.head_dim_v == g.head_dim; }

// What a vLLM model passes: [1, T, H, D] views (FLASHINFER's v a column view
// of the fused projection, which its offsets assume), and either the
// builders' keywords or cu_seqlens with a 0-d host max_seqlen. The layer's
// scale is the geometry's; vLLM has one entry.
void SetCorrectVllmCall(Case* c, Profile profile, bool prepared, Entry) {
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  call.entry = Entry::kDirect;
  // A model never packs an empty image; where FlashAttention 2 would read
  // one row per sequence (every image one patch, fewer key/value heads:
  // Dao-AILab/flash-attention#1537), leaving them out is what makes the
  // call correct.
  std::vector<int64_t> lengths = g.seq_lens;
  if (profile == Profile::kVllmFlashAttnFa2 && g.longest() == 1 && g.num_heads > g.num_kv_heads) {
    std::erase(lengths, 0);
  }
  const std::vector<int64_t> offsets = OffsetsOf(lengths);
  call.layout = profile == Profile::kVllmFlashinfer ? QLayout::kBatchedFusedQkv : QLayout::kBatched;
  call.seq_len = g.total_tokens();
  if (prepared || profile == Profile::kVllmFlashinfer) {
    VllmMetadataSpec m;
    m.cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCpu);
    call.vllm_metadata = m;
  } else {
    call.cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
    if (profile != Profile::kVllmTorchSdpa) {
      call.kwargs.emplace_back(
          "max_seqlen", ArgLiteral::IntScalarTensor(g.longest(), DType::kInt32, Device::kCpu));
    }
  }
}

}  // namespace

const EngineCalls& VllmCalls() {
  static const EngineCalls kCalls = {.validate = &ValidateVllmCall,
                                     .can_carry = &VllmCanCarry,
                                     .takes_fused_qkv = &VllmTakesFusedQkv,
                                     .fused_layout = QLayout::kBatchedFusedQkv,
                                     .set_correct_call = &SetCorrectVllmCall,
                                     .takes_forward_metadata = false};
  return kCalls;
}

}  // namespace varlen
