// vLLM's calls for the generators and the call properties:
// MMEncoderAttention's one entry, its layouts and the encoder metadata
// builders' keywords, their well-formed spellings, and the corruptions of
// the max and of FLASHINFER's builder.

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine_generators.h"
#include "varlen/cases/correct_call.h"

namespace varlen::internal {
namespace {

// A wild case's call made a vLLM call: vLLM's one entry, none of SGLang's
// switches, q as [1, T, H, D] or as drawn, sometimes the builders' keywords.
void MakeVllmCall(Case* c) {
  CallSpec& call = c->call;
  // MMEncoderAttention has one head_size: a v of another one (viewed into
  // an error, except by FLASHINFER, which passes it on) now and then.
  if (*rc::gen::inRange(0, 4) != 0) c->geometry.head_dim_v = c->geometry.head_dim;
  c->version.reset();
  if (*rc::gen::arbitrary<bool>()) c->version = EngineVersion::Latest(Engine::kVllm);
  call.entry = Entry::kDirect;
  call.graph_mode = false;
  call.rotary = false;
  call.sdpa = SdpaOptions{};
  call.bsz.reset();
  call.seq_len.reset();
  // SGLang's keywords and metadata, which vLLM refuses first, now and then.
  if (*rc::gen::inRange(0, 8) != 0) {
    call.forward_metadata.reset();
    std::erase_if(call.kwargs, [](const auto& kv) {
      return kv.first == "output_ws" || kv.first == "softmax_scale";
    });
  }
  if (*rc::gen::inRange(0, 3) != 0) {
    call.layout = *rc::gen::element(QLayout::kBatched, QLayout::kBatchedFusedQkv);
    if (c->geometry.head_dim_v != c->geometry.head_dim) call.layout = UnfusedLayout(call.layout);
    call.seq_len = c->geometry.total_tokens();
    call.merged_heads = *rc::gen::inRange(0, 4) == 0;  // [b, s, H * D]
  }
  if (*rc::gen::inRange(0, 3) == 0) {
    VllmMetadataSpec m;
    m.cu_seqlens =
        ArgLiteral::IntTensor(OffsetsOf(c->geometry.seq_lens),
                              *rc::gen::element(DType::kInt32, DType::kInt64), Device::kCpu);
    if (*rc::gen::arbitrary<bool>()) m.tp_size = *rc::gen::inRange<int64_t>(1, 3);
    call.vllm_metadata = m;
    call.cu_seqlens = ArgLiteral::None();
    std::erase_if(call.kwargs, [](const auto& kv) {
      return kv.first == "max_seqlen" || kv.first == "sequence_lengths";
    });
  }
}

// vLLM's well-formed spellings: cu_seqlens with max_seqlen as a 0-d tensor
// (on the host or the device, int32 or int64), the builders' keywords,
// sequence_lengths passed too (ignored, or checked to agree), uniform
// offsets for one sequence, and for TORCH_SDPA any integer cu_seqlens.
std::vector<CallForm> VllmWellFormedForms(const Case& c) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  std::vector<CallForm> forms;
  auto add = [&](std::string label, bool prepared, auto&& edit) {
    Case form = c;
    SetCorrectCall(&form, profile, prepared);
    edit(&form.call);
    forms.push_back({std::move(label), form.call});
  };
  auto max_tensor = [&](DType dtype, Device device) {
    return ArgLiteral::IntScalarTensor(g.longest(), dtype, device);
  };
  add("the default spelling", /*prepared=*/false, [](CallSpec*) {});
  if (profile == Profile::kVllmFlashinfer) return forms;  // the builders are its one input
  add("the encoder metadata builders' keywords", true, [](CallSpec*) {});
  add("sequence_lengths passed too", false, [&](CallSpec* call) {
    SetKwarg(call, "sequence_lengths",
             ArgLiteral::IntTensor(g.seq_lens, DType::kInt32, Device::kCuda));
  });
  if (profile == Profile::kVllmTorchSdpa) {
    add("cu_seqlens int64 on the host", false, [&](CallSpec* call) {
      call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt64, Device::kCpu);
    });
    return forms;
  }
  add("max_seqlen as a host int64 tensor", false, [&](CallSpec* call) {
    SetKwarg(call, "max_seqlen", max_tensor(DType::kInt64, Device::kCpu));
  });
  add("max_seqlen as a device int32 tensor", false, [&](CallSpec* call) {
    SetKwarg(call, "max_seqlen", max_tensor(DType::kInt32, Device::kCuda));
  });
  if (g.seq_lens.size() == 1 && g.total_tokens() > 0) {
    add("cu_seqlens and max_seqlen None (one sequence)", false, [&](CallSpec* call) {
      call->cu_seqlens = ArgLiteral::None();
      std::erase_if(call->kwargs, [](const auto& kv) { return kv.first == "max_seqlen"; });
    });
  }
  return forms;
}

// The builders' offsets are host int32 where the call uses them.
void SetVllmOffsets(CallSpec* call, const std::vector<int64_t>& offsets) {
  if (call->vllm_metadata.has_value()) {
    call->vllm_metadata->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCpu);
  } else {
    call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  }
}

void AddVllmCorruptions(const Case& c, const AddCorruption& add) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  const int64_t longest = g.longest();
  if (longest > 0 && profile != Profile::kVllmFlashinfer && profile != Profile::kVllmTorchSdpa) {
    add("max_seqlen one below the longest sequence", false, [longest](CallSpec* call) {
      SetKwarg(call, "max_seqlen",
               ArgLiteral::IntScalarTensor(longest - 1, DType::kInt32, Device::kCpu));
    });
  }
  if (profile == Profile::kVllmFlashinfer) {
    const int64_t width = g.num_heads * g.head_dim;
    add(absl::StrCat("hidden_size ", 2 * width, " instead of ", width), true,
        [width](CallSpec* call) { call->vllm_metadata->hidden_size = 2 * width; });
    add("v dense where the offsets assume the fused projection", true,
        [](CallSpec* call) { call->layout = QLayout::kBatched; });
  }
}

}  // namespace

const EngineGenerators& VllmGenerators() {
  static const EngineGenerators kGenerators = {.make_wild_call = &MakeVllmCall,
                                               .well_formed_forms = &VllmWellFormedForms,
                                               .set_offsets = &SetVllmOffsets,
                                               .add_corruptions = &AddVllmCorruptions};
  return kGenerators;
}

}  // namespace varlen::internal
