#include "varlen/contract/resolve.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/core/status.h"

namespace varlen {
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

absl::StatusOr<ResolvedArgs> Dispatch(const internal::ResolveContext& ctx, Profile profile) {
  switch (profile) {
    case Profile::kFlashinferCudnn:
      return Wrap(internal::ResolveFlashinferCudnn(ctx));
    case Profile::kFa3:
    case Profile::kFa4:
    case Profile::kAiterAttn:
    case Profile::kAmxAttn:
    case Profile::kXpuAttn:
      return Wrap(internal::ResolveFlashVarlen(ctx, profile));
    case Profile::kAscendAttn:
      return Wrap(internal::ResolveAscend(ctx));
    case Profile::kTritonAttn:
      return Wrap(internal::ResolveTriton(ctx));
    case Profile::kSdpa:
      return Wrap(internal::ResolveSdpa(ctx));
    case Profile::kVllmFlashAttnFa2:
    case Profile::kVllmFlashAttnFa3:
    case Profile::kVllmTritonAttn:
    case Profile::kVllmTorchSdpa:
    case Profile::kVllmFlashinfer:
      return internal::ResolveVllm(ctx, profile);
  }
  return absl::InternalError("unknown profile");
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
         (key == "window_size" && internal::IsFullAttentionWindow(value)) ||
         (key == "s_aux" && value.is_none());
}

// The caller's keywords that nothing read. Through SGLang's layer, the
// layer reads sequence_lengths, max_seqlen and output_ws from its **kwargs
// (and hands them on) and softmax_scale spells its own; any other keyword it
// swallows. The keywords the layer adds are its own business.
std::vector<std::string> UnreadKeywords(const AttentionCall& call,
                                        const internal::ResolveContext& ctx, bool vllm) {
  if (vllm || call.entry == Entry::kDirect) return ctx.kwargs.NeverLookedUp();
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

std::vector<std::string> internal::LookedUpKwargs::NeverLookedUp() const {
  std::vector<std::string> unread;
  for (const auto& [key, value] : kwargs_.items()) {
    if (!looked_up_.contains(key)) unread.push_back(key);
  }
  return unread;
}

double DefaultSoftmaxScale(Profile profile, int64_t head_dim) {
  const double d = static_cast<double>(head_dim);
  switch (profile) {
    case Profile::kFlashinferCudnn:
    case Profile::kFa3:
    case Profile::kAiterAttn:
    case Profile::kAscendAttn:
    case Profile::kXpuAttn:
      return std::pow(d, -0.5);
    case Profile::kTritonAttn:
    case Profile::kVllmFlashAttnFa2:
    case Profile::kVllmFlashAttnFa3:
    case Profile::kVllmTritonAttn:
    case Profile::kVllmTorchSdpa:
    case Profile::kVllmFlashinfer:
      return 1.0 / std::pow(d, 0.5);
    case Profile::kSdpa:
    case Profile::kFa4:
    case Profile::kAmxAttn:
      return 1.0 / std::sqrt(d);
  }
  return 1.0 / std::sqrt(d);
}

DeviceEventCounts Resolution::counts() const { return CountDeviceEvents(events); }

AttentionCall BackendCallOf(const AttentionCall& call, Profile profile) {
  if (call.entry == Entry::kDirect || EngineOf(profile) == Engine::kVllm) return call;
  std::vector<std::string> notes;
  AttentionCall seen = AsLayerSeesIt(call, profile, BehaviorOf(call.version.sglang()), &notes);
  seen.kwargs = BackendKwargs(seen);
  seen.entry = Entry::kDirect;
  return seen;
}

Resolution Resolve(const AttentionCall& call, Profile profile, Mode mode) {
  Resolution resolution;
  ScopedDeviceLedger ledger;
  // Hardened mode is version-independent: it follows the latest layer.
  const SglangBehavior& sglang =
      BehaviorOf(mode == Mode::kHardened ? kLatestSglangVersion : call.version.sglang());
  // vLLM's MMEncoderAttention is its only entry: it takes the caller's
  // arguments as they are, and the resolver says what the kernel receives.
  const bool vllm = EngineOf(profile) == Engine::kVllm;
  const AttentionCall seen = call.entry == Entry::kLayer && !vllm
                                 ? AsLayerSeesIt(call, profile, sglang, &resolution.notes)
                                 : call;
  const internal::ResolveContext ctx{
      seen, internal::LookedUpKwargs(vllm ? seen.kwargs : BackendKwargs(seen)), mode, sglang,
      &resolution.notes};
  absl::StatusOr<ResolvedArgs> args = Dispatch(ctx, profile);
  // Only a call that went through has read all it will read.
  if (args.ok()) resolution.unread_keywords = UnreadKeywords(call, ctx, vllm);
  // SGLang's forward(..., **kwargs) swallows any keyword; vLLM's names its
  // three (and refuses others), which models pass whatever the backend.
  const auto refused = std::find_if(
      resolution.unread_keywords.begin(), resolution.unread_keywords.end(),
      [&](const std::string& key) { return !HarmlessUnread(key, call.kwargs.get(key)); });
  if (mode == Mode::kHardened && !vllm && refused != resolution.unread_keywords.end()) {
    const std::string& key = *refused;
    args =
        PythonError(PyErrorKind::kTypeError,
                    absl::StrCat(key, "=", call.kwargs.get(key).Repr(), ": ", ProfileName(profile),
                                 " never reads this keyword, so it would change nothing (check its "
                                 "spelling, or leave it out)"));
  }
  resolution.status = args.status();
  if (args.ok()) {
    args->profile = profile;
    if (!vllm) {
      args->q = seen.q;
      args->k = seen.k;
      args->v = seen.v;
    }
    resolution.args = *std::move(args);
  }
  resolution.events = ledger.events();
  return resolution;
}

}  // namespace varlen
