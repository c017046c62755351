// SGLang's calls for the generators and the call properties: a wild call
// is already SGLang's shape; the well-formed spellings of its keywords and
// prepared metadata, and the corruptions of the max and of
// flashinfer_cudnn's elements per token.

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine_generators.h"
#include "varlen/cases/correct_call.h"

namespace varlen::internal {
namespace {

void MakeSglangCall(Case*) {}

// Every well-formed spelling of c's arguments in c's calling convention that
// the contract resolves to the same kernel arguments: the forms of
// max_seqlen and cu_seqlens that resolve_precomputed_max_seqlen and the
// casts accept, prepared metadata against keyword arguments, and both
// entries.
std::vector<CallForm> SglangWellFormedForms(const Case& c) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const int64_t longest = g.longest();
  std::vector<CallForm> forms;
  auto add = [&](std::string label, bool prepared, Entry entry, auto&& edit) {
    if (entry == Entry::kLayer && g.total_tokens() == 0) return;  // the layer reshapes q
    Case form = c;
    SetCorrectCall(&form, profile, prepared, entry);
    edit(&form.call);
    forms.push_back(
        {absl::StrCat(label, entry == Entry::kLayer ? ", through the layer" : ""), form.call});
  };
  auto as_is = [](CallSpec*) {};
  for (const Entry entry : {Entry::kDirect, Entry::kLayer}) {
    add("the default spelling", /*prepared=*/false, entry, as_is);
    if (profile == Profile::kSdpa) {
      add("cu_seqlens int64 on the host", false, entry, [&](CallSpec* call) {
        call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt64, Device::kCpu);
      });
      continue;
    }
    if (profile == Profile::kFlashinferCudnn) continue;  // builder metadata is its one input
    add("prepared metadata", /*prepared=*/true, entry, as_is);
    add("prepared metadata with max_seqlen", true, entry,
        [&](CallSpec* call) { call->forward_metadata->max_seqlen = ArgLiteral::Int(longest); });
    add("max_seqlen as a host int64 tensor", false, entry, [&](CallSpec* call) {
      SetKwarg(call, "max_seqlen", ArgLiteral::IntTensor({longest}, DType::kInt64, Device::kCpu));
    });
    add("max_seqlen as a device int32 tensor", false, entry, [&](CallSpec* call) {
      SetKwarg(call, "max_seqlen", ArgLiteral::IntTensor({longest}, DType::kInt32, Device::kCuda));
    });
    if (g.total_tokens() > 0) {  // the maximum of cu_seqlens=[0] is an error
      add("max_seqlen None", false, entry,
          [&](CallSpec* call) { SetKwarg(call, "max_seqlen", ArgLiteral::None()); });
    }
    if (profile != Profile::kTritonAttn) {  // triton_attn passes cu_seqlens on as given
      add("cu_seqlens int64", false, entry, [&](CallSpec* call) {
        call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt64, Device::kCuda);
      });
      add("cu_seqlens on the host", false, entry, [&](CallSpec* call) {
        call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCpu);
      });
    }
  }
  return forms;
}

void SetSglangOffsets(CallSpec* call, const std::vector<int64_t>& offsets) {
  const ArgLiteral value = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  if (call->forward_metadata.has_value()) {
    call->forward_metadata->cu_seqlens = value;
  } else {
    call->cu_seqlens = value;
  }
}

void AddSglangCorruptions(const Case& c, const AddCorruption& add) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  const int64_t longest = g.longest();
  const bool has_kwargs = profile != Profile::kSdpa && profile != Profile::kFlashinferCudnn;
  if (has_kwargs && longest > 0) {
    add("max_seqlen one below the longest sequence", false,
        [longest](CallSpec* call) { SetKwarg(call, "max_seqlen", ArgLiteral::Int(longest - 1)); });
    add("prepared max_seqlen one below the longest sequence", true, [longest](CallSpec* call) {
      call->forward_metadata->max_seqlen = ArgLiteral::Int(longest - 1);
    });
  }
  if (profile == Profile::kFlashinferCudnn) {
    const int64_t width = g.num_heads * g.head_dim;
    for (const int64_t wrong : {width + g.head_dim, g.head_dim, 2 * width}) {
      if (wrong == width) continue;
      add(absl::StrCat("elem_per_token ", wrong, " instead of ", width), true,
          [wrong](CallSpec* call) { call->forward_metadata->elem_per_token = wrong; });
    }
  }
}

}  // namespace

const EngineGenerators& SglangGenerators() {
  static const EngineGenerators kGenerators = {.make_wild_call = &MakeSglangCall,
                                               .well_formed_forms = &SglangWellFormedForms,
                                               .set_offsets = &SetSglangOffsets,
                                               .add_corruptions = &AddSglangCorruptions};
  return kGenerators;
}

}  // namespace varlen::internal
