// transformers' two entries (docs/contract-transformers.md, H5-H6, H10) and
// TransformersModel's hooks:
//
//   layer   VisionAttention.forward(hidden_states, cu_seqlens, ..., **kwargs)
//           of the band: its flash gate, the max it computes or takes, and
//           the attention interface call it makes (or its split path);
//   direct  the attention interface function registered under the
//           implementation's name, called as a caller (or the layer) calls
//           it: fn(module, query, key, value, attention_mask, ..., **kwargs).
//
// A case's q, k and v are the layer's [T, H, D] projections; the interface
// receives them as [1, H, T, D] views, which the kernels' wrappers turn back
// into the same [T, H, D] views.

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_ops.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {

bool IsFlashName(Profile profile) { return absl::StrContains(ProfileName(profile), "flash"); }

namespace {

// The keywords VisionAttention passes the interface by name: a caller's
// **kwargs holding one of them is Python's "got multiple values".
constexpr absl::string_view kLayerKeywords[] = {"attention_mask", "scaling",       "dropout",
                                                "cu_seq_lens_q",  "cu_seq_lens_k", "max_length_q",
                                                "max_length_k",   "is_causal"};

// AttentionInterface's lookup by name: an unregistered name is a KeyError.
absl::Status CheckRegistered(const ResolveContext& ctx, Profile profile) {
  if (!ctx.hardened() && profile == Profile::kTfFlashAttention4 &&
      !TransformersBehaviorOf(ctx).registers_flash_attention_4) {
    return PythonError(PyErrorKind::kKeyError, "'flash_attention_4'");
  }
  return absl::OkStatus();
}

// The interface function registered under the profile's name, and the
// positional parameters it requires after (module, query, key, value).
struct InterfaceFunction {
  absl::string_view name;
  std::vector<absl::string_view> required;
};

InterfaceFunction FunctionOf(Profile profile) {
  if (IsFlashName(profile)) return {"flash_attention_forward", {"attention_mask"}};
  if (profile == Profile::kTfSdpa) return {"sdpa_attention_forward", {"attention_mask"}};
  return {"eager_attention_forward", {"attention_mask", "scaling"}};
}

// Python's binding of the required parameters a call leaves out.
absl::Status CheckRequired(const ResolveContext& ctx, const InterfaceFunction& fn) {
  std::vector<std::string> missing;
  for (absl::string_view name : fn.required) {
    if (!ctx.kwargs.contains(name)) missing.push_back(absl::StrCat("'", name, "'"));
  }
  if (missing.empty()) return absl::OkStatus();
  const std::string names =
      missing.size() == 1 ? missing[0] : absl::StrCat(missing[0], " and ", missing[1]);
  return PythonError(
      PyErrorKind::kTypeError,
      absl::StrCat(fn.name, "() missing ", missing.size(), " required positional argument",
                   missing.size() == 1 ? "" : "s", ": ", names));
}

Value KeywordOr(const ResolveContext& ctx, absl::string_view key, Value absent) {
  const Value* value = ctx.kwargs.find(key);
  return value == nullptr ? absent : *value;
}

// The attention interface called directly with the caller's keywords.
absl::StatusOr<ResolvedArgs> ResolveInterface(const ResolveContext& ctx, Profile profile) {
  VARLEN_RETURN_IF_ERROR(CheckRegistered(ctx, profile));
  const InterfaceFunction fn = FunctionOf(profile);
  VARLEN_RETURN_IF_ERROR(CheckRequired(ctx, fn));
  InterfaceCall in;
  in.attention_mask = ctx.kwargs.get("attention_mask");
  in.dropout = KeywordOr(ctx, "dropout", Value::Float(0.0));
  in.scaling = ctx.kwargs.get("scaling");
  in.is_causal = ctx.kwargs.get("is_causal");
  if (!IsFlashName(profile)) return ResolveDenseInterface(ctx, profile, in);
  in.cu_seq_lens_q = ctx.kwargs.get("cu_seq_lens_q");
  in.cu_seq_lens_k = ctx.kwargs.get("cu_seq_lens_k");
  in.max_length_q = ctx.kwargs.get("max_length_q");
  in.max_length_k = ctx.kwargs.get("max_length_k");
  return ResolveFlashInterface(ctx, profile, in);
}

}  // namespace

absl::StatusOr<Value> LayerMaxSeqlen(const ResolveContext& ctx, const Value& cu) {
  // 5.15.0 on: get_max_seqlen(cu_seqlens, config, kwargs), where a
  // precomputed value wins, whatever its type; else one .item() per tower
  // (PR #47170). 4.57.x to 5.14.x: (cu_seqlens[1:] - cu_seqlens[:-1]).max()
  // in every layer, a 0-d tensor on cu_seqlens' device; a caller's
  // max_seqlen falls into **kwargs, unread.
  const bool once_per_tower = TransformersBehaviorOf(ctx).caller_max_wins;
  if (once_per_tower) {
    if (Value given = ctx.kwargs.get("max_seqlen"); !given.is_none()) {
      ctx.Note("max_seqlen given: passed on as it is");
      return given;
    }
  }
  if (cu.is_none()) {
    return PythonError(PyErrorKind::kTypeError, "'NoneType' object is not subscriptable");
  }
  if (!cu.is_tensor()) return absl::UnimplementedError("transformers: a non-tensor cu_seqlens");
  VARLEN_ASSIGN_OR_RETURN(const Tensor diffs, SubtractShifted(cu.as_tensor()));
  VARLEN_ASSIGN_OR_RETURN(Tensor longest, Max(diffs));
  if (once_per_tower) return Item(longest, "(cu_seqlens[1:] - cu_seqlens[:-1]).max().item()");
  ctx.Note("max_seqlen = (cu_seqlens[1:] - cu_seqlens[:-1]).max(): a 0-d tensor");
  return Value::FromTensor(std::move(longest));
}

absl::Status CheckLayerKeywords(const ResolveContext& ctx) {
  for (absl::string_view key : kLayerKeywords) {
    if (!ctx.kwargs.contains(key)) continue;
    if (ctx.hardened()) {
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat(key,
                                      " is passed to VisionAttention.forward, which passes "
                                      "its own ",
                                      key, " to the attention function"));
    }
    return absl::UnimplementedError(
        absl::StrCat("transformers: ", key, " in the layer's **kwargs: not modelled"));
  }
  return absl::OkStatus();
}

bool TakesFlashPath(const ResolveContext& ctx, Profile profile) {
  return ctx.hardened() || TransformersBehaviorOf(ctx).substring_flash_gate
             ? IsFlashName(profile)
             : profile == Profile::kTfFlashAttention2;
}

namespace {

// Hardened: the layer's max is the caller's when it is right, else the
// longest sequence of the validated offsets.
absl::StatusOr<Value> HardenedLayerMax(const ResolveContext& ctx, const Value& cu) {
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("cu_seqlens is ", cu.Repr(), " (a ", cu.TypeName(),
                                    "): the layer takes a 1-d integer tensor of token offsets"));
  }
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets,
                          CheckTokenOffsets(cu.as_tensor(), "cu_seqlens", ctx.call.q.size(0)));
  const Longest longest = LongestOfOffsets(offsets, "cu_seqlens");
  VARLEN_ASSIGN_OR_RETURN(
      const int64_t max,
      CheckOrDeriveMaxSeqlen(ctx, ctx.kwargs.get("max_seqlen"), longest, "max_seqlen"));
  return Value::Int(max);
}

absl::StatusOr<ResolvedArgs> ResolveLayer(const ResolveContext& ctx, Profile profile) {
  VARLEN_RETURN_IF_ERROR(CheckRegistered(ctx, profile));
  VARLEN_RETURN_IF_ERROR(CheckLayerKeywords(ctx));
  const Value& cu = ctx.call.cu_seqlens;
  const double scaling = ModuleScaling(ctx.call.q.size(-1));
  if (!TakesFlashPath(ctx, profile)) {
    // 5.15.0 on pops a precomputed max_seqlen here too, and ignores it.
    if (ctx.hardened() || TransformersBehaviorOf(ctx).caller_max_wins) ctx.kwargs.get("max_seqlen");
    return ResolveSplit(ctx, profile, cu, scaling);
  }
  VARLEN_ASSIGN_OR_RETURN(const Value max,
                          ctx.hardened() ? HardenedLayerMax(ctx, cu) : LayerMaxSeqlen(ctx, cu));
  InterfaceCall in;
  in.scaling = Value::Float(scaling);
  in.dropout = Value::Float(0.0);
  in.cu_seq_lens_q = cu;
  in.cu_seq_lens_k = cu;
  in.max_length_q = max;
  in.max_length_k = max;
  in.is_causal = Value::Bool(false);
  return ResolveFlashInterface(ctx, profile, in);
}

}  // namespace

const TransformersBehavior& TransformersBehaviorOf(const ResolveContext& ctx) {
  return BehaviorOf(ctx.call.version.transformers());
}

absl::StatusOr<ResolvedArgs> ResolveTransformersCall(const AttentionCall& call, Profile profile,
                                                     Mode mode, Resolution* record) {
  if (call.entry == Entry::kTower) {
    VARLEN_ASSIGN_OR_RETURN(const AttentionCall layer,
                            TowerLayerCall(call, profile, mode, &record->notes));
    return ResolveTransformersCall(layer, profile, mode, record);
  }
  if (call.entry == Entry::kLayer && call.rotary) {
    // The rotary embedding makes q and k new dense tensors; v stays the
    // projection's view.
    AttentionCall rotated = call;
    rotated.q = call.q.Contiguous();
    rotated.k = call.k.Contiguous();
    rotated.rotary = false;
    record->notes.push_back("rotary embeddings: q and k dense");
    return ResolveTransformersCall(rotated, profile, mode, record);
  }
  const ResolveContext ctx{call, LookedUpKwargs(call.kwargs), mode,
                           BehaviorOf(kLatestSglangVersion), &record->notes};
  absl::StatusOr<ResolvedArgs> args =
      call.entry == Entry::kLayer ? ResolveLayer(ctx, profile) : ResolveInterface(ctx, profile);
  // The interface functions take **kwargs: what nothing read changed nothing.
  if (args.ok()) record->unread_keywords = ctx.kwargs.NeverLookedUp();
  return args;
}

// A call-level backend in transformers' convention is an attention
// function: it receives the call as the interface does.
AttentionCall TransformersBackendCall(const AttentionCall& call, Profile) { return call; }

// module.scaling = head_dim**-0.5, which the layer passes; the flash
// kernels' own default is the same expression.
double TransformersDefaultSoftmaxScale(Profile, int64_t head_dim) {
  return ModuleScaling(head_dim);
}

}  // namespace varlen::internal
