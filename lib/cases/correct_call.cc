#include "varlen/cases/correct_call.h"

#include <algorithm>

namespace varlen {

std::vector<int64_t> OffsetsOf(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> offsets = {0};
  for (int64_t length : lengths) offsets.push_back(offsets.back() + length);
  return offsets;
}

bool ProfileCanCarry(Profile profile, const Geometry& g) {
  switch (profile) {
    case Profile::kFlashinferCudnn:
      return g.head_dim_v == g.head_dim && g.num_heads == g.num_kv_heads;
    case Profile::kSdpa:
      return g.head_dim_v == g.head_dim && (g.num_kv_heads == 1 || g.num_kv_heads == g.num_heads);
    case Profile::kAscendAttn:
      return g.head_dim_v == g.head_dim;
    case Profile::kAmxAttn:
      return !g.softmax_scale.has_value();  // SGLang passes its kernel no scale
    case Profile::kFa3:
    case Profile::kFa4:
    case Profile::kAiterAttn:
    case Profile::kXpuAttn:
    case Profile::kTritonAttn:
      return true;
    // vLLM: one head_size for q, k and v, and at least one sequence (the
    // kernels refuse an empty batch; torch.cat an empty split).
    case Profile::kVllmFlashinfer:
      return g.head_dim_v == g.head_dim && g.num_heads == g.num_kv_heads && !g.seq_lens.empty();
    case Profile::kVllmFlashAttnFa2:
    case Profile::kVllmFlashAttnFa3:
    case Profile::kVllmTritonAttn:
    case Profile::kVllmTorchSdpa:
      return g.head_dim_v == g.head_dim && !g.seq_lens.empty();
  }
  return false;
}

bool ProfileTakesFusedQkv(Profile profile, const Geometry& g) {
  return profile != Profile::kFlashinferCudnn && profile != Profile::kSdpa &&
         profile != Profile::kAscendAttn && g.head_dim_v == g.head_dim;
}

namespace {

// What a vLLM model passes: [1, T, H, D] views (FLASHINFER's v a column view
// of the fused projection, which its offsets assume), and either the
// builders' keywords or cu_seqlens with a 0-d host max_seqlen.
void SetCorrectVllmCall(Case* c, Profile profile, bool prepared) {
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
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

void SetCorrectCall(Case* c, Profile profile, bool prepared, Entry entry) {
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  call = CallSpec();
  call.profile = profile;
  call.entry = entry;
  if (EngineOf(profile) == Engine::kVllm) {
    // The layer's scale is the geometry's; vLLM has one entry.
    call.entry = Entry::kDirect;
    SetCorrectVllmCall(c, profile, prepared);
    Expectation e;
    e.outcome = Expectation::Outcome::kSuccess;
    c->expect = e;
    return;
  }
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const ArgLiteral cu = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  const int64_t longest = g.longest();
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
    call.kwargs.emplace_back("max_seqlen", ArgLiteral::Int(longest));
  }
  // A scale other than the default travels as a direct caller passes it: as
  // a keyword, and to sdpa also at construction (it ignores the keyword).
  if (g.softmax_scale.has_value() && entry == Entry::kDirect) {
    call.kwargs.emplace_back("softmax_scale", ArgLiteral::Float(*g.softmax_scale));
    if (profile == Profile::kSdpa) call.sdpa.softmax_scale = g.softmax_scale;
  }
  Expectation e;
  e.outcome = Expectation::Outcome::kSuccess;
  c->expect = e;
}

}  // namespace varlen
