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

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/device_ledger.h"
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

// _is_packed_sequence(position_ids, batch_size) as the band writes it
// (H8, step 4): unset where it returns False without reading a value, else
// the 0-d bool tensor it returns, on position_ids' device (whose truth the
// branch then reads). Its errors are torch's: a 1-d position_ids has no
// shape[1], bool ones meet `-`, a 3-d [3, B, S] one broadcasts against
// arange(B).
absl::StatusOr<std::optional<Tensor>> PackedSequenceTest(const ResolveContext& ctx,
                                                         const Value& position_ids,
                                                         int64_t batch_size) {
  const TransformersBehavior& band = TransformersBehaviorOf(ctx);
  if (position_ids.is_none()) return std::nullopt;
  if (!position_ids.is_tensor()) {
    return NotModelled(
        absl::StrCat("position_ids=", position_ids.Repr(), " (a ", position_ids.TypeName(), ")"));
  }
  const Tensor& pos = position_ids.as_tensor();
  const auto no_such_dimension = [] {
    return PythonError(PyErrorKind::kIndexError, "tuple index out of range");
  };
  if (!band.packed_check_before_branches) {  // shapes first
    if (batch_size != 1) return std::nullopt;
    if (pos.dim() == 0) return no_such_dimension();
    if (pos.size(-1) == 1) return std::nullopt;
  }
  if (pos.dim() < 2) return no_such_dimension();  // position_ids.shape[1]
  if (IsFloatingPoint(pos.dtype())) return NotModelled("floating-point position_ids");
  if (pos.numel() == 0) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "min(): Expected reduction dim to be specified for input.numel() == 0. "
                       "Specify the reduction dim with the 'dim' argument.");
  }
  // increasing = torch.arange(position_ids.shape[1]) + position_ids.min()
  const int64_t width = pos.size(1), last = pos.size(-1);
  if (pos.dtype() == DType::kBool) {
    return PythonError(PyErrorKind::kNotImplementedError,
                       "Subtraction, the `-` operator, with a bool tensor is not supported. If "
                       "you are trying to invert a mask, use the `~` or `logical_not()` "
                       "operator instead.");
  }
  if (width != last && width != 1 && last != 1) {
    return PythonError(
        PyErrorKind::kRuntimeError,
        absl::StrCat("The size of tensor a (", width, ") must match the size of tensor b (", last,
                     ") at non-singleton dimension ", pos.dim() - 1));
  }
  if (band.packed_check_before_branches && batch_size != 1) return std::nullopt;
  int64_t lowest = pos.IntAtLogical(0);
  for (int64_t i = 1; i < pos.numel(); ++i) lowest = std::min(lowest, pos.IntAtLogical(i));
  // (increasing - position_ids).abs().sum().bool(), broadcast on the last dimension.
  const int64_t columns = std::max(width, last);
  bool packed = false;
  for (int64_t row = 0; row < pos.numel() / last && !packed; ++row) {
    for (int64_t j = 0; j < columns && !packed; ++j) {
      const int64_t want = (width == 1 ? 0 : j) + lowest;
      packed = pos.IntAtLogical(row * last + (last == 1 ? 0 : j)) != want;
    }
  }
  return Tensor::FromInts({packed ? 1 : 0}, DType::kBool, pos.device(), Shape{});
}

// Whether view(-1) can flatten `t` without a copy: every pair of adjacent
// dimensions of more than one element is laid out one after the other.
bool FlattensAsView(const Tensor& t) {
  int64_t expected = -1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected >= 0 && t.strides()[d] != expected) return false;
    expected = t.strides()[d] * t.size(d);
  }
  return true;
}

// prepare_fa_kwargs_from_position_ids: offsets (int32, on position_ids'
// device) where the flattened position_ids equals its minimum (5.25.0) or 0,
// then its length; the max of their differences, a 0-d tensor (5.x) or its
// .item() (4.x).
absl::StatusOr<std::pair<Tensor, Value>> OffsetsFromPositions(const ResolveContext& ctx,
                                                              const Tensor& pos) {
  const TransformersBehavior& band = TransformersBehaviorOf(ctx);
  if (band.packed_flattens_by_view && !FlattensAsView(pos)) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "view size is not compatible with input tensor's size and stride (at "
                       "least one dimension spans across two contiguous subspaces). Use "
                       ".reshape(...) instead.");
  }
  int64_t start = 0;
  if (band.packed_starts_at_min) {
    start = pos.IntAtLogical(0);
    for (int64_t i = 1; i < pos.numel(); ++i) start = std::min(start, pos.IntAtLogical(i));
  }
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < pos.numel(); ++i) {
    if (pos.IntAtLogical(i) == start) starts.push_back(i);
  }
  const std::string equals = band.packed_starts_at_min ? "position_ids.min()" : "0";
  if (pos.device() == Device::kCuda) {
    // nonzero() sizes its output on the host.
    RecordDeviceEvent(DeviceEventKind::kHostSync,
                      absl::StrCat("(position_ids == ", equals, ").nonzero()"));
  }
  const Tensor found = Tensor::FromInts(starts, DType::kInt64, pos.device());
  const Tensor first = To(found, pos.device(), DType::kInt32, "indices_q.to(torch.int32)");
  if (pos.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy,
                      "torch.tensor(position_ids.size(), device=position_ids.device)");
  }
  const Tensor cu = Cat({first, Tensor::FromInts({pos.numel()}, DType::kInt32, pos.device())});
  VARLEN_ASSIGN_OR_RETURN(const Tensor longest, Max(Diff(cu)));
  ctx.Note(absl::StrCat("packed position_ids: sequences start where they equal ", equals,
                        ", cu_seqlens ", cu.DebugString()));
  if (!band.packed_max_item) return std::make_pair(cu, Value::FromTensor(longest));
  VARLEN_ASSIGN_OR_RETURN(Value max, Item(longest, "cu_seq_lens_q.diff().max().item()"));
  return std::make_pair(cu, std::move(max));
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

// flash_varlen_fn(q, k, v, cu_seqlens_q=, cu_seqlens_k=, max_seqlen_q=,
// max_seqlen_k=) with `in`'s offsets and maxes, as the binding takes them.
absl::StatusOr<ResolvedArgs> VarlenCall(const ResolveContext& ctx, const FlashKernel& kernel,
                                        const InterfaceCall& in, FlashVarlenArgs args) {
  const AttentionCall& call = ctx.call;
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
  // FlashAttention 3's interface copies cu_seqlens (maybe_contiguous) where
  // its last dimension is not unit stride; the op then checks the rest.
  const bool copied = kernel.fa_version == 3 && cu_q.dim() > 0 && cu_q.strides().back() != 1;
  args.cu_seqlens = copied ? Value::FromTensor(cu_q.Contiguous()) : in.cu_seq_lens_q;
  args.max_seqlen = max_q;
  return WithInputs(call, std::move(args));
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
  if (kernel.takes_dropout && !IsZero(in.dropout)) {
    return NotModelled(absl::StrCat("dropout_p=", in.dropout.Repr()));
  }
  VARLEN_ASSIGN_OR_RETURN(const double scale, KernelScale(ctx, in.scaling));
  FlashVarlenArgs args = FlashKernelArgs(ctx, profile);
  args.scale = scale;
  args.scale_argument = in.scaling.is_none() ? Value::None() : Value::Float(scale);
  VARLEN_ASSIGN_OR_RETURN(args.variant, KernelVariant(ctx, kernel, in));
  // The keywords are processed; then the branches, in the band's order.
  const TransformersBehavior& band = TransformersBehaviorOf(ctx);
  const bool varlen = !in.cu_seq_lens_q.is_none() && !in.cu_seq_lens_k.is_none() &&
                      !in.max_length_q.is_none() && !in.max_length_k.is_none();
  // 5.25.0 never looks at position_ids when the four keywords are given.
  const Value position_ids =
      band.packed_check_before_branches || !varlen ? ctx.kwargs.get("position_ids") : Value::None();
  constexpr int64_t kBatchSize = 1;  // query_states.size(0) of a [1, T, H, D] pack
  std::optional<Tensor> packed;
  if (band.packed_check_before_branches) {
    VARLEN_ASSIGN_OR_RETURN(packed, PackedSequenceTest(ctx, position_ids, kBatchSize));
  }
  VARLEN_RETURN_IF_ERROR(CheckUnmodelledBranches(ctx, in));
  if (!varlen) {
    if (!band.packed_check_before_branches) {
      VARLEN_ASSIGN_OR_RETURN(packed, PackedSequenceTest(ctx, position_ids, kBatchSize));
    }
    bool is_packed = false;
    if (packed.has_value()) {
      VARLEN_ASSIGN_OR_RETURN(const Value truth,
                              Item(*packed, "bool(_is_packed_sequence(position_ids))"));
      is_packed = truth.as_bool();
    }
    if (is_packed && band.packed_check_before_branches && !in.cu_seq_lens_q.is_none() &&
        !in.cu_seq_lens_k.is_none()) {
      // The varlen branch with the caller's offsets and whatever max was given.
      ctx.Note("packed position_ids, cu_seq_lens_q/k given: flash_attn_varlen_func with them");
      return VarlenCall(ctx, kernel, in, std::move(args));
    }
    if (is_packed) {
      ctx.Note("packed position_ids: flash_attn_varlen_func over offsets derived from them");
      VARLEN_ASSIGN_OR_RETURN(auto derived, OffsetsFromPositions(ctx, position_ids.as_tensor()));
      InterfaceCall given = in;
      given.cu_seq_lens_q = given.cu_seq_lens_k = Value::FromTensor(derived.first);
      given.max_length_q = given.max_length_k = derived.second;
      VARLEN_ASSIGN_OR_RETURN(ResolvedArgs resolved,
                              VarlenCall(ctx, kernel, given, std::move(args)));
      // query.contiguous().view(-1, H, D): dense copies for the kernel.
      resolved.q = call.q.Contiguous();
      resolved.k = call.k.Contiguous();
      resolved.v = call.v.Contiguous();
      return resolved;
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
  return VarlenCall(ctx, kernel, in, std::move(args));
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
