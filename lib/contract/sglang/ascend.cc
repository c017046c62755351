// ascend_attn resolution (contract §2.7, rule 22): cumulative ends
// cu_seqlens[1:] as a host list for the NPU's fused TND kernel, from
// prepared metadata, from cu_seqlens as given in npu-graph mode, or from
// resolve_seqlens on the host; since 0.5.23 per-image padding is dropped
// before the kernel and the result written back around it.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// `cu[1:]` of a 0-d tensor.
absl::Status SliceOfZeroDim() {
  return PythonError(PyErrorKind::kIndexError, "slice() cannot be applied to a 0-dim tensor.");
}

// `seq_len_arg.tolist()` and then `int(seq_len_arg[-1])` (0.5.23): only a
// 1-d tensor gives a list of ints. `sliced`: seq_len_arg is `cu[1:]`, cast
// to int32 (the metadata and keyword paths, where cu has a dimension; graph
// mode passes cu as given).
absl::StatusOr<std::vector<int64_t>> HostEnds(const Tensor& cu, bool sliced, absl::string_view what,
                                              const SglangBehavior& sglang) {
  const std::vector<int64_t> values = cu.ToHostInts(what);
  const bool empty = cu.dim() > 0 && cu.size(0) <= (sliced ? 1 : 0);
  if (cu.dim() != 1 && !(cu.dim() > 1 && empty)) {
    if (!sglang.ascend_unpads_padded_items) {
      return absl::UnimplementedError(
          absl::StrCat("a ", cu.dim(), "-d cu_seqlens gives the NPU kernel a nested "
                       "actual_seq_lengths: its error is not modelled"));
    }
    return PythonError(PyErrorKind::kTypeError,
                       cu.dim() == 0 ? std::string("'int' object is not subscriptable")
                                     : std::string("int() argument must be a string, a bytes-like "
                                                   "object or a real number, not 'list'"));
  }
  if (cu.dim() != 1) return std::vector<int64_t>{};  // [[...]][1:] == []
  std::vector<int64_t> ends;
  for (size_t i = sliced ? 1 : 0; i < values.size(); ++i) {
    ends.push_back(sliced ? WrapInt32(values[i]) : values[i]);
  }
  return ends;
}

absl::Status CheckMaskNotGiven(const ResolveContext& ctx) {
  if (ctx.kwargs.get("attention_mask").is_none()) return absl::OkStatus();
  return absl::UnimplementedError(
      "ascend_attn with an attention_mask delegates to its SDPA fallback; a case cannot carry a "
      "mask tensor (not modelled)");
}

// `_, num_heads, head_size = q.shape` (Python 3.11's messages).
absl::Status CheckUnpacksAsThreeDims(const Tensor& q) {
  if (q.dim() == 3) return absl::OkStatus();
  return PythonError(PyErrorKind::kValueError,
                     q.dim() > 3 ? std::string("too many values to unpack (expected 3)")
                                 : absl::StrCat("not enough values to unpack (expected 3, got ",
                                                q.dim(), ")"));
}

// `self.copy_(src)`: src must broadcast to self's shape (torch's infer_size
// and TensorIterator messages).
absl::Status CheckCopyInto(const Shape& self, const Shape& src) {
  const size_t n = std::max(self.size(), src.size());
  Shape broadcast(n, 1);
  for (size_t i = n; i-- > 0;) {
    const size_t offset = n - 1 - i;
    const int64_t a = offset < self.size() ? self[self.size() - 1 - offset] : 1;
    const int64_t b = offset < src.size() ? src[src.size() - 1 - offset] : 1;
    if (a != b && a != 1 && b != 1) {
      return PythonError(PyErrorKind::kRuntimeError,
                         absl::StrCat("The size of tensor a (", a, ") must match the size of "
                                      "tensor b (", b, ") at non-singleton dimension ", i));
    }
    broadcast[i] = a == 1 ? b : a;
  }
  if (broadcast != self) {
    return PythonError(PyErrorKind::kRuntimeError,
                       absl::StrCat("output with shape ", ShapeToString(self),
                                    " doesn't match the broadcast shape ",
                                    ShapeToString(broadcast)));
  }
  return absl::OkStatus();
}

// After the kernel (0.5.23): with padding gathered away, index_copy_ puts the
// result into `output` (output_ws in npu-graph mode, else empty_like(q));
// else, when `output` has other rows than the real tokens, the result goes
// into its first rows (copy_); else the kernel's own output is returned.
absl::Status PlaceOutput(const ResolveContext& ctx, bool graph, int64_t total, bool gathered,
                         AscendArgs* args) {
  const Tensor& q = ctx.call.q;
  const Shape result = {total, q.size(1), ctx.call.v.size(2)};  // the kernel's output
  Shape output = q.shape();  // empty_like(q)
  if (graph) {
    const Value& ws = args->output_ws;
    if (!ws.is_tensor()) {
      return PythonError(PyErrorKind::kAttributeError,
                         absl::StrCat("'", ws.TypeName(), "' object has no attribute '",
                                      gathered ? "index_copy_" : "shape", "'"));
    }
    output = ws.as_tensor().shape();
    if (!gathered && output.empty()) {
      return PythonError(PyErrorKind::kIndexError, "tuple index out of range");  // shape[0]
    }
  }
  if (!gathered && output[0] == total) {
    if (graph) ctx.Note("npu-graph mode: output_ws unused, the kernel's output is returned");
    return absl::OkStatus();
  }
  if (gathered) {
    if (output != Shape{q.size(0), result[1], result[2]} ||
        (graph && args->output_ws.as_tensor().dtype() != q.dtype())) {
      return absl::UnimplementedError(
          absl::StrCat("index_copy_ of a ", ShapeToString(result), " result into an output of "
                       "shape ", ShapeToString(output), ": torch's error is not modelled"));
    }
  } else {
    Shape front = output;  // output[:total_tokens]
    front[0] = std::clamp<int64_t>(total, 0, output[0]);
    VARLEN_RETURN_IF_ERROR(CheckCopyInto(front, result));
    if (graph && (args->output_ws.as_tensor().dtype() != q.dtype() || output.size() != 3)) {
      return absl::UnimplementedError(
          "a copy into an output_ws of another dtype or rank (a conversion not modelled)");
    }
  }
  args->padded = true;
  args->output_from_workspace = graph;
  return absl::OkStatus();
}

absl::StatusOr<AscendArgs> ResolveFaithful(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_RETURN_IF_ERROR(CheckMaskNotGiven(ctx));
  // The list of ends; a nested one fails only where it is first indexed,
  // after q.shape is unpacked.
  absl::StatusOr<std::vector<int64_t>> ends;
  Value output_ws;
  if (call.forward_metadata.has_value()) {
    ctx.Note("source: forward_metadata.cu_seqlens[1:] on the host (cumulative ends)");
    const Value& cu = call.forward_metadata->cu_seqlens;
    if (!cu.is_tensor()) {
      return PythonError(PyErrorKind::kAttributeError,
                         absl::StrCat("'", cu.TypeName(), "' object has no attribute 'to'"));
    }
    if (cu.as_tensor().dim() == 0) return SliceOfZeroDim();
    ends = HostEnds(cu.as_tensor(), /*sliced=*/true, "forward_metadata.cu_seqlens.to(\"cpu\")",
                    ctx.sglang);
  } else if (call.graph_mode) {
    if (!ctx.kwargs.contains("output_ws")) {
      return PythonError(PyErrorKind::kRuntimeError,
                         "output_ws should be prepared for npu-graph mode");
    }
    output_ws = ctx.kwargs.get("output_ws");
    VARLEN_RETURN_IF_ERROR(CheckUnpacksAsThreeDims(call.q));  // before .tolist()
    ctx.Note("source: npu-graph mode, cu_seqlens as given (every entry, the leading 0 too)");
    if (!call.cu_seqlens.is_tensor()) {
      return PythonError(PyErrorKind::kAttributeError, absl::StrCat("'", call.cu_seqlens.TypeName(),
                                                                    "' object has no attribute "
                                                                    "'tolist'"));
    }
    ends = HostEnds(call.cu_seqlens.as_tensor(), /*sliced=*/false, "cu_seqlens.tolist()",
                    ctx.sglang);
  } else {
    ctx.Note("source: cu_seqlens via resolve_seqlens on the host, [1:] (cumulative ends)");
    VARLEN_ASSIGN_OR_RETURN(
        Tensor cu, ResolveSeqlens(call.cu_seqlens, call.bsz, call.seq_len, Device::kCpu));
    if (cu.dim() == 0) return SliceOfZeroDim();
    ends = HostEnds(cu, /*sliced=*/true, "cu_seqlens[1:].tolist()", ctx.sglang);
  }
  VARLEN_RETURN_IF_ERROR(CheckUnpacksAsThreeDims(call.q));
  if (!ends.ok()) return ends.status();
  VARLEN_ASSIGN_OR_RETURN(AscendArgs args, AscendLaunch(*ends, call.q.size(0), ctx.sglang));
  args.output_ws = output_ws;
  if (ctx.sglang.ascend_unpads_padded_items) {
    const bool gathered = args.actual_seq_lengths.size() > 1 && args.padded;
    VARLEN_RETURN_IF_ERROR(PlaceOutput(ctx, call.graph_mode && !call.forward_metadata.has_value(),
                                       ends->back(), gathered, &args));
  }
  VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, Profile::kAscendAttn));
  return args;
}

absl::StatusOr<AscendArgs> ResolveHardened(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_RETURN_IF_ERROR(CheckMaskNotGiven(ctx));
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, {}));
  if (call.graph_mode && !call.forward_metadata.has_value() && !ctx.kwargs.contains("output_ws")) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "npu-graph mode (SGLANG_VIT_ENABLE_CUDA_GRAPH) without forward_metadata "
                       "needs the output_ws keyword: the output buffer the graph was captured "
                       "with");
  }
  // The offsets must cover q's rows exactly: hardened mode accepts no
  // per-image padding, whose slots it cannot check.
  VARLEN_ASSIGN_OR_RETURN(TokenSource source, ResolveHardenedTokenSource(ctx, tokens, {}));
  VARLEN_RETURN_IF_ERROR(
      CheckUnusedBoundariesAgree(ctx, source.checked.offsets, source.name, source.unused));
  if (!source.max_seqlen.is_none()) ctx.Note("max_seqlen ignored: the NPU kernel takes none");
  const std::vector<int64_t>& offsets = source.checked.offsets;
  AscendArgs args;
  args.actual_seq_lengths.assign(offsets.begin() + 1, offsets.end());
  args.row_starts.assign(offsets.begin(), offsets.end() - 1);
  VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, Profile::kAscendAttn));
  return args;
}

}  // namespace

absl::StatusOr<AscendArgs> AscendLaunch(std::vector<int64_t> ends, int64_t rows,
                                        const SglangBehavior& sglang) {
  if (ends.empty()) {
    if (!sglang.ascend_unpads_padded_items) {
      return absl::UnimplementedError(
          "an empty actual_seq_lengths: the NPU kernel's error is not modelled");
    }
    return PythonError(PyErrorKind::kIndexError, "list index out of range");  // seq_len_arg[-1]
  }
  const int64_t total = ends.back();
  AscendArgs args;
  int64_t kernel_rows = rows;
  if (sglang.ascend_unpads_padded_items && rows != total) {
    if (ends.size() == 1) {
      // q[:total_tokens], with Python's slice clamping.
      kernel_rows = total < 0 ? std::max<int64_t>(rows + total, 0) : std::min(total, rows);
      args.row_starts = {0};
      args.padded = kernel_rows < rows;
    } else {
      // valid_indices: torch.arange(b * slot, b * slot + length) per image
      // (a negative length fails there), concatenated, then q[valid_indices].
      const int64_t slot = rows / static_cast<int64_t>(ends.size());
      int64_t previous = 0;
      std::vector<int64_t> lengths;
      for (size_t b = 0; b < ends.size(); ++b) {
        lengths.push_back(ends[b] - previous);
        previous = ends[b];
        if (lengths.back() < 0) {
          // torch.arange on q's device is torch_npu's (op-plugin,
          // op_api::arange), whose check says "larger" where CPU torch's says
          // "lower"; torch_npu appends its error-code line ("\n[ERROR] <time>
          // (PID:..) ERR01003 OPS invalid value"), which a message here omits.
          return PythonError(PyErrorKind::kRuntimeError,
                             "upper bound and larger bound inconsistent with step sign");
        }
        args.row_starts.push_back(static_cast<int64_t>(b) * slot);
      }
      for (size_t b = 0; b < ends.size(); ++b) {
        if (lengths[b] > 0 && args.row_starts[b] + lengths[b] > rows) {
          // q[valid_indices] gathers on the NPU: how torch_npu's index kernel
          // answers an index past q is not read from a source.
          return absl::UnimplementedError(
              absl::StrCat("q[valid_indices] with an index past q's ", rows,
                           " rows: the NPU gather's response is not modelled"));
        }
      }
      kernel_rows = total;  // the gathered rows sum to the last end
      args.padded = true;
    }
  } else {
    int64_t previous = 0;
    for (int64_t end : ends) {
      args.row_starts.push_back(previous);
      previous = end;
    }
  }
  if (kernel_rows != total) {
    return PythonError(
        PyErrorKind::kRuntimeError,
        absl::StrCat("queryT(", kernel_rows,
                     ") must be equal to the last element of actualSequenceLengthQ(", total, ")"));
  }
  args.actual_seq_lengths = std::move(ends);
  return args;
}

absl::StatusOr<AscendArgs> ResolveAscend(const ResolveContext& ctx) {
  return ctx.hardened() ? ResolveHardened(ctx) : ResolveFaithful(ctx);
}

}  // namespace varlen::internal
