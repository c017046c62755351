// SGLang's entry: VisionAttention.forward, which reshapes q, k and v and
// always passes its keywords to the backend of the configured profile, and
// the dispatch to that profile's resolver (SglangModel's hooks).

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// The keyword arguments the backend's **kwargs receive. VisionAttention
// always passes attention_mask (None for vision encoders), sequence_lengths,
// max_seqlen and output_ws (None when the caller did not), the softmax_scale
// it was built with (a case spells it as the softmax_scale kwarg),
// window_size and s_aux.
Kwargs BackendKwargs(const AttentionCall& call) {
  if (call.entry == Entry::kDirect) return call.kwargs;
  Kwargs kwargs;
  kwargs.set("attention_mask", Value::None());
  kwargs.set("sequence_lengths", call.kwargs.get("sequence_lengths"));
  kwargs.set("max_seqlen", call.kwargs.get("max_seqlen"));
  kwargs.set("output_ws", call.kwargs.get("output_ws"));
  kwargs.set("softmax_scale", call.kwargs.get("softmax_scale"));
  kwargs.set("window_size", Value::List({Value::Int(-1), Value::Int(-1)}));
  kwargs.set("s_aux", Value::None());
  return kwargs;
}

template <typename T>
absl::StatusOr<ResolvedArgs> Wrap(absl::StatusOr<T> args) {
  if (!args.ok()) return args.status();
  ResolvedArgs resolved;
  resolved.args = *std::move(args);
  return resolved;
}

absl::StatusOr<ResolvedArgs> Dispatch(const ResolveContext& ctx, Profile profile) {
  switch (profile) {
    case Profile::kFlashinferCudnn:
      return Wrap(ResolveFlashinferCudnn(ctx));
    case Profile::kFa3:
    case Profile::kFa4:
    case Profile::kAiterAttn:
    case Profile::kAmxAttn:
    case Profile::kXpuAttn:
      return Wrap(ResolveFlashVarlen(ctx, profile));
    case Profile::kAscendAttn:
      return Wrap(ResolveAscend(ctx));
    case Profile::kTritonAttn:
      return Wrap(ResolveTriton(ctx));
    case Profile::kSdpa:
      return Wrap(ResolveSdpa(ctx));
    default:
      return absl::InternalError(
          absl::StrCat(QualifiedProfileName(profile), " is not a profile of SGLang"));
  }
}

// STRIDED_QKV_BACKENDS: the backends that read q, k and v through explicit
// strides.
bool ReadsExplicitStrides(Profile profile) {
  return profile == Profile::kFa3 || profile == Profile::kFa4 || profile == Profile::kTritonAttn ||
         profile == Profile::kAmxAttn;
}

// The q, k and v VisionAttention hands the backend: [b*s, h, d]; contiguous
// copies unless this version passes strided views to this backend; rotary
// embeddings (applied after that step) return new dense q and k.
AttentionCall AsLayerSeesIt(const AttentionCall& call, Profile profile,
                            const SglangBehavior& sglang, std::vector<std::string>* notes) {
  AttentionCall seen = call;
  // Before STRIDED_QKV_BACKENDS, the layer skipped .contiguous() on CPU with
  // AMX alone.
  const bool pass_strided = sglang.layer_passes_strided_qkv ? ReadsExplicitStrides(profile)
                                                            : profile == Profile::kAmxAttn;
  for (Tensor* t : {&seen.q, &seen.k, &seen.v}) {
    const bool rotated = call.rotary && t != &seen.v;
    if (!t->is_contiguous() && (rotated || !pass_strided)) {
      notes->push_back(absl::StrCat("layer: ",
                                    t == &seen.q   ? "q"
                                    : t == &seen.k ? "k"
                                                   : "v",
                                    rotated
                                        ? " replaced by the dense output of the rotary embedding"
                                        : " made contiguous (a copy)"));
    }
    if (rotated || !pass_strided) *t = t->Contiguous();
    *t = FlattenBatch(*t);
  }
  if (pass_strided && !seen.v.is_contiguous()) {
    notes->push_back(
        "layer: strided views of the fused qkv projection passed on (pass_strided_qkv)");
  }
  return seen;
}

// An unread keyword hardened mode lets through: one that describes what the
// backend derives itself (the layer hands these to every backend), or the
// full attention every backend computes.
bool HarmlessUnread(absl::string_view key, const Value& value) {
  return key == "max_seqlen" || key == "sequence_lengths" || key == "output_ws" ||
         (key == "window_size" && IsFullAttentionWindow(value)) ||
         (key == "s_aux" && value.is_none());
}

// The caller's keywords that nothing read. Through SGLang's layer, the
// layer reads sequence_lengths, max_seqlen and output_ws from its **kwargs
// (and hands them on) and softmax_scale spells its own; any other keyword it
// swallows. The keywords the layer adds are its own business.
std::vector<std::string> UnreadKeywords(const AttentionCall& call, const ResolveContext& ctx) {
  if (call.entry == Entry::kDirect) return ctx.kwargs.NeverLookedUp();
  std::vector<std::string> unread;
  for (const auto& [key, value] : call.kwargs.items()) {
    if (key != "sequence_lengths" && key != "max_seqlen" && key != "output_ws" &&
        key != "softmax_scale") {
      unread.push_back(key);
    }
  }
  return unread;
}

}  // namespace

absl::StatusOr<ResolvedArgs> ResolveSglangCall(const AttentionCall& call, Profile profile,
                                               Mode mode, Resolution* record) {
  // Hardened mode is version-independent: it follows the latest layer.
  const SglangBehavior& sglang =
      BehaviorOf(mode == Mode::kHardened ? kLatestSglangVersion : call.version.sglang());
  const AttentionCall seen =
      call.entry == Entry::kLayer ? AsLayerSeesIt(call, profile, sglang, &record->notes) : call;
  const ResolveContext ctx{seen, LookedUpKwargs(BackendKwargs(seen)), mode, sglang, &record->notes};
  absl::StatusOr<ResolvedArgs> args = Dispatch(ctx, profile);
  if (!args.ok()) return args;
  // Only a call that went through has read all it will read.
  record->unread_keywords = UnreadKeywords(call, ctx);
  // forward(..., **kwargs) swallows any keyword: hardened mode refuses one
  // that asks for something.
  const auto refused = std::find_if(
      record->unread_keywords.begin(), record->unread_keywords.end(),
      [&](const std::string& key) { return !HarmlessUnread(key, call.kwargs.get(key)); });
  if (mode == Mode::kHardened && refused != record->unread_keywords.end()) {
    const std::string& key = *refused;
    // window_size and s_aux ask for another attention than this backend
    // computes: dropping them is a wrong result, not a no-op.
    const bool variant = key == "window_size" || key == "s_aux";
    return PythonError(
        PyErrorKind::kTypeError,
        absl::StrCat(key, "=", call.kwargs.get(key).Repr(), ": ", ProfileName(profile),
                     variant ? " never reads this keyword, so it would compute full attention "
                               "instead (fa3 and xpu_attn hand window_size and s_aux to their "
                               "kernel)"
                             : " never reads this keyword, so it would change nothing (check "
                               "its spelling, or leave it out)"));
  }
  args->q = seen.q;
  args->k = seen.k;
  args->v = seen.v;
  return args;
}

AttentionCall SglangBackendCall(const AttentionCall& call, Profile profile) {
  if (call.entry == Entry::kDirect) return call;
  std::vector<std::string> notes;
  AttentionCall seen = AsLayerSeesIt(call, profile, BehaviorOf(call.version.sglang()), &notes);
  seen.kwargs = BackendKwargs(seen);
  seen.entry = Entry::kDirect;
  return seen;
}

double SglangDefaultSoftmaxScale(Profile profile, int64_t head_dim) {
  const double d = static_cast<double>(head_dim);
  switch (profile) {
    case Profile::kFlashinferCudnn:
    case Profile::kFa3:
    case Profile::kAiterAttn:
    case Profile::kAscendAttn:
    case Profile::kXpuAttn:
      return std::pow(d, -0.5);
    case Profile::kTritonAttn:
      return 1.0 / std::pow(d, 0.5);
    default:  // sdpa, fa4, amx_attn
      return 1.0 / std::sqrt(d);
  }
}

}  // namespace varlen::internal
