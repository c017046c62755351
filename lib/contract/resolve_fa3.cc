// fa3 resolution (contract §2.3): prepared metadata, a graph-mode list
// [cu_seqlens, max_seqlen], or cu_seqlens cast to int32 on q's device with
// resolve_precomputed_max_seqlen.

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

absl::StatusOr<Fa3Args> ResolveFaithful(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  Fa3Args args;
  if (call.forward_metadata.has_value()) {
    ctx.Note("source: forward_metadata (cu_seqlens, max_seqlen)");
    args.cu_seqlens = call.forward_metadata->cu_seqlens;
    args.max_seqlen = call.forward_metadata->max_seqlen;
  } else if (call.graph_mode) {
    VARLEN_RETURN_IF_ERROR(CheckSglangGraphList(call.cu_seqlens));
    ctx.Note("source: cuda-graph list [cu_seqlens, max_seqlen], passed on untouched");
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, ListItem(call.cu_seqlens, 0));
    VARLEN_ASSIGN_OR_RETURN(args.max_seqlen, ListItem(call.cu_seqlens, 1));
  } else {
    ctx.Note("source: cu_seqlens via resolve_seqlens, cast to int32 on q's device");
    VARLEN_ASSIGN_OR_RETURN(
        Tensor cu, ResolveSeqlens(call.cu_seqlens, call.bsz, call.seq_len, call.q.device()));
    cu = To(cu, cu.device(), DType::kInt32, "cu_seqlens.to(dtype=torch.int32)");
    cu = To(cu, call.q.device(), DType::kInt32, "cu_seqlens.to(q.device)");
    VARLEN_ASSIGN_OR_RETURN(int64_t max,
                            ResolvePrecomputedMaxSeqlen(cu, ctx.kwargs.get("max_seqlen")));
    args.cu_seqlens = Value::FromTensor(cu);
    args.max_seqlen = Value::Int(max);
  }
  VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, Profile::kFa3));
  return args;
}

absl::StatusOr<Fa3Args> ResolveHardened(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, {.allow_strided = true}));
  VARLEN_ASSIGN_OR_RETURN(TokenSource source,
                          ResolveHardenedTokenSource(ctx, tokens, {"cu_seqlens", "max_seqlen"}));
  // fa3 reads nothing but cu_seqlens and max_seqlen: any other description
  // of the sequences must agree with them.
  VARLEN_RETURN_IF_ERROR(
      CheckUnusedBoundariesAgree(ctx, source.checked.offsets, source.name, source.unused));
  Fa3Args args;
  VARLEN_ASSIGN_OR_RETURN(
      int64_t max,
      CheckOrDeriveMaxSeqlen(ctx, source.max_seqlen, source.checked.longest, source.max_name));
  args.cu_seqlens = Value::FromTensor(source.checked.cu);
  args.max_seqlen = Value::Int(max);
  VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, Profile::kFa3));
  return args;
}

}  // namespace

absl::StatusOr<Fa3Args> ResolveFa3(const ResolveContext& ctx) {
  return ctx.hardened() ? ResolveHardened(ctx) : ResolveFaithful(ctx);
}

}  // namespace varlen::internal
