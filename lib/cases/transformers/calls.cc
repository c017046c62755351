// transformers' calls as cases describe them: VisionAttention.forward (entry
// "layer": cu_seqlens and the tower's keywords such as max_seqlen) and the
// attention interface function (entry "direct": attention_mask, scaling,
// cu_seq_lens_q/k, max_length_q/k, is_causal as keywords), with the layer's
// [T, H, D] projections as q, k and v, and what a tower passes each.

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "case_rules.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/engine_calls.h"

namespace varlen {
namespace {

using internal::PathError;

absl::Status ValidateTransformersCall(const CallSpec& c, const Geometry& g) {
  const std::string p = "$.call";
  if (c.layout != QLayout::kPacked && c.layout != QLayout::kFusedQkv) {
    return PathError(p + ".layout",
                     "transformers' vision layer projects q, k and v as [T, H, D]: use "
                     "\"packed\" or \"fused_qkv\"");
  }
  if (c.merged_heads || c.graph_mode || c.sdpa != SdpaOptions{} || c.bsz.has_value() ||
      c.seq_len.has_value()) {
    return PathError(p, "merged_heads, graph_mode, sdpa, bsz and seq_len are other engines'");
  }
  if (c.forward_metadata.has_value() || c.vllm_metadata.has_value()) {
    return PathError(p, "forward_metadata and vllm_metadata are other engines'");
  }
  if (c.entry != Entry::kDirect && g.num_kv_heads != g.num_heads) {
    return PathError("$.geometry.num_kv_heads",
                     "VisionAttention projects q, k and v with num_heads heads each: through the "
                     "layer, num_kv_heads equals num_heads");
  }
  if (c.entry == Entry::kTower) {
    const bool has_grid = std::any_of(c.kwargs.begin(), c.kwargs.end(),
                                      [](const auto& kv) { return kv.first == "grid_thw"; });
    if (!has_grid) {
      return PathError(p + ".kwargs.grid_thw",
                       "the tower makes cu_seqlens from grid_thw ([images, 3]: t, h, w): give it "
                       "in kwargs, e.g. {\"tensor\": [1, 4, 8], \"dtype\": \"int64\", "
                       "\"device\": \"cuda\", \"shape\": [1, 3]}");
    }
    if (c.cu_seqlens.kind != ArgLiteral::Kind::kNone) {
      return PathError(p + ".cu_seqlens",
                       "the tower makes its own cu_seqlens: a precomputed one is the tower's "
                       "keyword, spell it in kwargs");
    }
    if (!g.padding.empty()) {
      return PathError("$.geometry.padding",
                       "a tower's rows are its grid's patches: a tower call has no padding rows");
    }
  }
  if (c.entry == Entry::kDirect) {
    if (c.rotary) {
      return PathError(p + ".rotary",
                       "rotary embeddings are applied by the layer: use entry \"layer\"");
    }
    if (c.cu_seqlens.kind != ArgLiteral::Kind::kNone) {
      return PathError(p + ".cu_seqlens",
                       "the attention interface takes cu_seq_lens_q and cu_seq_lens_k as "
                       "keywords: spell them in kwargs (cu_seqlens is the layer's argument)");
    }
  }
  return absl::OkStatus();
}

bool IsFlashName(Profile profile) {
  return ProfileName(profile).find("flash") != absl::string_view::npos;
}

int64_t NonEmptySequences(const Geometry& g) {
  return std::count_if(g.seq_lens.begin(), g.seq_lens.end(), [](int64_t n) { return n > 0; });
}

// One head size for q, k and v (one qkv projection), and at least one
// token. The layer's scale is head_dim**-0.5: another intended scale is the
// interface's `scaling`, which SDPA and eager take for one sequence only.
bool TransformersCanCarry(Profile profile, const Geometry& g) {
  return g.head_dim_v == g.head_dim && g.num_heads == g.num_kv_heads && g.total_tokens() > 0 &&
         (!g.softmax_scale.has_value() || IsFlashName(profile) || NonEmptySequences(g) == 1);
}

bool TransformersTakesFusedQkv(Profile, const Geometry& g) { return g.head_dim_v == g.head_dim; }

}  // namespace

ArgLiteral FrameGridOf(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < lengths.size();) {
    const int64_t length = lengths[i];
    size_t end = i;
    while (end < lengths.size() && lengths[end] == length) ++end;
    if (length > 0) {
      int64_t h = static_cast<int64_t>(std::sqrt(static_cast<double>(length)));
      while (h > 1 && (h * h > length || length % h != 0)) --h;
      rows.insert(rows.end(), {static_cast<int64_t>(end - i), h, length / h});
    }
    i = end;
  }
  ArgLiteral grid = ArgLiteral::IntTensor(rows, DType::kInt64, Device::kCuda);
  grid.tensor.shape = Shape{static_cast<int64_t>(rows.size() / 3), 3};
  return grid;
}

TowerWindows OneWindowPerFrame(const ArgLiteral& grid) {
  int64_t side = 1;
  for (size_t i = 0; i + 2 < grid.tensor.ints.size(); i += 3) {
    side = std::max({side, grid.tensor.ints[i + 1], grid.tensor.ints[i + 2]});
  }
  return TowerWindows{.window_size = side + 1, .patch_size = 1, .spatial_merge_size = 1};
}

namespace {

// What a tower passes: int32 offsets on the device, one per frame (a grid
// never makes an empty one), through the layer with the tower's
// precomputed int max when `prepared`; or the interface call the layer
// makes, the one way to another scale than the layer's. SDPA and eager over
// several sequences are only correct through the layer, which splits them.
void SetCorrectTransformersCall(Case* c, Profile profile, bool prepared, Entry entry) {
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  std::vector<int64_t> lengths;
  for (int64_t length : g.seq_lens) {
    if (length > 0) lengths.push_back(length);
  }
  const ArgLiteral cu = ArgLiteral::IntTensor(OffsetsOf(lengths), DType::kInt32, Device::kCuda);
  call.layout = QLayout::kPacked;
  const bool direct = entry == Entry::kDirect || g.softmax_scale.has_value();
  if (direct && (IsFlashName(profile) || lengths.size() == 1)) {
    call.entry = Entry::kDirect;
  } else {
    call.entry = entry == Entry::kTower && !direct ? Entry::kTower : Entry::kLayer;
  }
  if (call.entry == Entry::kTower) {
    // The precomputed max every band takes (4.57.6 and 5.14.1 pass it on
    // unread); a precomputed cu_seqlens is 5.x's alone.
    call.kwargs.emplace_back("grid_thw", FrameGridOf(lengths));
    if (prepared) call.kwargs.emplace_back("max_seqlen", ArgLiteral::Int(g.longest()));
    return;
  }
  if (call.entry == Entry::kLayer) {
    call.cu_seqlens = cu;
    if (prepared) call.kwargs.emplace_back("max_seqlen", ArgLiteral::Int(g.longest()));
    return;
  }
  call.kwargs.emplace_back("attention_mask", ArgLiteral::None());
  call.kwargs.emplace_back(
      "scaling",
      ArgLiteral::Float(g.softmax_scale.value_or(std::pow(static_cast<double>(g.head_dim), -0.5))));
  call.kwargs.emplace_back("dropout", ArgLiteral::Float(0.0));
  if (IsFlashName(profile)) {
    call.kwargs.emplace_back("cu_seq_lens_q", cu);
    call.kwargs.emplace_back("cu_seq_lens_k", cu);
    call.kwargs.emplace_back("max_length_q", ArgLiteral::Int(g.longest()));
    call.kwargs.emplace_back("max_length_k", ArgLiteral::Int(g.longest()));
  }
  ArgLiteral is_causal;
  is_causal.kind = ArgLiteral::Kind::kBool;
  call.kwargs.emplace_back("is_causal", is_causal);
}

}  // namespace

const EngineCalls& TransformersCalls() {
  static const EngineCalls kCalls = {.validate = &ValidateTransformersCall,
                                     .can_carry = &TransformersCanCarry,
                                     .takes_fused_qkv = &TransformersTakesFusedQkv,
                                     .fused_layout = QLayout::kFusedQkv,
                                     .set_correct_call = &SetCorrectTransformersCall,
                                     .takes_forward_metadata = false};
  return kCalls;
}

}  // namespace varlen
