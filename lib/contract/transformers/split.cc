// transformers' attention per sequence (docs/contract-transformers.md, H10):
// VisionAttention's split path for every implementation its flash gate does
// not take, and an SDPA or eager interface function called once over the
// whole pack.
//
// The split path reads cu_seqlens' differences on the host once per q, k
// and v (three host syncs per layer), ignores max_seqlen, and calls the
// interface function on each chunk, a non-contiguous [1, H, L, D] view.

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

ResolvedArgs WithInputs(const AttentionCall& call) {
  ResolvedArgs resolved;
  resolved.q = call.q;
  resolved.k = call.k;
  resolved.v = call.v;
  return resolved;
}

// 4.57.6's split path under a flash name: flash_attention_forward per
// sequence without varlen keywords, so the dense flash_attn_func per image.
absl::StatusOr<ResolvedArgs> FlashPerSequence(const ResolveContext& ctx, Profile profile,
                                              const std::vector<int64_t>& lens, double scaling) {
  // Images are called in order: an empty one is refused when its turn
  // comes, after the kernel has taken the ones before it.
  if (lens.front() == 0 || ctx.call.q.size(1) == 0 || ctx.call.q.size(2) == 0) {
    return FlashZeroDimensionError();
  }
  ctx.Note("each sequence a dense flash_attn_func call (the 4.57.x flash gate)");
  std::vector<int64_t> offsets = {0};
  for (int64_t length : lens) offsets.push_back(offsets.back() + length);
  FlashVarlenArgs args = FlashKernelArgs(ctx, profile);
  args.kernel = "flash_attn_func";
  args.cu_seqlens =
      Value::FromTensor(Tensor::FromInts(offsets, DType::kInt32, ctx.call.q.device()));
  args.max_seqlen = Value::Int(*std::max_element(lens.begin(), lens.end()));
  args.scale = scaling;
  args.scale_argument = Value::Float(scaling);
  ResolvedArgs resolved = WithInputs(ctx.call);
  resolved.args = std::move(args);
  if (std::find(lens.begin(), lens.end(), 0) != lens.end()) {
    resolved.after_kernel = FlashZeroDimensionError();
  }
  return resolved;
}

// SDPA and eager called on the vision module, whose num_key_value_groups is
// 1: more than one key head, but fewer than query heads, meet in a
// broadcast over the heads.
absl::Status CheckHeadsMatch(const AttentionCall& call) {
  // One key head broadcasts over every query head.
  if (call.k.size(1) == call.q.size(1) || call.k.size(1) == 1) return absl::OkStatus();
  return PythonError(
      PyErrorKind::kRuntimeError,
      absl::StrCat("The size of tensor a (", call.q.size(1), ") must match the size of tensor b (",
                   call.k.size(1), ") at non-singleton dimension 1"));
}

// 5.25.0's sdpa_attention_forward reshapes a chunk's output with -1: an
// empty chunk leaves -1 ambiguous.
absl::Status EmptyChunkReshapeError(const AttentionCall& call) {
  return PythonError(
      PyErrorKind::kRuntimeError,
      absl::StrCat("cannot reshape tensor of 0 elements into shape [1, -1, 0, ", call.v.size(2),
                   "] because the unspecified dimension size -1 can be any value "
                   "and is ambiguous"));
}

absl::StatusOr<ResolvedArgs> FaithfulSplit(const ResolveContext& ctx, Profile profile,
                                           const Value& cu, double scaling) {
  const Tensor& q = ctx.call.q;
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, SplitLengths(ctx, cu));
  if (IsFlashName(profile)) return FlashPerSequence(ctx, profile, lens, scaling);
  if (profile == Profile::kTfSdpa && TransformersBehaviorOf(ctx).sdpa_empty_segment_raises &&
      std::find(lens.begin(), lens.end(), 0) != lens.end()) {
    return EmptyChunkReshapeError(ctx.call);
  }
  ResolvedArgs resolved = WithInputs(ctx.call);
  resolved.args = ChunkedSdpa(lens, 1, q.size(0), scaling);
  return resolved;
}

absl::StatusOr<ResolvedArgs> HardenedSplit(const ResolveContext& ctx, const Value& cu,
                                           double scaling) {
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens,
                          CheckQkvShapes(ctx.call, {.allow_4d = false, .allow_strided = true}));
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("cu_seqlens is ", cu.Repr(), " (a ", cu.TypeName(),
                                    "): the layer splits q, k and v by a 1-d integer tensor of "
                                    "token offsets"));
  }
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets,
                          CheckTokenOffsets(cu.as_tensor(), "cu_seqlens", tokens));
  if (offsets.size() < 2) {
    return PythonError(PyErrorKind::kValueError,
                       "cu_seqlens=[0] describes no sequence: the layer splits q, k and v by it "
                       "and needs at least one (B+1 >= 2 entries)");
  }
  ResolvedArgs resolved = WithInputs(ctx.call);
  resolved.args = ChunkedSdpa(OffsetsToLengths(offsets), 1, tokens, scaling);
  return resolved;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> SplitLengths(const ResolveContext& ctx, const Value& cu) {
  if (cu.is_none()) {
    return PythonError(PyErrorKind::kTypeError, "'NoneType' object is not subscriptable");
  }
  if (!cu.is_tensor()) {
    return absl::UnimplementedError("transformers: a cu_seqlens of another type: not modelled");
  }
  ctx.Note("lengths = cu_seqlens[1:] - cu_seqlens[:-1]; lengths.tolist() once per q, k and v");
  // q's split reads the lengths and checks them; k's and v's read them again.
  constexpr absl::string_view kRead = "lengths.tolist() in torch.split";
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> lens,
                          SplitSizesOf(cu.as_tensor(), /*reads=*/1, kRead));
  VARLEN_RETURN_IF_ERROR(CheckSplitSizes(lens, ctx.call.q.size(0), /*dim=*/2));
  VARLEN_RETURN_IF_ERROR(SplitSizesOf(cu.as_tensor(), /*reads=*/2, kRead).status());
  return lens;
}

absl::StatusOr<ResolvedArgs> ResolveSplit(const ResolveContext& ctx, Profile profile,
                                          const Value& cu_seqlens, double scaling) {
  return ctx.hardened() ? HardenedSplit(ctx, cu_seqlens, scaling)
                        : FaithfulSplit(ctx, profile, cu_seqlens, scaling);
}

absl::StatusOr<ResolvedArgs> ResolveDenseInterface(const ResolveContext& ctx, Profile profile,
                                                   const InterfaceCall& in) {
  const Tensor& q = ctx.call.q;
  const bool causal = !in.is_causal.is_none() &&
                      !(in.is_causal.kind() == Value::Kind::kBool && !in.is_causal.as_bool());
  double scaling = ModuleScaling(q.size(-1));
  if (in.scaling.kind() == Value::Kind::kFloat) scaling = in.scaling.as_float();
  const bool scaling_modelled = in.scaling.is_none() || in.scaling.kind() == Value::Kind::kFloat;
  if (ctx.hardened()) {
    VARLEN_ASSIGN_OR_RETURN(const int64_t tokens,
                            CheckQkvShapes(ctx.call, {.allow_4d = false, .allow_strided = true}));
    for (absl::string_view key : {"cu_seq_lens_q", "cu_seq_lens_k"}) {
      if (!ctx.kwargs.get(key).is_none()) {
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat(key,
                         " is given to an attention function that never reads it: SDPA and "
                         "eager attend across all ",
                         tokens,
                         " tokens of the pack; transformers' vision layer splits q, k and v per "
                         "sequence before calling them"));
      }
    }
    if (causal || !in.attention_mask.is_none() || !scaling_modelled) {
      return PythonError(PyErrorKind::kValueError,
                         "attention over the whole pack takes no mask, is_causal=False and a "
                         "float or None scaling");
    }
  } else {
    // eager's matmul checks the heads whatever the sizes; SDPA, given no
    // tokens, returns before it compares them.
    if (profile == Profile::kTfEager ||
        (TransformersBehaviorOf(ctx).module_has_kv_groups && q.size(0) > 0)) {
      VARLEN_RETURN_IF_ERROR(CheckHeadsMatch(ctx.call));
    }
    if (profile == Profile::kTfEager && in.scaling.is_none()) {
      // eager_attention_forward multiplies by its scaling argument.
      return PythonError(PyErrorKind::kTypeError,
                         "unsupported operand type(s) for *: 'Tensor' and 'NoneType'");
    }
    if (causal && in.is_causal.kind() != Value::Kind::kBool) {
      return absl::UnimplementedError(absl::StrCat("transformers: is_causal=", in.is_causal.Repr(),
                                                   ", not a bool: not modelled"));
    }
    if (!in.attention_mask.is_none()) {
      return absl::UnimplementedError("transformers: an attention_mask: not modelled");
    }
    if (!scaling_modelled) {
      return absl::UnimplementedError(
          absl::StrCat("transformers: scaling=", in.scaling.Repr(), ": not modelled"));
    }
    ctx.Note("one call over the whole pack: cu_seq_lens_* and max_length_* are never read");
    if (profile == Profile::kTfSdpa && TransformersBehaviorOf(ctx).sdpa_empty_segment_raises &&
        q.size(0) == 0) {
      return EmptyChunkReshapeError(ctx.call);
    }
  }
  SdpaArgs args = ChunkedSdpa({}, 1, q.size(0), scaling);
  if (causal && profile == Profile::kTfEager) {
    ctx.Note("is_causal=True: eager_attention_forward never reads it (its **kwargs)");
  } else if (causal) {
    args.causal = !TransformersBehaviorOf(ctx).sdpa_causal_needs_several_queries || q.size(0) > 1;
    ctx.Note(args.causal ? "is_causal=True reaches torch's SDPA: causal over the whole pack"
                         : "is_causal=True with one query: sdpa_attention_forward passes False");
  }
  ResolvedArgs resolved = WithInputs(ctx.call);
  resolved.args = std::move(args);
  return resolved;
}

}  // namespace varlen::internal
