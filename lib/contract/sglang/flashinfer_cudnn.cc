// flashinfer_cudnn resolution (contract §2.5, rules 10-18, 25).
//
// Faithful mode runs SGLang's nine steps in order. Hardened mode accepts the
// same inputs but proves the packed indptrs describe exactly the sequences it
// is given, at one width, within int32; when sequence_lengths is absent it
// derives everything from token cu_seqlens, as the builder would.

#include <cstdint>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

absl::Status ValueError(absl::string_view message) {
  return PythonError(PyErrorKind::kValueError, message);
}

// Step 2: max_seqlen -> Python int.
absl::StatusOr<int64_t> MaxSeqlenToInt(const Value& max_seqlen) {
  if (max_seqlen.is_tensor()) {
    const Tensor& t = max_seqlen.as_tensor();
    Tensor host = t.device() == Device::kCuda
                      ? To(t, Device::kCpu, t.dtype(), "max_seqlen.detach().cpu()")
                      : t;
    VARLEN_ASSIGN_OR_RETURN(Value item, Item(host, "max_seqlen.item()"));
    return PyInt(item, "max_seqlen");
  }
  return PyInt(max_seqlen, "max_seqlen");
}

// Steps 5-7: the tensors the kernel receives.
absl::StatusOr<FlashinferCudnnArgs> PackArgs(const ResolveContext& ctx,
                                             const Tensor& sequence_lengths, const Tensor& packed,
                                             int64_t max_seqlen) {
  const Device device = ctx.call.q.device();
  Tensor seq_1d = To(sequence_lengths.Reshape({-1}), device, DType::kInt32,
                     "sequence_lengths.view(-1).to(q.device, torch.int32)");
  const int64_t batch = seq_1d.numel();
  Tensor packed_1d = To(packed.Reshape({-1}), device, DType::kInt32,
                        "packed_indptrs.view(-1).to(q.device, torch.int32)");
  const int64_t expected = 3 * (batch + 1);
  if (packed_1d.numel() != expected) {
    return PythonError(PyErrorKind::kRuntimeError,
                       absl::StrCat("packed indptr numel mismatch: got ", packed_1d.numel(),
                                    ", expected ", expected, " (= 3*(B+1))"));
  }
  const int64_t split = batch + 1;
  FlashinferCudnnArgs args;
  args.actual_seq_lens = seq_1d.Reshape({batch, 1, 1, 1});
  args.batch_offsets_qk = packed_1d.Slice(0, split).Reshape({split, 1, 1, 1});
  args.batch_offsets_v = packed_1d.Slice(split, 2 * split).Reshape({split, 1, 1, 1});
  args.batch_offsets_o = packed_1d.Slice(2 * split, 3 * split).Reshape({split, 1, 1, 1});
  args.max_token_per_sequence = max_seqlen;
  args.max_sequence_kv = max_seqlen;
  args.output_4d = ctx.call.q.dim() == 4;
  args.input_shape = ctx.call.q.shape();
  return args;
}

// Step 8 as SGLang computes it: int32 tensor arithmetic over the qk third
// only, upper bound only; `if (...).any()` is a host sync.
absl::Status FaithfulBoundsCheck(const Tensor& q3, const FlashinferCudnnArgs& args) {
  const int64_t width = q3.size(1) * q3.size(2);
  const int32_t total = WrapInt32(q3.numel());  // the Python int is cast to int32
  const int64_t batch = args.actual_seq_lens.numel();
  bool any_out_of_bounds = false;
  for (int64_t i = 0; i < batch; ++i) {
    const int32_t length_elems = WrapInt32(args.actual_seq_lens.IntAt(i) * WrapInt32(width));
    const int32_t end = WrapInt32(int64_t{args.batch_offsets_qk.IntAt(i)} + length_elems);
    any_out_of_bounds |= end > total;
  }
  if (q3.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostSync, "bool((end_elems > total_elems_q).any())");
  }
  if (any_out_of_bounds) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "offset + len out of bounds; packed indptr is wrong");
  }
  return absl::OkStatus();
}

absl::StatusOr<FlashinferCudnnArgs> ResolveFaithful(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  // Step 1: where the lengths, indptrs and max come from.
  Value sequence_lengths, packed, max_seqlen;
  const auto& metadata = call.forward_metadata;
  if (metadata.has_value() && !metadata->packed_indptrs.is_none()) {
    ctx.Note("source: forward_metadata (packed_indptrs, sequence_lengths, flashinfer_max_seqlen)");
    sequence_lengths = metadata->sequence_lengths;
    packed = metadata->packed_indptrs;
    max_seqlen = metadata->flashinfer_max_seqlen;
  } else {
    if (!ctx.kwargs.contains("sequence_lengths")) {
      return PythonError(
          PyErrorKind::kRuntimeError,
          "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend");
    }
    if (!ctx.kwargs.contains("max_seqlen")) {
      return PythonError(
          PyErrorKind::kRuntimeError,
          "max_seqlen should be prepared for vision flashinfer_cudnn attention backend");
    }
    ctx.Note("source: kwargs (sequence_lengths, max_seqlen) and cu_seqlens as packed indptrs");
    sequence_lengths = ctx.kwargs.get("sequence_lengths");
    max_seqlen = ctx.kwargs.get("max_seqlen");
    packed = call.cu_seqlens;
  }
  // Step 2.
  VARLEN_ASSIGN_OR_RETURN(int64_t max_int, MaxSeqlenToInt(max_seqlen));
  // Step 3.
  const Tensor q3 = FlattenBatch(call.q);
  if (call.q.dim() == 4) ctx.Note("q, k, v flattened from [b, s, h, d] to [b*s, h, d]");
  // Steps 4 and 5: the type checks, packed first.
  if (!packed.is_tensor()) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "flashinfer_cudnn expects packed indptrs as a torch.Tensor");
  }
  if (!sequence_lengths.is_tensor()) {
    return PythonError(PyErrorKind::kRuntimeError, "sequence_lengths must be a torch.Tensor");
  }
  // Steps 5-7.
  VARLEN_ASSIGN_OR_RETURN(FlashinferCudnnArgs args,
                          PackArgs(ctx, sequence_lengths.as_tensor(), packed.as_tensor(), max_int));
  // Step 8.
  VARLEN_RETURN_IF_ERROR(FaithfulBoundsCheck(q3, args));
  return args;
}

// Hardened ------------------------------------------------------------------

// Every third of `packed` must be the running sum of lengths x width,
// starting at 0: exactly what the builder makes.
absl::Status CheckPackedIndptrs(const Tensor& packed, absl::string_view name,
                                const std::vector<int64_t>& lengths, int64_t width,
                                int64_t tokens) {
  if (!IsIntegral(packed.dtype())) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat(name, " has dtype ", DTypeName(packed.dtype()),
                                    ": packed indptrs must be int32 or int64"));
  }
  const int64_t batch = static_cast<int64_t>(lengths.size());
  if (packed.numel() != 3 * (batch + 1)) {
    return ValueError(absl::StrCat(
        name, " has ", packed.numel(), " entries but sequence_lengths has ", batch,
        ": packed indptrs must hold 3*(B+1) = ", 3 * (batch + 1), " entries ([qk | v | o])"));
  }
  const int64_t covered = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  if (covered != tokens) {
    return ValueError(absl::StrCat("sum(sequence_lengths)=", covered, " != ", tokens,
                                   " = q.shape[0]: the sequences must cover every packed token"));
  }
  const std::vector<int64_t> values = packed.ToHostInts(absl::StrCat(name, ".tolist()"));
  constexpr absl::string_view kThirds[] = {"qk", "v", "o"};
  for (int64_t third = 0; third < 3; ++third) {
    int64_t expected = 0;
    for (int64_t i = 0; i <= batch; ++i) {
      const int64_t at = third * (batch + 1) + i;
      if (values[at] != expected) {
        return ValueError(absl::StrCat(
            name, "[", at, "]=", values[at], " != ", expected, " (", kThirds[third],
            " offset of sequence ", i,
            "): each offset must be the running sum of sequence_lengths x heads*head_dim (", width,
            ")"));
      }
      if (i < batch) expected += lengths[i] * width;
    }
  }
  return absl::OkStatus();
}

// Builds what prepare_flashinfer_cudnn_vision_attention_metadata would, from
// validated token offsets, on q's device.
struct DerivedPacking {
  Tensor sequence_lengths;
  Tensor packed;
};

DerivedPacking DerivePacking(const Tensor& cu, int64_t width, Device device) {
  Tensor cu32 = To(cu, device, DType::kInt32, "cu_seqlens.to(q.device, torch.int32)");
  Tensor lengths = Diff(cu32);
  const int64_t padded = PaddedBatchSize(lengths.numel());
  Tensor indptr = MulScalar(PadTo(cu32, padded + 1, cu32.IntAtLogical(cu32.numel() - 1)), width);
  return {PadTo(lengths, padded, 0).Reshape({-1, 1, 1, 1}), Cat({indptr, indptr, indptr})};
}

absl::StatusOr<int64_t> HardenedMax(const ResolveContext& ctx, const Value& max_seqlen,
                                    const Longest& longest, absl::string_view name) {
  if (max_seqlen.is_none()) {
    const int64_t bucket = BucketedMaxSeqlen(longest.value);
    ctx.Note(absl::StrCat(name, " not given: bucketed from the longest sequence (", longest.value,
                          ") to ", bucket));
    return bucket;
  }
  return CheckMaxSeqlen(max_seqlen, longest.value, longest.source, name);
}

absl::StatusOr<FlashinferCudnnArgs> ResolveHardened(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, {.allow_4d = true}));
  const Tensor q3 = FlattenBatch(call.q);
  const Tensor k3 = FlattenBatch(call.k);
  const Tensor v3 = FlattenBatch(call.v);
  if (k3.size(1) != q3.size(1) || v3.size(1) != q3.size(1)) {
    return ValueError(absl::StrCat(
        "k has ", k3.size(1), " heads and v has ", v3.size(1), " but q has ", q3.size(1),
        ": flashinfer_cudnn offsets q, k and v with one per-token width, so heads must match"));
  }
  if (v3.size(2) != q3.size(2)) {
    return ValueError(
        absl::StrCat("v has head_dim ", v3.size(2), " but q has ", q3.size(2),
                     ": flashinfer_cudnn offsets v with the q/k width, so head dims must match"));
  }
  const int64_t width = q3.size(1) * q3.size(2);
  VARLEN_RETURN_IF_ERROR(
      CheckElementOffsetsFitInt32(tokens, "q.shape[0]", width, "heads*head_dim"));

  // Whichever source the kernel's arguments come from, every other
  // description of the sequences must agree with it.
  constexpr unsigned kMetadataFields =
      kMetadataCuSeqlens | kMetadataSeqLens | kMetadataPackedIndptrs | kMetadataSequenceLengths;
  const auto& metadata = call.forward_metadata;
  if (metadata.has_value() && !metadata->packed_indptrs.is_none()) {
    constexpr unsigned kUnused =
        kCuSeqlensArgument | kSequenceLengthsKwarg | kMetadataCuSeqlens | kMetadataSeqLens;
    VARLEN_ASSIGN_OR_RETURN(Tensor packed, RequireTensorField(metadata->packed_indptrs,
                                                              "forward_metadata.packed_indptrs"));
    VARLEN_ASSIGN_OR_RETURN(Tensor seq, RequireTensorField(metadata->sequence_lengths,
                                                           "forward_metadata.sequence_lengths"));
    if (metadata->stamp.has_value() && metadata->stamp->elem_per_token > 0) {
      const MetadataStamp& stamp = *metadata->stamp;
      if (stamp.total_tokens != tokens) {
        return ValueError(absl::StrCat("forward_metadata was built for ", stamp.total_tokens,
                                       " tokens but q has ", tokens,
                                       ": metadata must be rebuilt for every batch"));
      }
      if (stamp.elem_per_token != width) {
        return ValueError(absl::StrCat(
            "forward_metadata was built with elem_per_token=", stamp.elem_per_token,
            " but q has heads*head_dim=", width, ": the packed offsets use the wrong width"));
      }
      ctx.Note("source: forward_metadata stamped by a hardened builder; checked on the host");
      VARLEN_RETURN_IF_ERROR(CheckUnusedBoundariesAgree(
          ctx, stamp.offsets, "forward_metadata.packed_indptrs", kUnused));
      VARLEN_ASSIGN_OR_RETURN(
          int64_t max_int,
          HardenedMax(ctx, metadata->flashinfer_max_seqlen,
                      {.value = stamp.longest, .source = "the longest sequence of the metadata"},
                      "forward_metadata.flashinfer_max_seqlen"));
      return PackArgs(ctx, seq, packed, max_int);
    }
    ctx.Note("source: forward_metadata not built by a hardened builder; validated");
    VARLEN_ASSIGN_OR_RETURN(
        std::vector<int64_t> lengths,
        CheckSequenceLengths(metadata->sequence_lengths, "forward_metadata.sequence_lengths"));
    VARLEN_RETURN_IF_ERROR(
        CheckPackedIndptrs(packed, "forward_metadata.packed_indptrs", lengths, width, tokens));
    VARLEN_RETURN_IF_ERROR(CheckUnusedBoundariesAgree(ctx, LengthsToOffsets(lengths),
                                                      "forward_metadata.packed_indptrs", kUnused));
    VARLEN_ASSIGN_OR_RETURN(int64_t max_int,
                            HardenedMax(ctx, metadata->flashinfer_max_seqlen,
                                        FindLongest(lengths, "forward_metadata.sequence_lengths"),
                                        "forward_metadata.flashinfer_max_seqlen"));
    return PackArgs(ctx, seq, packed, max_int);
  }

  const Value sequence_lengths = ctx.kwargs.get("sequence_lengths");
  if (sequence_lengths.is_none()) {
    const Value& cu_seqlens = call.cu_seqlens;
    if (cu_seqlens.is_none() || (cu_seqlens.kind() == Value::Kind::kSingletonCache &&
                                 !cu_seqlens.as_cache()->data.has_value())) {
      return ValueError(absl::StrCat(
          "sequence_lengths=None and cu_seqlens=", cu_seqlens.Repr(),
          ": flashinfer_cudnn needs the sequence boundaries prepared (packed metadata, "
          "sequence_lengths with packed indptrs, or token cu_seqlens); it never assumes one "
          "sequence per batch item"));
    }
    ctx.Note("sequence_lengths not given: derived from the diffs of token cu_seqlens");
    VARLEN_ASSIGN_OR_RETURN(Tensor cu, HardenedResolveSeqlens(ctx));
    VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                            CheckTokenOffsets(cu, "cu_seqlens", tokens));
    VARLEN_RETURN_IF_ERROR(CheckUnusedBoundariesAgree(ctx, offsets, "cu_seqlens", kMetadataFields));
    VARLEN_ASSIGN_OR_RETURN(int64_t max_int,
                            HardenedMax(ctx, ctx.kwargs.get("max_seqlen"),
                                        LongestOfOffsets(offsets, "cu_seqlens"), "max_seqlen"));
    DerivedPacking derived = DerivePacking(cu, width, call.q.device());
    return PackArgs(ctx, derived.sequence_lengths, derived.packed, max_int);
  }
  ctx.Note("source: kwargs sequence_lengths and cu_seqlens as packed indptrs; validated");
  VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, CheckSequenceLengths(sequence_lengths));
  if (!call.cu_seqlens.is_tensor()) {
    return PythonError(
        PyErrorKind::kTypeError,
        absl::StrCat("cu_seqlens=", call.cu_seqlens.Repr(), " is a ", call.cu_seqlens.TypeName(),
                     ": with sequence_lengths given, flashinfer_cudnn needs the "
                     "packed element indptrs as a tensor"));
  }
  const Tensor& packed = call.cu_seqlens.as_tensor();
  VARLEN_RETURN_IF_ERROR(CheckPackedIndptrs(packed, "cu_seqlens", lengths, width, tokens));
  VARLEN_RETURN_IF_ERROR(CheckUnusedBoundariesAgree(ctx, LengthsToOffsets(lengths),
                                                    "sequence_lengths", kMetadataFields));
  VARLEN_ASSIGN_OR_RETURN(int64_t max_int,
                          HardenedMax(ctx, ctx.kwargs.get("max_seqlen"),
                                      FindLongest(lengths, "sequence_lengths"), "max_seqlen"));
  return PackArgs(ctx, sequence_lengths.as_tensor(), packed, max_int);
}

}  // namespace

absl::StatusOr<FlashinferCudnnArgs> ResolveFlashinferCudnn(const ResolveContext& ctx) {
  VARLEN_ASSIGN_OR_RETURN(FlashinferCudnnArgs args,
                          ctx.hardened() ? ResolveHardened(ctx) : ResolveFaithful(ctx));
  // Step 9, after every check: the scale handed to the kernel.
  VARLEN_ASSIGN_OR_RETURN(args.scale, ResolveSoftmaxScale(ctx, Profile::kFlashinferCudnn));
  return args;
}

}  // namespace varlen::internal
