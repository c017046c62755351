// sdpa resolution (contract §2.1): the boolean mask is built on the host from
// cu_seqlens (`cu.cpu().tolist()`, a host sync), block-diagonal with
// flatten_batch, else a per-item padding mask. The per-call softmax_scale is
// ignored: the backend uses the scale fixed at construction.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// The scale SGLang's VisionSdpaAttention fixes at construction.
double ConstructionScale(const AttentionCall& call) {
  return 1.0 / std::sqrt(static_cast<double>(call.q.size(-1)));
}

void NoteIgnoredScale(const ResolveContext& ctx) {
  if (!ctx.kwargs.get("softmax_scale").is_none()) {
    ctx.Note("softmax_scale kwarg ignored: sdpa uses its construction-time scale");
  }
}

absl::StatusOr<SdpaArgs> ResolveFaithful(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  if (call.sdpa.flatten_batch && call.bsz != 1) {
    return PythonError(PyErrorKind::kAssertionError, "flatten_batch is True, bsz must be 1");
  }
  if (call.q.dim() != 3) {
    return PythonError(PyErrorKind::kAssertionError,
                       absl::StrCat("torch.Size(", ShapeToString(call.q.shape()), ")"));
  }
  SdpaArgs args;
  args.bsz = call.bsz;
  args.tokens_per_item = call.q.size(0) / call.bsz;
  args.scale = ConstructionScale(call);
  NoteIgnoredScale(ctx);
  if (call.cu_seqlens.is_none()) {
    args.mask = SdpaArgs::Mask::kNone;
    if (call.sdpa.softmax_in_single_precision) {
      return PythonError(PyErrorKind::kRuntimeError, "Empty attention mask");
    }
    ctx.Note("no cu_seqlens: no mask, each batch item attends to itself");
    return args;
  }
  if (!call.cu_seqlens.is_tensor()) {
    return PythonError(
        PyErrorKind::kAttributeError,
        absl::StrCat("'", call.cu_seqlens.TypeName(), "' object has no attribute 'cpu'"));
  }
  const Tensor& cu = call.cu_seqlens.as_tensor();
  args.cu_seqlens = To(cu, Device::kCpu, cu.dtype(), "cu_seqlens.cpu()").ToHostInts("tolist()");
  args.mask = call.sdpa.flatten_batch ? SdpaArgs::Mask::kBlockDiagonal : SdpaArgs::Mask::kPadding;
  ctx.Note(call.sdpa.flatten_batch ? "mask: block-diagonal over cu_seqlens"
                                   : "mask: per-item padding (row < len) & (col < len)");
  if (call.q.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, "attention_mask.to(q.device)");
  }
  return args;
}

absl::StatusOr<SdpaArgs> ResolveHardened(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, /*allow_4d=*/false));
  if (call.bsz < 1 || tokens % call.bsz != 0) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("bsz=", call.bsz, " does not divide q.shape[0]=", tokens,
                                    ": sdpa splits the tokens into bsz equal items"));
  }
  if (call.sdpa.flatten_batch && call.bsz != 1) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("bsz=", call.bsz,
                                    " with flatten_batch: the block-diagonal mask covers one "
                                    "packed item, so bsz must be 1"));
  }
  SdpaArgs args;
  args.bsz = call.bsz;
  args.tokens_per_item = tokens / call.bsz;
  args.scale = ConstructionScale(call);
  VARLEN_ASSIGN_OR_RETURN(const double requested, ResolveSoftmaxScale(ctx, call.q.size(-1), "scaled_dot_product_attention", "scale"));
  if (requested != args.scale) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("softmax_scale=", ctx.kwargs.get("softmax_scale").Repr(),
                     " differs from the scale sdpa was constructed with (", PyFloatRepr(args.scale),
                     "): sdpa ignores the per-call scale, so it must be set at "
                     "construction"));
  }
  if (call.cu_seqlens.is_none()) {
    if (call.sdpa.softmax_in_single_precision) {
      return PythonError(PyErrorKind::kValueError,
                         "cu_seqlens=None with softmax_in_single_precision: that path needs a "
                         "mask, so cu_seqlens must be given");
    }
    ctx.Note("no cu_seqlens: no mask, each batch item attends to itself");
    return args;
  }
  VARLEN_ASSIGN_OR_RETURN(Tensor cu, RequireTensorField(call.cu_seqlens, "cu_seqlens"));
  if (call.sdpa.flatten_batch) {
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, CheckTokenOffsets(cu, "cu_seqlens", tokens));
    args.mask = SdpaArgs::Mask::kBlockDiagonal;
    ctx.Note("mask: block-diagonal over validated cu_seqlens");
  } else {
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, CheckTokenOffsets(cu, "cu_seqlens", std::nullopt));
    const std::vector<int64_t> lengths = OffsetsToLengths(args.cu_seqlens);
    if (static_cast<int64_t>(lengths.size()) != call.bsz) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat("cu_seqlens describes ", lengths.size(), " sequences but bsz=", call.bsz,
                       ": without flatten_batch the padding mask takes one "
                       "sequence per batch item (more would attend across "
                       "sequences)"));
    }
    // Rows past an item's length have no key under (row < len) & (col < len):
    // their output is undefined, so every item must be full.
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] != args.tokens_per_item) {
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat("cu_seqlens[", i + 1, "] - cu_seqlens[", i, "] = ", lengths[i],
                         " != ", args.tokens_per_item,
                         " tokens per batch item: without flatten_batch every item must be one "
                         "full sequence (shorter ones leave rows with no key)"));
      }
    }
    args.mask = SdpaArgs::Mask::kPadding;
    ctx.Note("mask: per-item padding over validated lengths");
  }
  if (call.q.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, "attention_mask.to(q.device)");
  }
  return args;
}

}  // namespace

absl::StatusOr<SdpaArgs> ResolveSdpa(const ResolveContext& ctx) {
  return ctx.hardened() ? ResolveHardened(ctx) : ResolveFaithful(ctx);
}

}  // namespace varlen::internal
