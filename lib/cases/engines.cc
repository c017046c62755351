#include "varlen/cases/engines.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/correct_call.h"
#include "varlen/contract/vllm/metadata.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

// Backend families across the engines: one profile of each engine, or none.
// A profile's counterparts are those of the first family holding it.
struct Family {
  std::optional<Profile> sglang, vllm, transformers;

  std::optional<Profile> Of(Engine engine) const {
    switch (engine) {
      case Engine::kSglang:
        return sglang;
      case Engine::kVllm:
        return vllm;
      case Engine::kTransformers:
        return transformers;
    }
    return std::nullopt;
  }
};

// SGLang has no FlashAttention 2 vision backend: fa3 stands for it.
constexpr Family kFamilies[] = {
    {Profile::kFa3, Profile::kVllmFlashAttnFa3, Profile::kTfFlashAttention3},
    {Profile::kFa3, Profile::kVllmFlashAttnFa2, Profile::kTfFlashAttention2},
    {Profile::kFa3, Profile::kVllmFlashAttnFa2, Profile::kTfHubFlashAttn2},
    {Profile::kFa4, std::nullopt, Profile::kTfFlashAttention4},
    {Profile::kTritonAttn, Profile::kVllmTritonAttn, std::nullopt},
    {Profile::kSdpa, Profile::kVllmTorchSdpa, Profile::kTfSdpa},
    {Profile::kSdpa, Profile::kVllmTorchSdpa, Profile::kTfEager},
    {Profile::kFlashinferCudnn, Profile::kVllmFlashinfer, std::nullopt},
};

ArgLiteral LiteralOfValue(const Value& value) {
  return value.is_none() ? ArgLiteral::None()
                         : ArgLiteral::Tensor(LiteralOfTensor(value.as_tensor()));
}

std::optional<ArgLiteral> TakeKwarg(CallSpec* call, const std::string& key) {
  for (auto it = call->kwargs.begin(); it != call->kwargs.end(); ++it) {
    if (it->first == key) {
      ArgLiteral value = std::move(it->second);
      call->kwargs.erase(it);
      return value;
    }
  }
  return std::nullopt;
}

void SetKwargUnlessNone(CallSpec* call, const std::string& key, ArgLiteral value) {
  TakeKwarg(call, key);
  if (value.kind != ArgLiteral::Kind::kNone) call->kwargs.emplace_back(key, std::move(value));
}

// vLLM -> the others: the builders' keywords as the tensors they make, q
// with its heads apart and without the batch dimension.
absl::Status FromVllm(const Case& c, Profile target, CounterpartCall* out) {
  CallSpec& call = out->counterpart.call;
  if (call.vllm_metadata.has_value()) {
    const VllmMetadataSpec& m = *call.vllm_metadata;
    const TensorLiteral& cu = m.cu_seqlens.tensor;
    VllmMetadataOptions options;
    options.hidden_size = m.hidden_size.value_or(c.geometry.num_heads * c.geometry.head_dim);
    options.tp_size = m.tp_size;
    options.fp8_padded_hidden_size = m.fp8_padded_hidden_size;
    VARLEN_ASSIGN_OR_RETURN(
        VllmEncoderMetadata metadata,
        PrepareVllmEncoderMetadata(c.call.profile, MakeTensor(cu), options, m.device, c.mode));
    call.cu_seqlens = LiteralOfValue(metadata.cu_seqlens);
    SetKwargUnlessNone(&call, "max_seqlen", LiteralOfValue(metadata.max_seqlen));
    SetKwargUnlessNone(&call, "sequence_lengths", LiteralOfValue(metadata.sequence_lengths));
    call.vllm_metadata.reset();
  }
  if (call.merged_heads) {
    out->notes.push_back("merged_heads: the other engines take q with its heads apart");
    call.merged_heads = false;
  }
  if (call.layout == QLayout::kBatched || call.layout == QLayout::kBatchedFusedQkv) {
    out->notes.push_back(
        "layout: SGLang's backends and transformers' layer take q as [T, H, D]; the batch "
        "dimension is dropped");
    call.layout = call.layout == QLayout::kBatched ? QLayout::kPacked : QLayout::kFusedQkv;
    if (target == Profile::kFlashinferCudnn && call.layout == QLayout::kPacked) {
      call.layout = QLayout::kBatched;  // flashinfer_cudnn takes [b, s, h, d] as well
    } else {
      call.bsz.reset();
      call.seq_len.reset();
    }
  }
  return absl::OkStatus();
}

// transformers' attention interface -> a backend's keywords: its offsets
// and max as cu_seqlens and max_seqlen, its other keywords dropped.
void FromTransformers(CounterpartCall* out) {
  CallSpec& call = out->counterpart.call;
  if (call.entry != Entry::kDirect) return;
  if (std::optional<ArgLiteral> cu = TakeKwarg(&call, "cu_seq_lens_q")) call.cu_seqlens = *cu;
  if (std::optional<ArgLiteral> max = TakeKwarg(&call, "max_length_q")) {
    SetKwargUnlessNone(&call, "max_seqlen", *max);
  }
  std::vector<std::string> dropped;
  for (const char* key :
       {"cu_seq_lens_k", "max_length_k", "attention_mask", "scaling", "dropout", "is_causal"}) {
    if (TakeKwarg(&call, key).has_value()) dropped.push_back(key);
  }
  out->notes.push_back(absl::StrCat(
      "entry: transformers' attention interface; cu_seq_lens_q and max_length_q are passed as "
      "cu_seqlens and max_seqlen",
      dropped.empty() ? "" : absl::StrCat(", ", absl::StrJoin(dropped, ", "), " dropped")));
}

void ToVllm(CounterpartCall* out) {
  CallSpec& call = out->counterpart.call;
  if (call.entry == Entry::kLayer) {
    out->notes.push_back(
        "entry: vLLM's MMEncoderAttention.forward takes the caller's keywords "
        "as given (the layer of SGLang or transformers adds its own)");
  }
  if (call.graph_mode || call.rotary || call.sdpa != SdpaOptions{}) {
    out->notes.push_back("graph_mode, rotary and the sdpa options are not vLLM's: dropped");
  }
  if (call.layout == QLayout::kPacked || call.layout == QLayout::kFusedQkv) {
    out->notes.push_back(
        "layout: q, k and v as the other engines take them, [T, H, D]; "
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
}

// A model moving to transformers calls its VisionAttention: the layer, with
// cu_seqlens and the tower's max_seqlen.
absl::Status ToTransformers(const Case& c, CounterpartCall* out) {
  if (c.geometry.num_kv_heads != c.geometry.num_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.geometry.num_heads, " query heads and ", c.geometry.num_kv_heads,
        " key/value heads: transformers' VisionAttention projects q, k and v with the same "
        "heads, so the call has no counterpart there"));
  }
  CallSpec& call = out->counterpart.call;
  if (call.forward_metadata.has_value()) {
    out->notes.push_back(
        "forward_metadata: SGLang's prepared metadata; transformers' layer takes cu_seqlens "
        "alone");
    call.forward_metadata.reset();
  }
  if (call.graph_mode || call.sdpa != SdpaOptions{}) {
    out->notes.push_back("graph_mode and the sdpa options are SGLang's: dropped");
  }
  std::vector<std::string> dropped;
  for (const auto& [key, value] : call.kwargs) {
    if (key != "max_seqlen") dropped.push_back(key);
  }
  if (!dropped.empty()) {
    out->notes.push_back(absl::StrCat("keywords ", absl::StrJoin(dropped, ", "),
                                      ": not VisionAttention's, dropped"));
  }
  std::erase_if(call.kwargs, [](const auto& item) { return item.first != "max_seqlen"; });
  if (call.entry == Entry::kDirect) {
    out->notes.push_back(
        "entry: a model moving to transformers calls its VisionAttention.forward (the layer)");
  }
  call.entry = Entry::kLayer;
  call.graph_mode = false;
  call.sdpa = SdpaOptions{};
  call.bsz.reset();
  call.seq_len.reset();
  return absl::OkStatus();
}

std::string FamiliesText() {
  return "fa3, FLASH_ATTN/fa3 and flash_attention_3; FLASH_ATTN/fa2, flash_attention_2 and "
         "kernels-community/flash-attn2 (fa3 in SGLang); fa4 and flash_attention_4; "
         "triton_attn and TRITON_ATTN; sdpa, TORCH_SDPA and transformers' sdpa and eager; "
         "flashinfer_cudnn and FLASHINFER";
}

}  // namespace

std::optional<Profile> CounterpartProfile(Profile profile, Engine target) {
  const Engine from = EngineOf(profile);
  for (const Family& family : kFamilies) {
    if (family.Of(from) == profile) return family.Of(target);
  }
  return std::nullopt;
}

absl::StatusOr<CounterpartCall> CounterpartCase(const Case& c, Engine target) {
  if (c.call.entry == Entry::kTower) {
    return absl::InvalidArgumentError(
        "entry \"tower\": transformers' tower makes cu_seqlens from grid_thw, and no other "
        "engine's tower is modelled; the layer call it makes (entry \"layer\" with the tower's "
        "cu_seqlens) has counterparts");
  }
  const std::optional<Profile> other = CounterpartProfile(c.call.profile, target);
  if (!other.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QualifiedProfileName(c.call.profile), " has no modelled counterpart in ",
                     ModelOf(target).title, " (families: ", FamiliesText(), ")"));
  }
  CounterpartCall out;
  Case& t = out.counterpart;
  t = c;
  t.name = absl::StrCat(c.name, ".", EngineName(target));
  t.expect.reset();
  t.warmup.clear();
  t.version.reset();
  CallSpec& call = t.call;
  call.profile = *other;
  if (c.engine() == Engine::kVllm) VARLEN_RETURN_IF_ERROR(FromVllm(c, *other, &out));
  if (c.engine() == Engine::kTransformers) FromTransformers(&out);
  switch (target) {
    case Engine::kVllm:
      ToVllm(&out);
      break;
    case Engine::kTransformers:
      VARLEN_RETURN_IF_ERROR(ToTransformers(c, &out));
      break;
    case Engine::kSglang:
      // One item of many sequences.
      if (*other == Profile::kSdpa && c.engine() != Engine::kSglang) {
        call.sdpa.flatten_batch = true;
      }
      break;
  }
  if (absl::Status valid = ValidateCase(t); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", EngineName(target),
                                                   " counterpart of this call is not a valid "
                                                   "case: ",
                                                   valid.message()));
  }
  return out;
}

}  // namespace varlen
