// Resolution for the backends that call a flash_attn_varlen_func (contract
// §2.3, §2.6, §2.8, §2.9): fa3, fa4, aiter_attn, amx_attn and xpu_attn. They
// share one shape, prepared metadata or a list or cu_seqlens cast to int32
// on q's device, and differ in a few steps, one FlashVarlenRules field each.

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

struct FlashVarlenRules {
  absl::string_view kernel;  // the function SGLang calls
  bool reads_metadata = true;
  enum class List {
    kNever,        // a list goes to resolve_seqlens (and fails its assertion)
    kInGraphMode,  // SGLANG_VIT_ENABLE_CUDA_GRAPH: cu_seqlens must be [cu, max]
    kAnyList,      // a list is [cu, max], graph mode or not
  } list = List::kNever;
  // amx_attn fills None and SingletonCache itself and calls .to() on
  // anything else; the others call resolve_seqlens.
  bool own_cu_seqlens_sources = false;
  enum class Max {
    kPrecomputed,  // resolve_precomputed_max_seqlen(cu, max_seqlen kwarg)
    kReduce,       // (cu[1:] - cu[:-1]).max().item(), the kwarg ignored
    kCached,       // resolve_max_seqlen(source, cu), the kwarg ignored
  } max = Max::kPrecomputed;
  bool passes_scale = true;  // amx_attn's call has no softmax_scale
  // fa3 and xpu_attn hand kwargs' window_size and s_aux (as sinks) to their
  // kernel (vision.py: VisionFlash3Attention, VisionIntelXPUAttention).
  bool passes_window = false;
};

FlashVarlenRules RulesFor(Profile profile, const SglangBehavior& sglang) {
  using List = FlashVarlenRules::List;
  using Max = FlashVarlenRules::Max;
  switch (profile) {
    case Profile::kFa4:
      return {.kernel = "flash_attn_varlen_func_fa4",
              .list = sglang.fa4_reads_list ? List::kAnyList : List::kNever};
    case Profile::kAiterAttn:
      return {.kernel = "aiter.flash_attn_varlen_func", .max = Max::kReduce};
    case Profile::kAmxAttn:
      return {.kernel = "torch.ops.sgl_kernel.flash_attn_varlen_func",
              .reads_metadata = false,
              .own_cu_seqlens_sources = true,
              .max = Max::kReduce,
              .passes_scale = false};
    case Profile::kXpuAttn:
      return {.kernel = "sgl_kernel.flash_attn.flash_attn_varlen_func",
              .reads_metadata = sglang.xpu_reads_metadata,
              .max = sglang.xpu_reads_metadata ? Max::kPrecomputed : Max::kCached,
              .passes_window = true};
    default:
      return {
          .kernel = "flash_attn_varlen_func", .list = List::kInGraphMode, .passes_window = true};
  }
}

// What the kernel computes: vision.py reads `window_size = kwargs.get(
// "window_size", (-1, -1))` and `s_aux = kwargs.get("s_aux", None)`, and hands
// both on (s_aux as `sinks`, when not None). A window of two ints and sinks
// of one float per query head on q's device become the kernel's variant;
// FlashAttention's responses to other values were not read from a source, so
// faithful mode calls them not modelled, and hardened mode refuses them.
absl::StatusOr<AttentionVariant> KernelVariant(const ResolveContext& ctx,
                                               const FlashVarlenRules& rules) {
  AttentionVariant variant;
  if (!rules.passes_window) return variant;
  const Value window = ctx.kwargs.get("window_size");
  const Value sinks = ctx.kwargs.get("s_aux");
  auto refuse = [&](absl::string_view name, const Value& value, absl::string_view rule) {
    if (ctx.hardened()) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat(name, "=", value.Repr(), ": ", rule));
    }
    return absl::UnimplementedError(absl::StrCat(name, "=", value.Repr(), " reaches ", rules.kernel,
                                                 " (", rule,
                                                 "; the kernel's response is not modelled)"));
  };
  if (!IsFullAttentionWindow(window)) {
    const bool pair = window.kind() == Value::Kind::kList && window.as_list().size() == 2 &&
                      window.as_list()[0].kind() == Value::Kind::kInt &&
                      window.as_list()[1].kind() == Value::Kind::kInt;
    if (!pair) return refuse("window_size", window, "a window is a pair of ints (left, right)");
    variant.window_left = window.as_list()[0].as_int();
    variant.window_right = window.as_list()[1].as_int();
    if (ctx.hardened() && (variant.window_left < -1 || variant.window_right < -1)) {
      return refuse("window_size", window, "each bound is -1 (none) or at least 0");
    }
  }
  if (!sinks.is_none()) {
    const Tensor& q = ctx.call.q;
    const int64_t heads = q.dim() >= 2 ? q.size(q.dim() - 2) : -1;
    const bool one_per_head =
        sinks.is_tensor() && sinks.as_tensor().dim() == 1 && sinks.as_tensor().numel() == heads &&
        IsFloatingPoint(sinks.as_tensor().dtype()) && sinks.as_tensor().device() == q.device() &&
        sinks.as_tensor().is_contiguous();
    if (!one_per_head) {
      return refuse("s_aux", sinks,
                    absl::StrCat("sinks are a contiguous floating tensor of one logit per query "
                                 "head (",
                                 heads, ") on q's device"));
    }
    for (int64_t h = 0; h < heads; ++h) {
      const double sink = sinks.as_tensor().DoubleAtLogical(h);
      if (ctx.hardened() && (std::isnan(sink) || sink == std::numeric_limits<double>::infinity())) {
        return refuse("s_aux", sinks, "a sink is a logit, or -inf for none");
      }
      // Held as float32: a float64 sink past float's range is an infinity.
      variant.sinks.push_back(std::isnan(sink) ||
                                      std::fabs(sink) <= std::numeric_limits<float>::max()
                                  ? static_cast<float>(sink)
                                  : std::copysign(std::numeric_limits<float>::infinity(), sink));
    }
  }
  if (!variant.full()) ctx.Note(absl::StrCat(rules.kernel, " computes ", variant.Describe()));
  return variant;
}

FlashVarlenArgs::SglangEntry EntryOf(Profile profile) {
  switch (profile) {
    case Profile::kFa3:
      return FlashVarlenArgs::SglangEntry::kFa3;
    case Profile::kFa4:
      return FlashVarlenArgs::SglangEntry::kFa4;
    case Profile::kAiterAttn:
      return FlashVarlenArgs::SglangEntry::kAiter;
    case Profile::kAmxAttn:
      return FlashVarlenArgs::SglangEntry::kAmx;
    default:
      return FlashVarlenArgs::SglangEntry::kUnread;
  }
}

// amx_attn's cu_seqlens: None -> _get_cu_seqlens_for_shape; a SingletonCache
// -> its data (filled first when empty); anything else as given, then
// `.to(dtype=torch.int32)`, which only a tensor has.
absl::StatusOr<Tensor> AmxCuSeqlens(const AttentionCall& call) {
  Value cu = call.cu_seqlens;
  if (cu.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(Tensor uniform,
                            GetCuSeqlensForShape(call.bsz, call.seq_len, call.q.device()));
    cu = Value::FromTensor(uniform);
  } else if (cu.kind() == Value::Kind::kSingletonCache) {
    SingletonCache& cache = *cu.as_cache();
    if (!cache.data.has_value()) {
      VARLEN_ASSIGN_OR_RETURN(Tensor uniform,
                              GetCuSeqlensForShape(call.bsz, call.seq_len, call.q.device()));
      cache.set_data(uniform);
    }
    cu = Value::FromTensor(*cache.data);
  }
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kAttributeError,
                       absl::StrCat("'", cu.TypeName(), "' object has no attribute 'to'"));
  }
  return cu.as_tensor();
}

absl::StatusOr<int64_t> FaithfulMaxSeqlen(const ResolveContext& ctx, const FlashVarlenRules& rules,
                                          const Tensor& cu) {
  switch (rules.max) {
    case FlashVarlenRules::Max::kPrecomputed:
      return ResolvePrecomputedMaxSeqlen(cu, ctx.kwargs.get("max_seqlen"));
    case FlashVarlenRules::Max::kReduce:
      ctx.Note("max_seqlen: seq_lens.max().item(), any max_seqlen keyword ignored");
      return ResolvePrecomputedMaxSeqlen(cu, Value::None());
    case FlashVarlenRules::Max::kCached:
      ctx.Note("max_seqlen: resolve_max_seqlen(cu_seqlens, ...), any max_seqlen keyword ignored");
      return ResolveMaxSeqlen(ctx.call.cu_seqlens, cu);
  }
  return absl::InternalError("unknown max_seqlen rule");
}

absl::StatusOr<FlashVarlenArgs> ResolveFaithful(const ResolveContext& ctx, Profile profile,
                                                const FlashVarlenRules& rules) {
  using List = FlashVarlenRules::List;
  const AttentionCall& call = ctx.call;
  FlashVarlenArgs args;
  args.kernel = rules.kernel;
  args.sglang_entry = EntryOf(profile);
  const bool is_list = call.cu_seqlens.kind() == Value::Kind::kList;
  if (call.forward_metadata.has_value() && rules.reads_metadata) {
    ctx.Note("source: forward_metadata (cu_seqlens, max_seqlen)");
    args.cu_seqlens = call.forward_metadata->cu_seqlens;
    args.max_seqlen = call.forward_metadata->max_seqlen;
  } else if ((rules.list == List::kInGraphMode && call.graph_mode) ||
             (rules.list == List::kAnyList && is_list)) {
    if (rules.list == List::kInGraphMode) {
      VARLEN_RETURN_IF_ERROR(CheckSglangGraphList(call.cu_seqlens));
    }
    ctx.Note("source: the list [cu_seqlens, max_seqlen], passed on untouched");
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, ListItem(call.cu_seqlens, 0));
    VARLEN_ASSIGN_OR_RETURN(args.max_seqlen, ListItem(call.cu_seqlens, 1));
  } else {
    if (call.forward_metadata.has_value()) ctx.Note("forward_metadata ignored by this backend");
    Tensor cu;
    if (rules.own_cu_seqlens_sources) {
      ctx.Note("source: cu_seqlens (or uniform offsets), cast to int32 on q's device");
      VARLEN_ASSIGN_OR_RETURN(cu, AmxCuSeqlens(call));
    } else {
      ctx.Note("source: cu_seqlens via resolve_seqlens, cast to int32 on q's device");
      VARLEN_ASSIGN_OR_RETURN(
          cu, ResolveSeqlens(call.cu_seqlens, call.bsz, call.seq_len, call.q.device()));
    }
    cu = To(cu, cu.device(), DType::kInt32, "cu_seqlens.to(dtype=torch.int32)");
    cu = To(cu, call.q.device(), DType::kInt32, "cu_seqlens.to(q.device)");
    VARLEN_ASSIGN_OR_RETURN(const int64_t max, FaithfulMaxSeqlen(ctx, rules, cu));
    args.cu_seqlens = Value::FromTensor(cu);
    args.max_seqlen = Value::Int(max);
  }
  if (rules.passes_scale) {
    args.scale_argument = ctx.kwargs.get("softmax_scale");
    VARLEN_RETURN_IF_ERROR(ResolveKernelScale(ctx, profile, args.scale, args.scale_not_modelled));
  } else {
    if (!ctx.kwargs.get("softmax_scale").is_none()) {
      ctx.Note("softmax_scale ignored: the kernel is called without one and uses its default");
    }
    args.scale = DefaultSoftmaxScale(profile, call.q.size(call.q.dim() - 1));
  }
  VARLEN_ASSIGN_OR_RETURN(args.variant, KernelVariant(ctx, rules));
  return args;
}

// A backend that ignores the caller's softmax_scale (amx_attn) computes with
// its default: hardened mode refuses a different one rather than drop it.
absl::Status CheckScaleNotDropped(const ResolveContext& ctx, Profile profile, double used) {
  VARLEN_ASSIGN_OR_RETURN(const double asked, ResolveSoftmaxScale(ctx, profile));
  if (asked == used) return absl::OkStatus();
  return PythonError(PyErrorKind::kValueError,
                     absl::StrCat("softmax_scale=", ctx.kwargs.get("softmax_scale").Repr(), ": ",
                                  ProfileName(profile),
                                  " calls its kernel without a softmax_scale, so the kernel would "
                                  "use its default ",
                                  Value::Float(used).Repr(), " instead"));
}

absl::StatusOr<FlashVarlenArgs> ResolveHardened(const ResolveContext& ctx, Profile profile,
                                                const FlashVarlenRules& rules) {
  using List = FlashVarlenRules::List;
  const AttentionCall& call = ctx.call;
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, {.allow_strided = true}));
  TokenSourceRules source_rules;
  source_rules.reads_metadata = rules.reads_metadata;
  if (rules.list != List::kNever) {
    source_rules.list_layout = {"cu_seqlens", "max_seqlen"};
    source_rules.list_anytime = rules.list == List::kAnyList;
  }
  VARLEN_ASSIGN_OR_RETURN(TokenSource source,
                          ResolveHardenedTokenSource(ctx, tokens, source_rules));
  // These kernels read nothing but cu_seqlens and max_seqlen: any other
  // description of the sequences must agree with them.
  VARLEN_RETURN_IF_ERROR(
      CheckUnusedBoundariesAgree(ctx, source.checked.offsets, source.name, source.unused));
  FlashVarlenArgs args;
  args.kernel = rules.kernel;
  args.sglang_entry = EntryOf(profile);
  Value max_seqlen = source.max_seqlen;
  if (source.kind == TokenSource::Kind::kKwargs && rules.max != FlashVarlenRules::Max::kPrecomputed) {
    // The backend derives the maximum itself: a keyword cannot make it wrong.
    if (!max_seqlen.is_none()) ctx.Note("max_seqlen keyword ignored by this backend");
    max_seqlen = Value::None();
  }
  VARLEN_ASSIGN_OR_RETURN(
      int64_t max, CheckOrDeriveMaxSeqlen(ctx, max_seqlen, source.checked.longest, source.max_name));
  args.cu_seqlens = Value::FromTensor(source.checked.cu);
  args.max_seqlen = Value::Int(max);
  if (rules.passes_scale) {
    VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, profile));
  } else {
    args.scale = DefaultSoftmaxScale(profile, call.q.size(call.q.dim() - 1));
    VARLEN_RETURN_IF_ERROR(CheckScaleNotDropped(ctx, profile, args.scale));
  }
  VARLEN_ASSIGN_OR_RETURN(args.variant, KernelVariant(ctx, rules));
  return args;
}

}  // namespace

absl::StatusOr<FlashVarlenArgs> ResolveFlashVarlen(const ResolveContext& ctx, Profile profile) {
  const FlashVarlenRules rules = RulesFor(profile, ctx.sglang);
  return ctx.hardened() ? ResolveHardened(ctx, profile, rules)
                        : ResolveFaithful(ctx, profile, rules);
}

}  // namespace varlen::internal
