#include "varlen/cases/engines.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/correct_call.h"
#include "varlen/contract/vllm/metadata.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

constexpr std::pair<Profile, Profile> kCounterparts[] = {
    {Profile::kFa3, Profile::kVllmFlashAttnFa3},
    {Profile::kTritonAttn, Profile::kVllmTritonAttn},
    {Profile::kSdpa, Profile::kVllmTorchSdpa},
    {Profile::kFlashinferCudnn, Profile::kVllmFlashinfer},
};

ArgLiteral LiteralOfValue(const Value& value) {
  return value.is_none() ? ArgLiteral::None()
                         : ArgLiteral::Tensor(LiteralOfTensor(value.as_tensor()));
}

void SetKwarg(CallSpec* call, const std::string& key, ArgLiteral value) {
  std::erase_if(call->kwargs, [&](const auto& item) { return item.first == key; });
  if (value.kind != ArgLiteral::Kind::kNone) call->kwargs.emplace_back(key, std::move(value));
}

// vLLM -> SGLang: the builders' keywords as the tensors they make.
absl::Status SpellOutVllmMetadata(const Case& c, CallSpec* call) {
  if (!call->vllm_metadata.has_value()) return absl::OkStatus();
  const VllmMetadataSpec& m = *call->vllm_metadata;
  const TensorLiteral& cu = m.cu_seqlens.tensor;
  VllmMetadataOptions options;
  options.hidden_size = m.hidden_size.value_or(c.geometry.num_heads * c.geometry.head_dim);
  options.tp_size = m.tp_size;
  options.fp8_padded_hidden_size = m.fp8_padded_hidden_size;
  VARLEN_ASSIGN_OR_RETURN(
      VllmEncoderMetadata metadata,
      PrepareVllmEncoderMetadata(c.call.profile, MakeTensor(cu), options, m.device, c.mode));
  call->cu_seqlens = LiteralOfValue(metadata.cu_seqlens);
  SetKwarg(call, "max_seqlen", LiteralOfValue(metadata.max_seqlen));
  SetKwarg(call, "sequence_lengths", LiteralOfValue(metadata.sequence_lengths));
  call->vllm_metadata.reset();
  return absl::OkStatus();
}

}  // namespace

std::optional<Profile> CounterpartProfile(Profile profile) {
  if (profile == Profile::kVllmFlashAttnFa2) return Profile::kFa3;
  for (const auto& [sglang, vllm] : kCounterparts) {
    if (profile == sglang) return vllm;
    if (profile == vllm) return sglang;
  }
  return std::nullopt;
}

absl::StatusOr<CounterpartCall> CounterpartCase(const Case& c) {
  const std::optional<Profile> other = CounterpartProfile(c.call.profile);
  if (!other.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QualifiedProfileName(c.call.profile), " has no modelled counterpart in ",
                     c.engine() == Engine::kSglang ? "vLLM" : "SGLang",
                     " (counterparts: fa3, triton_attn, sdpa, flashinfer_cudnn and "
                     "FLASH_ATTN/fa2, FLASH_ATTN/fa3, TRITON_ATTN, TORCH_SDPA, FLASHINFER)"));
  }
  CounterpartCall out;
  Case& t = out.counterpart;
  t = c;
  t.name = absl::StrCat(c.name, ".", EngineName(EngineOf(*other)));
  t.expect.reset();
  t.warmup.clear();
  t.version.reset();
  CallSpec& call = t.call;
  call.profile = *other;
  if (EngineOf(*other) == Engine::kVllm) {
    if (call.entry == Entry::kLayer) {
      out.notes.push_back(
          "entry: vLLM's MMEncoderAttention.forward takes the caller's keywords "
          "as given (SGLang's layer adds the keys it always passes)");
    }
    if (call.graph_mode || call.rotary || call.sdpa != SdpaOptions{}) {
      out.notes.push_back("graph_mode, rotary and the sdpa options are SGLang's: dropped");
    }
    if (call.layout == QLayout::kPacked || call.layout == QLayout::kFusedQkv) {
      out.notes.push_back(
          "layout: q, k and v as SGLang's backends take them, [T, H, D]; "
          "MMEncoderAttention reads [b, s, H, D] (a model moving to vLLM "
          "adds the batch dimension)");
    }
    call.entry = Entry::kDirect;
    call.graph_mode = false;
    call.rotary = false;
    call.sdpa = SdpaOptions{};
    if (call.layout != QLayout::kBatched) {
      call.bsz.reset();
      call.seq_len.reset();
    }
  } else {
    VARLEN_RETURN_IF_ERROR(SpellOutVllmMetadata(c, &call));
    if (call.merged_heads) {
      out.notes.push_back("merged_heads: SGLang's backends take q with its heads apart");
      call.merged_heads = false;
    }
    if (call.layout == QLayout::kBatched || call.layout == QLayout::kBatchedFusedQkv) {
      out.notes.push_back(
          "layout: SGLang's backends take q as [T, H, D]; the batch dimension "
          "is dropped");
      call.layout = call.layout == QLayout::kBatched ? QLayout::kPacked : QLayout::kFusedQkv;
      if (*other == Profile::kFlashinferCudnn && call.layout == QLayout::kPacked) {
        call.layout = QLayout::kBatched;  // flashinfer_cudnn takes [b, s, h, d] as well
      } else {
        call.bsz.reset();
        call.seq_len.reset();
      }
    }
    if (*other == Profile::kSdpa) call.sdpa.flatten_batch = true;  // one item of many sequences
  }
  if (absl::Status valid = ValidateCase(t); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", EngineName(EngineOf(*other)),
                     " counterpart of this call is not a valid case: ", valid.message()));
  }
  return out;
}

}  // namespace varlen
