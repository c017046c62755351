// transformers' flash path (docs/contract-transformers.md, H7-H9):
// integrations/flash_attention.py's flash_attention_forward, then
// modeling_flash_attention_utils._flash_attention_forward's branches (paged,
// mask, all four varlen keywords, packed position_ids, dense) and
// _process_flash_attention_kwargs, to the Python binding of the kernel the
// implementation's name loads.
//
// Faithful mode lets through what transformers lets through: a caller's
// cu_seqlens and max unchecked, a 0-d tensor max to the kernel (converted
// only while tracing, which no case models), and a dense call over the whole
// pack when any of the four varlen keywords is None. Hardened mode refuses
// each of those, naming the keyword, its value and the rule.

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// The kernel the implementation's name loads, and how its Python binding
// takes an int argument.
struct FlashKernel {
  int fa_version = 2;         // 2 (flash_attn, the hub's flash-attn2), 3, or 4
  bool takes_dropout = true;  // FA2's signature has dropout_p; FA3's and FA4's do not
};

FlashKernel KernelOf(const ResolveContext& ctx, Profile profile) {
  if (!ctx.hardened() && !TransformersBehaviorOf(ctx).kernel_by_name) return {};
  switch (profile) {
    case Profile::kTfFlashAttention3:
      return {.fa_version = 3, .takes_dropout = false};
    case Profile::kTfFlashAttention4:
      return {.fa_version = 4, .takes_dropout = false};
    default:
      return {};
  }
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    default:
      return true;
  }
}

bool IsZero(const Value& v) {
  return v.is_none() || (v.kind() == Value::Kind::kFloat && v.as_float() == 0.0) ||
         (v.kind() == Value::Kind::kInt && v.as_int() == 0) ||
         (v.kind() == Value::Kind::kBool && !v.as_bool());
}

absl::Status NotModelled(absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat("transformers: ", what, ": not modelled"));
}

// The kernel's Python binding taking a max for its int argument: the
// torch op's argument parser converts a one-element integral tensor (a host
// read when it lives on the device); FA4's CuTe DSL refuses any tensor.
absl::StatusOr<Value> KernelIntArgument(const ResolveContext& ctx, const FlashKernel& kernel,
                                        const Value& max, absl::string_view argument) {
  switch (max.kind()) {
    case Value::Kind::kInt:
    case Value::Kind::kBool:
      return max;
    case Value::Kind::kTensor: {
      const Tensor& t = max.as_tensor();
      // FA4's interface asserts on its inputs first; the DSL then refuses
      // the tensor (the binding: dsl_max_seqlen_position).
      if (kernel.fa_version == 4) return max;
      if (t.numel() != 1 || IsFloatingPoint(t.dtype())) {
        return NotModelled(absl::StrCat(argument, "=", max.Repr(),
                                        " meets the op's int argument (the parser's message)"));
      }
      ctx.Note(absl::StrCat(argument, " a one-element tensor: the op's argument parser reads it"));
      return Item(t, absl::StrCat("int(", argument, ") by the op's argument parser"));
    }
    default:
      return NotModelled(absl::StrCat(argument, "=", max.Repr(), " (a ", max.TypeName(),
                                      ") at the kernel's int argument"));
  }
}

// softmax_scale=scaling: None is the kernel's own default, q.shape[-1] ** -0.5.
absl::StatusOr<double> KernelScale(const ResolveContext& ctx, const Value& scaling) {
  switch (scaling.kind()) {
    case Value::Kind::kNone:
      return std::pow(static_cast<double>(ctx.call.q.size(-1)), -0.5);
    case Value::Kind::kFloat:
      return scaling.as_float();
    case Value::Kind::kInt:
      return static_cast<double>(scaling.as_int());
    default:
      return NotModelled(absl::StrCat("scaling=", scaling.Repr()));
  }
}

// The attention variant flash_attention_forward's keywords ask the kernel
// for (integrations/flash_attention.py, then _process_flash_attention_kwargs,
// the same rules in every band): is_causal=True is causal=True (the top-left
// mask is FlashAttention < 2.1's only); sliding_window=w, when the packed
// keys outnumber it, is window_size=(w - 1, w - 1); s_aux reaches a kernel
// whose signature has s_aux or learnable_sink, and no other (FlashAttention
// 2 and 3 drop it). softcap caps the logits, which no ground truth holds.
absl::StatusOr<AttentionVariant> KernelVariant(const ResolveContext& ctx, const FlashKernel& kernel,
                                               const InterfaceCall& in) {
  AttentionVariant variant;
  if (Truthy(in.is_causal)) {
    variant.window_right = 0;
    ctx.Note(
        "is_causal=True reaches the kernel as causal=True: each row attends its own and "
        "earlier keys only");
  }
  if (const Value softcap = ctx.kwargs.get("softcap"); !softcap.is_none()) {
    return NotModelled(absl::StrCat("softcap=", softcap.Repr(), " (a cap on the logits)"));
  }
  if (const Value window = ctx.kwargs.get("sliding_window"); !window.is_none()) {
    if (window.kind() != Value::Kind::kInt || window.as_int() < 1) {
      return NotModelled(absl::StrCat("sliding_window=", window.Repr()));
    }
    const int64_t keys = ctx.call.k.size(0);
    if (keys > window.as_int()) {
      if (kernel.fa_version == 4) {
        return NotModelled("a window_size at FlashAttention 4's interface");
      }
      if (variant.causal()) return NotModelled("is_causal=True with a sliding_window");
      variant.window_left = variant.window_right = window.as_int() - 1;
      ctx.Note(absl::StrCat("sliding_window=", window.as_int(), " over ", keys,
                            " packed keys: window_size=(", variant.window_left, ", ",
                            variant.window_right, ") at the kernel"));
    } else {
      ctx.Note(absl::StrCat("sliding_window=", window.as_int(), " is not below the ", keys,
                            " packed keys: no window_size reaches the kernel"));
    }
  }
  if (const Value sinks = ctx.kwargs.Peek("s_aux"); !sinks.is_none()) {
    if (!sinks.is_tensor() || kernel.fa_version == 4) {
      ctx.kwargs.get("s_aux");  // it reaches the kernel, or raises on the way
      return NotModelled(
          absl::StrCat("s_aux=", sinks.Repr(),
                       kernel.fa_version == 4 ? " as FlashAttention 4's learnable_sink" : ""));
    }
    ctx.Note(absl::StrCat("s_aux: FlashAttention ", kernel.fa_version,
                          "'s signature has neither s_aux nor learnable_sink, so "
                          "_process_flash_attention_kwargs drops it (unread)"));
  }
  return variant;
}

ResolvedArgs WithInputs(const AttentionCall& call, FlashVarlenArgs args) {
  ResolvedArgs resolved;
  // [1, H, T, D] -> transpose(1, 2) -> reshape(T, H, D): views of the
  // caller's [T, H, D] tensors, with their strides.
  resolved.q = call.q;
  resolved.k = call.k;
  resolved.v = call.v;
  resolved.args = std::move(args);
  return resolved;
}

// The branches of _flash_attention_forward that no vision tower takes.
absl::Status CheckUnmodelledBranches(const ResolveContext& ctx, const InterfaceCall& in) {
  for (absl::string_view key : {"block_table", "k_cache", "v_cache"}) {
    if (!ctx.kwargs.get(key).is_none()) {
      return NotModelled(absl::StrCat("the paged branch (", key, " given)"));
    }
  }
  if (!in.attention_mask.is_none()) {
    return NotModelled("an attention_mask (_upad_input recomputes cu_seqlens from it)");
  }
  return absl::OkStatus();
}

absl::StatusOr<ResolvedArgs> FaithfulFlash(const ResolveContext& ctx, Profile profile,
                                           const InterfaceCall& in) {
  const AttentionCall& call = ctx.call;
  const FlashKernel kernel = KernelOf(ctx, profile);
  const Tensor& q = call.q;
  if (q.numel() == 0) return FlashZeroDimensionError();
  if (TransformersBehaviorOf(ctx).pads_value_to_query_head_dim && call.v.size(-1) != q.size(-1)) {
    return NotModelled(
        "a value head dim other than the query's (flash_attention_forward pads or crops v to "
        "it)");
  }
  if (q.dtype() == DType::kFloat32) {
    ctx.Note(
        "float32 q: cast to the target dtype, the module's first Linear weight's, which is "
        "float32 here: the kernel receives float32");
  }
  if (Truthy(in.is_causal) && in.is_causal.kind() != Value::Kind::kBool) {
    return NotModelled(absl::StrCat("is_causal=", in.is_causal.Repr(), ", not a bool"));
  }
  VARLEN_RETURN_IF_ERROR(CheckUnmodelledBranches(ctx, in));
  if (kernel.takes_dropout && !IsZero(in.dropout)) {
    return NotModelled(absl::StrCat("dropout_p=", in.dropout.Repr()));
  }
  VARLEN_ASSIGN_OR_RETURN(const double scale, KernelScale(ctx, in.scaling));
  FlashVarlenArgs args = FlashKernelArgs(ctx, profile);
  args.scale = scale;
  args.scale_argument = in.scaling.is_none() ? Value::None() : Value::Float(scale);
  VARLEN_ASSIGN_OR_RETURN(args.variant, KernelVariant(ctx, kernel, in));
  const bool varlen = !in.cu_seq_lens_q.is_none() && !in.cu_seq_lens_k.is_none() &&
                      !in.max_length_q.is_none() && !in.max_length_k.is_none();
  if (!varlen) {
    if (!ctx.kwargs.get("position_ids").is_none()) {
      return NotModelled("the packed position_ids branch");
    }
    // flash_fn(q, k, v): one sequence of all T tokens.
    ctx.Note(
        "not all of cu_seq_lens_q/k and max_length_q/k given: the dense flash_attn_func over "
        "the whole pack");
    const int64_t tokens = q.size(0);
    VARLEN_ASSIGN_OR_RETURN(Tensor whole, Arange(0, 2 * tokens, tokens, DType::kInt32, q.device()));
    args.kernel = "flash_attn_func";
    args.cu_seqlens = Value::FromTensor(std::move(whole));
    args.max_seqlen = Value::Int(tokens);
    return WithInputs(call, std::move(args));
  }
  ctx.Note("all four varlen keywords given: flash_attn_varlen_func");
  if (!in.cu_seq_lens_q.is_tensor() || !in.cu_seq_lens_k.is_tensor()) {
    return NotModelled("a cu_seq_lens_q or cu_seq_lens_k that is not a tensor");
  }
  const Tensor& cu_q = in.cu_seq_lens_q.as_tensor();
  const Tensor& cu_k = in.cu_seq_lens_k.as_tensor();
  bool same_offsets = cu_q.shape() == cu_k.shape() && cu_q.dtype() == cu_k.dtype() &&
                      cu_q.device() == cu_k.device();
  for (int64_t i = 0; same_offsets && i < cu_q.numel(); ++i) {
    same_offsets = cu_q.IntAtLogical(i) == cu_k.IntAtLogical(i);
  }
  if (!same_offsets) return NotModelled("cu_seq_lens_k other than cu_seq_lens_q");
  VARLEN_ASSIGN_OR_RETURN(Value max_q,
                          KernelIntArgument(ctx, kernel, in.max_length_q, "max_seqlen_q"));
  VARLEN_ASSIGN_OR_RETURN(Value max_k,
                          KernelIntArgument(ctx, kernel, in.max_length_k, "max_seqlen_k"));
  if (max_q.kind() != max_k.kind() || max_q.Repr() != max_k.Repr()) {
    return NotModelled("max_length_k other than max_length_q");
  }
  // FlashAttention 3's interface makes cu_seqlens contiguous before its op.
  args.cu_seqlens =
      kernel.fa_version == 3 ? Value::FromTensor(cu_q.Contiguous()) : in.cu_seq_lens_q;
  args.max_seqlen = max_q;
  return WithInputs(call, std::move(args));
}

absl::Status Refuse(absl::string_view message) {
  return PythonError(PyErrorKind::kValueError, message);
}

absl::StatusOr<ResolvedArgs> HardenedFlash(const ResolveContext& ctx, Profile profile,
                                           const InterfaceCall& in) {
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens,
                          CheckQkvShapes(ctx.call, {.allow_4d = false, .allow_strided = true}));
  if (Truthy(in.is_causal)) {
    return Refuse(absl::StrCat("is_causal=", in.is_causal.Repr(),
                               ": vision attention is bidirectional; a causal mask would hide "
                               "each token's later neighbours within its sequence"));
  }
  if (!IsZero(in.dropout)) {
    return Refuse(absl::StrCat("dropout=", in.dropout.Repr(),
                               ": FlashAttention 3 and 4 ignore it and 2 drops attention "
                               "weights at random; inference passes 0.0"));
  }
  if (!in.attention_mask.is_none()) {
    return Refuse(
        "attention_mask is not None: _flash_attention_forward then recomputes cu_seqlens from "
        "the mask and ignores cu_seq_lens_q/k; pass one or the other");
  }
  for (absl::string_view key : {"position_ids", "block_table", "k_cache", "v_cache"}) {
    if (!ctx.kwargs.get(key).is_none()) {
      return Refuse(absl::StrCat(key,
                                 " is given: packed vision attention takes cu_seq_lens_q/k "
                                 "and max_length_q/k only"));
    }
  }
  const struct {
    absl::string_view name;
    const Value& value;
  } varlen[] = {{"cu_seq_lens_q", in.cu_seq_lens_q},
                {"cu_seq_lens_k", in.cu_seq_lens_k},
                {"max_length_q", in.max_length_q},
                {"max_length_k", in.max_length_k}};
  for (const auto& [name, value] : varlen) {
    if (value.is_none()) {
      return Refuse(absl::StrCat(
          name,
          " is None: _flash_attention_forward takes the varlen path only when cu_seq_lens_q, "
          "cu_seq_lens_k, max_length_q and max_length_k are all given, and otherwise attends "
          "across every sequence of the pack (one dense call over all ",
          tokens, " tokens)"));
    }
  }
  for (absl::string_view name : {"cu_seq_lens_q", "cu_seq_lens_k"}) {
    const Value& cu = name == "cu_seq_lens_q" ? in.cu_seq_lens_q : in.cu_seq_lens_k;
    if (!cu.is_tensor()) {
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat(name, " is ", cu.Repr(), " (a ", cu.TypeName(),
                                      "): the kernel takes a 1-d int32 tensor of offsets"));
    }
  }
  VARLEN_ASSIGN_OR_RETURN(CheckedCuSeqlens checked,
                          CheckCuSeqlensForKernel(ctx, in.cu_seq_lens_q.as_tensor(),
                                                  "cu_seq_lens_q", tokens, /*may_cast=*/true));
  if (!in.cu_seq_lens_k.as_tensor().SharesStorageWith(in.cu_seq_lens_q.as_tensor())) {
    VARLEN_ASSIGN_OR_RETURN(
        const std::vector<int64_t> k_offsets,
        CheckTokenOffsets(in.cu_seq_lens_k.as_tensor(), "cu_seq_lens_k", tokens));
    if (k_offsets != checked.offsets) {
      return Refuse(absl::StrCat(
          "cu_seq_lens_k=", in.cu_seq_lens_k.as_tensor().DebugString(),
          " differs from cu_seq_lens_q=", in.cu_seq_lens_q.as_tensor().DebugString(),
          ": vision attention attends within the same sequences for queries and keys"));
    }
  }
  VARLEN_ASSIGN_OR_RETURN(const int64_t max_q,
                          CheckMaxSeqlen(in.max_length_q, checked.longest.value,
                                         checked.longest.source, "max_length_q"));
  VARLEN_RETURN_IF_ERROR(
      CheckMaxSeqlen(in.max_length_k, checked.longest.value, checked.longest.source, "max_length_k")
          .status());
  double scale = 0.0;
  if (in.scaling.is_none()) {
    scale = std::pow(static_cast<double>(ctx.call.q.size(-1)), -0.5);
  } else if (in.scaling.kind() == Value::Kind::kFloat || in.scaling.kind() == Value::Kind::kInt) {
    scale = in.scaling.kind() == Value::Kind::kFloat ? in.scaling.as_float()
                                                     : static_cast<double>(in.scaling.as_int());
    if (!std::isfinite(scale)) {
      return Refuse(absl::StrCat("scaling=", in.scaling.Repr(), " is not a finite number"));
    }
  } else {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("scaling=", in.scaling.Repr(), " (a ", in.scaling.TypeName(),
                                    "): the softmax scale is a float or None"));
  }
  FlashVarlenArgs args = FlashKernelArgs(ctx, profile);
  args.cu_seqlens = Value::FromTensor(checked.cu);
  args.max_seqlen = Value::Int(max_q);
  args.scale = scale;
  args.scale_argument = Value::Float(scale);
  return WithInputs(ctx.call, std::move(args));
}

}  // namespace

absl::Status FlashZeroDimensionError() {
  return PythonError(
      PyErrorKind::kValueError,
      "Tensor query has shape  with a zero dimension.\nFlashAttention does not support inputs "
      "with dim=0.\nPlease check your input shapes or use SDPA instead.");
}

FlashVarlenArgs FlashKernelArgs(const ResolveContext& ctx, Profile profile) {
  FlashVarlenArgs args;
  if (const FlashKernel kernel = KernelOf(ctx, profile); kernel.fa_version == 4) {
    args.sglang_entry = FlashVarlenArgs::SglangEntry::kFa4;
    args.dsl_max_seqlen_position = 26;  // flash_attn.cute's, as #48353 quotes it
  } else {
    args.fa_version = kernel.fa_version;
    args.pads_head_dim_to_8 = kernel.fa_version == 2;
    args.disables_uneven_k = kernel.fa_version == 2 && Fa2DisablesUnevenK(ctx.call.platform);
  }
  return args;
}

absl::StatusOr<ResolvedArgs> ResolveFlashInterface(const ResolveContext& ctx, Profile profile,
                                                   const InterfaceCall& in) {
  return ctx.hardened() ? HardenedFlash(ctx, profile, in) : FaithfulFlash(ctx, profile, in);
}

double ModuleScaling(int64_t head_dim) { return std::pow(static_cast<double>(head_dim), -0.5); }

}  // namespace varlen::internal
