// SGLang's calls as cases describe them: VisionAttention's two entries, its
// [T, H, D] layouts (batched [b, s, H, D] for flashinfer_cudnn alone), its
// forward metadata, and what a well-behaved model passes each backend.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "case_rules.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/engine_calls.h"

namespace varlen {
namespace {

using internal::PathError;
using internal::RowsOfGeometry;

absl::Status ValidateSglangCall(const CallSpec& c, const Geometry& g) {
  const std::string p = "$.call";
  if (c.layout == QLayout::kBatchedFusedQkv) {
    return PathError(p + ".layout",
                     "batched_fused_qkv is a vLLM layout: SGLang's layer hands "
                     "backends [T, H, D]");
  }
  if (c.layout == QLayout::kBatched && c.profile != Profile::kFlashinferCudnn) {
    return PathError(p + ".layout",
                     "batched [b, s, h, d] q is only accepted by flashinfer_cudnn (and vLLM)");
  }
  if (c.merged_heads) {
    return PathError(p + ".merged_heads",
                     "[bsz, seq_len, H * D] is vLLM's form of a batched layout: use an engine "
                     "\"vllm\" profile with layout \"batched\" or \"batched_fused_qkv\"");
  }
  if (c.vllm_metadata.has_value()) {
    return PathError(p + ".vllm_metadata", "vLLM's builders serve vLLM profiles only");
  }
  if (c.entry == Entry::kTower) {
    return PathError(p + ".entry",
                     "\"tower\" is transformers' entry (the tower's grid_thw); SGLang's are "
                     "\"direct\" and \"layer\"");
  }
  if (c.rotary && c.entry != Entry::kLayer) {
    return PathError(p + ".rotary",
                     "rotary embeddings are applied by the layer: use entry \"layer\"");
  }
  if (c.sdpa.softmax_scale.has_value()) {
    if (c.entry == Entry::kLayer) {
      return PathError(p + ".sdpa.softmax_scale",
                       "the layer constructs sdpa with its own softmax_scale: spell it as "
                       "kwargs.softmax_scale");
    }
    if (!std::isfinite(*c.sdpa.softmax_scale)) {
      return PathError(p + ".sdpa.softmax_scale", "the construction scale must be finite");
    }
  }
  if (c.entry == Entry::kLayer) {
    const int64_t tokens = g.total_tokens();
    const int64_t bsz = c.bsz.value_or(1);
    if (tokens == 0) {
      return PathError(p + ".entry",
                       "the attention layer fails before any backend on an empty batch; use "
                       "entry \"direct\" for zero tokens");
    }
    if (c.layout == QLayout::kBatched) {
      return PathError(p + ".layout", "the attention layer always hands backends [T, H, D]");
    }
    if (const int64_t seq_len = c.seq_len.value_or(tokens / bsz); seq_len * bsz != tokens) {
      return PathError(p + ".seq_len",
                       absl::StrCat("bsz=", bsz, " x seq_len=", seq_len,
                                    ": the layer derives both from x, so their product must equal ",
                                    tokens, " (", RowsOfGeometry(g), ")"));
    }
  }
  return absl::OkStatus();
}

bool SglangCanCarry(Profile profile, const Geometry& g) {
  switch (profile) {
    case Profile::kFlashinferCudnn:
      return g.head_dim_v == g.head_dim && g.num_heads == g.num_kv_heads;
    case Profile::kSdpa:
      return g.head_dim_v == g.head_dim && (g.num_kv_heads == 1 || g.num_kv_heads == g.num_heads);
    case Profile::kAscendAttn:
      return g.head_dim_v == g.head_dim;
    case Profile::kAmxAttn:
      return !g.softmax_scale.has_value();  // SGLang passes its kernel no scale
    default:
      return true;
  }
}

// The kernels that read strides (the flash_attn_varlen_func family,
// triton_attn), with one head dim for q, k and v.
bool SglangTakesFusedQkv(Profile profile, const Geometry& g) {
  return profile != Profile::kFlashinferCudnn && profile != Profile::kSdpa &&
         profile != Profile::kAscendAttn && g.head_dim_v == g.head_dim;
}

void SetCorrectSglangCall(Case* c, Profile profile, bool prepared, Entry entry) {
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  // On the device q, k and v live on, as a model's own code makes them.
  const ArgLiteral cu = ArgLiteral::IntTensor(offsets, DType::kInt32, c->QkvDevice());
  if (profile == Profile::kFlashinferCudnn) {
    MetadataSpec m;
    m.builder = MetadataSpec::Builder::kFlashinferCudnn;
    m.cu_seqlens = cu;
    m.elem_per_token = g.num_heads * g.head_dim;
    call.forward_metadata = m;
  } else if (profile == Profile::kSdpa) {
    call.cu_seqlens = cu;
    call.sdpa.flatten_batch = true;  // one batch item holding every sequence
  } else if (prepared) {
    MetadataSpec m;
    m.builder = MetadataSpec::Builder::kPlain;
    m.cu_seqlens = cu;
    call.forward_metadata = m;
    // amx_attn never reads metadata, xpu_attn not since 0.5.18: both get the
    // same offsets as cu_seqlens too.
    if (profile == Profile::kAmxAttn || profile == Profile::kXpuAttn) call.cu_seqlens = cu;
  } else if (profile == Profile::kAscendAttn) {
    call.cu_seqlens = cu;  // the NPU kernel takes no max_seqlen
  } else {
    call.cu_seqlens = cu;
    call.kwargs.emplace_back("max_seqlen", ArgLiteral::Int(g.longest()));
  }
  // A scale other than the default travels as a direct caller passes it: as
  // a keyword, and to sdpa also at construction (it ignores the keyword).
  if (g.softmax_scale.has_value() && entry == Entry::kDirect) {
    call.kwargs.emplace_back("softmax_scale", ArgLiteral::Float(*g.softmax_scale));
    if (profile == Profile::kSdpa) call.sdpa.softmax_scale = g.softmax_scale;
  }
}

}  // namespace

const EngineCalls& SglangCalls() {
  static const EngineCalls kCalls = {.validate = &ValidateSglangCall,
                                     .can_carry = &SglangCanCarry,
                                     .takes_fused_qkv = &SglangTakesFusedQkv,
                                     .fused_layout = QLayout::kFusedQkv,
                                     .set_correct_call = &SetCorrectSglangCall,
                                     .takes_forward_metadata = true};
  return kCalls;
}

}  // namespace varlen
