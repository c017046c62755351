// triton_attn resolution (contract §2.2): prepared metadata, a graph-mode
// list [cu_seqlens, seq_lens, max_seqlen] with output_ws, or cu_seqlens as
// given (neither cast nor moved) with sequence_lengths or the cu diffs.

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

absl::Status CheckGraphModeArguments(const ResolveContext& ctx) {
  if (!ctx.kwargs.contains("output_ws")) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "output_ws should be prepared for cuda-graph mode");
  }
  return CheckSglangGraphList(ctx.call.cu_seqlens);
}

absl::StatusOr<TritonArgs> ResolveFaithful(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  TritonArgs args;
  if (call.forward_metadata.has_value()) {
    ctx.Note("source: forward_metadata (cu_seqlens, seq_lens, max_seqlen)");
    args.cu_seqlens = call.forward_metadata->cu_seqlens;
    args.seq_lens = call.forward_metadata->seq_lens;
    args.max_seqlen = call.forward_metadata->max_seqlen;
  } else if (call.graph_mode) {
    VARLEN_RETURN_IF_ERROR(CheckGraphModeArguments(ctx));
    ctx.Note(
        "source: cuda-graph list [cu_seqlens, seq_lens, max_seqlen], passed on untouched; "
        "output written into output_ws");
    args.output_from_workspace = true;
    args.output_ws = ctx.kwargs.get("output_ws");
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, ListItem(call.cu_seqlens, 0));
    VARLEN_ASSIGN_OR_RETURN(args.seq_lens, ListItem(call.cu_seqlens, 1));
    VARLEN_ASSIGN_OR_RETURN(args.max_seqlen, ListItem(call.cu_seqlens, 2));
  } else {
    ctx.Note("source: cu_seqlens via resolve_seqlens, neither cast nor moved");
    VARLEN_ASSIGN_OR_RETURN(
        Tensor cu, ResolveSeqlens(call.cu_seqlens, call.bsz, call.seq_len, call.q.device()));
    // Given lengths go to q's device as int32; derived ones too since
    // 0.5.23 (before, they kept cu_seqlens' device and dtype).
    Value seq_lens = ctx.kwargs.get("sequence_lengths");
    const bool derived = seq_lens.is_none();
    if (derived) {
      VARLEN_ASSIGN_OR_RETURN(Tensor lengths, SubtractShifted(cu));
      seq_lens = Value::FromTensor(std::move(lengths));
    }
    if (!seq_lens.is_tensor()) {
      return PythonError(PyErrorKind::kAttributeError,
                         absl::StrCat("'", seq_lens.TypeName(), "' object has no attribute 'to'"));
    }
    if (derived && !ctx.sglang.triton_moves_derived_seq_lens) {
      ctx.Note("seq_lens: the cu_seqlens diffs, passed on as computed");
      args.seq_lens = seq_lens;
    } else {
      args.seq_lens = Value::FromTensor(To(seq_lens.as_tensor(), call.q.device(), DType::kInt32,
                                           "seq_lens.to(device=q.device, dtype=torch.int32)"));
    }
    VARLEN_ASSIGN_OR_RETURN(int64_t max,
                            ResolvePrecomputedMaxSeqlen(cu, ctx.kwargs.get("max_seqlen")));
    args.cu_seqlens = Value::FromTensor(cu);
    args.max_seqlen = Value::Int(max);
  }
  VARLEN_RETURN_IF_ERROR(
      ResolveKernelScale(ctx, Profile::kTritonAttn, args.scale, args.scale_not_modelled));
  return args;
}

// Hardened: explicit per-sequence lengths must equal the cu_seqlens diffs.
absl::Status CheckLengthsMatchOffsets(const Value& lengths_value, absl::string_view name,
                                      const std::vector<int64_t>& offsets) {
  if (!lengths_value.is_tensor()) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat(name, "=", lengths_value.Repr(), " is a ",
                                    lengths_value.TypeName(), ": it must be an integer tensor"));
  }
  VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, CheckSequenceLengths(lengths_value, name));
  const std::vector<int64_t> expected = OffsetsToLengths(offsets);
  if (lengths.size() != expected.size()) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat(name, " has ", lengths.size(), " entries but cu_seqlens has ", offsets.size(),
                     ": it must have one per sequence (", expected.size(), ")"));
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] != expected[i]) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(name, "[", i, "]=", lengths[i], " != ", expected[i], " = cu_seqlens[", i + 1,
                       "] - cu_seqlens[", i, "]: lengths must match the offsets"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TritonArgs> ResolveHardened(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, {.allow_strided = true}));
  if (!call.forward_metadata.has_value() && call.graph_mode && !ctx.kwargs.contains("output_ws")) {
    return PythonError(PyErrorKind::kValueError,
                       "output_ws is absent: in cuda-graph mode triton_attn writes into a "
                       "preallocated output_ws");
  }
  VARLEN_ASSIGN_OR_RETURN(
      TokenSource source,
      ResolveHardenedTokenSource(ctx, tokens, {.list_layout = {"cu_seqlens", "seq_lens", "max_seqlen"}}));
  const std::vector<int64_t>& offsets = source.checked.offsets;
  // The kernel also reads seq_lens (checked against the offsets below); any
  // other description of the sequences must agree with them.
  const unsigned seq_lens_source = source.kind == TokenSource::Kind::kMetadata ? kMetadataSeqLens
                                   : source.kind == TokenSource::Kind::kKwargs
                                       ? kSequenceLengthsKwarg
                                       : 0u;
  VARLEN_RETURN_IF_ERROR(
      CheckUnusedBoundariesAgree(ctx, offsets, source.name, source.unused & ~seq_lens_source));
  TritonArgs args;
  switch (source.kind) {
    case TokenSource::Kind::kMetadata: {
      const VisionAttentionMetadata& metadata = *call.forward_metadata;
      VARLEN_ASSIGN_OR_RETURN(Tensor seq_lens,
                              RequireTensorField(metadata.seq_lens, "forward_metadata.seq_lens"));
      if (!metadata.stamp.has_value()) {
        VARLEN_RETURN_IF_ERROR(
            CheckLengthsMatchOffsets(metadata.seq_lens, "forward_metadata.seq_lens", offsets));
      }
      args.seq_lens = Value::FromTensor(To(seq_lens, call.q.device(), DType::kInt32,
                                           "forward_metadata.seq_lens.to(q.device, torch.int32)"));
      break;
    }
    case TokenSource::Kind::kGraphList: {
      const Value output_ws = ctx.kwargs.get("output_ws");
      const Shape output_shape = {call.q.size(0), call.q.size(1), call.v.size(2)};
      if (!output_ws.is_tensor() || output_ws.as_tensor().shape() != output_shape ||
          output_ws.as_tensor().dtype() != call.q.dtype() ||
          output_ws.as_tensor().device() != call.q.device()) {
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat("output_ws=", output_ws.Repr(),
                         ": in cuda-graph mode it must be a preallocated tensor of the output's "
                         "shape ",
                         ShapeToString(output_shape), ", dtype ", DTypeName(call.q.dtype()),
                         " and device ", DeviceName(call.q.device())));
      }
      const Value& seq_lens = call.cu_seqlens.as_list()[1];
      VARLEN_RETURN_IF_ERROR(CheckLengthsMatchOffsets(seq_lens, "cu_seqlens[1]", offsets));
      const Tensor& lengths = seq_lens.as_tensor();
      if (lengths.dtype() != DType::kInt32 || lengths.device() != call.q.device()) {
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat("cu_seqlens[1] is ", DTypeName(lengths.dtype()), " on ",
                         DeviceName(lengths.device()),
                         ": in cuda-graph mode the kernel reads it as it is, so it must be int32 "
                         "on q's device (",
                         DeviceName(call.q.device()), ")"));
      }
      args.seq_lens = seq_lens;
      args.output_from_workspace = true;
      args.output_ws = output_ws;
      break;
    }
    case TokenSource::Kind::kKwargs: {
      const Value sequence_lengths = ctx.kwargs.get("sequence_lengths");
      if (sequence_lengths.is_none()) {
        args.seq_lens = Value::FromTensor(Diff(source.checked.cu));
        break;
      }
      VARLEN_RETURN_IF_ERROR(
          CheckLengthsMatchOffsets(sequence_lengths, "sequence_lengths", offsets));
      args.seq_lens =
          Value::FromTensor(To(sequence_lengths.as_tensor(), call.q.device(), DType::kInt32,
                               "sequence_lengths.to(q.device, torch.int32)"));
      break;
    }
  }
  VARLEN_ASSIGN_OR_RETURN(
      int64_t max,
      CheckOrDeriveMaxSeqlen(ctx, source.max_seqlen, source.checked.longest, source.max_name));
  args.cu_seqlens = Value::FromTensor(source.checked.cu);
  args.max_seqlen = Value::Int(max);
  VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, Profile::kTritonAttn));
  return args;
}

}  // namespace

absl::StatusOr<TritonArgs> ResolveTriton(const ResolveContext& ctx) {
  return ctx.hardened() ? ResolveHardened(ctx) : ResolveFaithful(ctx);
}

}  // namespace varlen::internal
