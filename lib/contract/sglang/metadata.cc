#include "varlen/contract/sglang/metadata.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Python's `cu.to(...)` on something that is not a tensor.
absl::StatusOr<Tensor> AsTensorForTo(const Value& cu) {
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kAttributeError,
                       absl::StrCat("'", cu.TypeName(), "' object has no attribute 'to'"));
  }
  return cu.as_tensor();
}

// Hardened: cu_seqlens validated as token offsets of at least one sequence.
absl::StatusOr<std::vector<int64_t>> CheckBuilderOffsets(const Value& cu) {
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("cu_seqlens=", cu.Repr(), " is a ", cu.TypeName(),
                                    ": the metadata builders need an integer tensor"));
  }
  VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                          CheckTokenOffsets(cu.as_tensor(), "cu_seqlens", std::nullopt));
  if (offsets.size() < 2) {
    return PythonError(PyErrorKind::kValueError,
                       "cu_seqlens=[0] describes no sequence: the metadata builders need at "
                       "least one (B+1 >= 2 entries)");
  }
  return offsets;
}

MetadataStamp StampFor(const std::vector<int64_t>& offsets, int64_t elem_per_token,
                       const Tensor& input) {
  MetadataStamp stamp;
  stamp.total_tokens = offsets.back();
  stamp.batch = static_cast<int64_t>(offsets.size()) - 1;
  std::vector<int64_t> lengths = OffsetsToLengths(offsets);
  stamp.longest = *std::max_element(lengths.begin(), lengths.end());
  stamp.elem_per_token = elem_per_token;
  stamp.offsets = offsets;
  stamp.input = input;
  return stamp;
}

}  // namespace

int64_t PaddedBatchSize(int64_t batch) {
  for (int64_t bucket : kBatchBuckets) {
    if (bucket >= batch) return bucket;
  }
  return RoundUp(batch, 8);
}

int64_t BucketedMaxSeqlen(int64_t real_max) {
  for (int64_t bucket : kMaxSeqlenBuckets) {
    if (bucket >= real_max) return bucket;
  }
  return RoundUp(real_max, kMaxSeqlenBuckets.back());
}

absl::StatusOr<VisionAttentionMetadata> PrepareVisionAttentionMetadata(
    const Value& cu_seqlens, Device device, const PlainMetadataOptions& options, Mode mode) {
  std::optional<MetadataStamp> stamp;
  if (mode == Mode::kHardened) {
    VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, CheckBuilderOffsets(cu_seqlens));
    stamp = StampFor(offsets, 0, cu_seqlens.as_tensor());
    if (!options.max_seqlen.is_none()) {
      Longest longest = FindLongest(OffsetsToLengths(offsets), "seq_lens");
      VARLEN_RETURN_IF_ERROR(
          CheckMaxSeqlen(options.max_seqlen, longest.value, longest.source).status());
    }
  }
  VARLEN_ASSIGN_OR_RETURN(Tensor cu, AsTensorForTo(cu_seqlens));
  cu = internal::To(cu, device, DType::kInt32, "cu_seqlens.to(device, torch.int32)");
  Tensor seq_lens = internal::Diff(cu);

  VisionAttentionMetadata metadata;
  metadata.cu_seqlens = Value::FromTensor(cu);
  metadata.seq_lens = Value::FromTensor(seq_lens);
  metadata.max_seqlen = options.max_seqlen;
  if (options.max_seqlen.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(Tensor max, internal::Max(seq_lens));
    VARLEN_ASSIGN_OR_RETURN(Value item, internal::Item(max, "seq_lens.max().item()"));
    metadata.max_seqlen = item;
  }
  metadata.packed_indptrs = options.packed_indptrs;
  metadata.sequence_lengths = options.sequence_lengths;
  metadata.flashinfer_max_seqlen = options.flashinfer_max_seqlen;
  metadata.stamp = stamp;
  return metadata;
}

absl::StatusOr<VisionAttentionMetadata> PrepareFlashinferCudnnMetadata(const Value& cu_seqlens,
                                                                       Device device,
                                                                       int64_t elem_per_token,
                                                                       Mode mode) {
  std::optional<MetadataStamp> stamp;
  if (mode == Mode::kHardened) {
    if (elem_per_token <= 0) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat("elem_per_token=", elem_per_token,
                                      ": it must be positive (heads_per_rank * head_dim)"));
    }
    VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, CheckBuilderOffsets(cu_seqlens));
    VARLEN_RETURN_IF_ERROR(CheckElementOffsetsFitInt32(offsets.back(), "cu_seqlens[-1]",
                                                       elem_per_token, "elem_per_token"));
    stamp = StampFor(offsets, elem_per_token, cu_seqlens.as_tensor());
  }
  VARLEN_ASSIGN_OR_RETURN(Tensor cu_input, AsTensorForTo(cu_seqlens));
  Tensor cu = internal::To(cu_input, device, DType::kInt32, "cu_seqlens.to(device, torch.int32)");
  Tensor seq_lens = internal::Diff(cu);
  const int64_t batch = seq_lens.numel();
  const int64_t batch_padded = PaddedBatchSize(batch);
  if (cu.numel() == 0) {
    return PythonError(PyErrorKind::kIndexError,
                       "index -1 is out of bounds for dimension 0 with size 0");
  }
  const int64_t total = cu.IntAtLogical(cu.numel() - 1);  // device-side cu[-1], no host read
  Tensor padded_indptr = internal::PadTo(cu, batch_padded + 1, total);
  Tensor padded_lengths = internal::PadTo(seq_lens, batch_padded, 0);
  Tensor element_indptr = internal::MulScalar(padded_indptr, elem_per_token);

  VARLEN_ASSIGN_OR_RETURN(Tensor max, internal::Max(seq_lens));
  VARLEN_ASSIGN_OR_RETURN(Value real_max_item, internal::Item(max, "seq_lens.max().item()"));
  VARLEN_ASSIGN_OR_RETURN(int64_t real_max, PyInt(real_max_item, "real_max"));

  PlainMetadataOptions options;
  options.packed_indptrs =
      Value::FromTensor(internal::Cat({element_indptr, element_indptr, element_indptr}));
  options.sequence_lengths = Value::FromTensor(padded_lengths.Reshape({-1, 1, 1, 1}));
  options.flashinfer_max_seqlen = Value::Int(BucketedMaxSeqlen(real_max));
  // SGLang hands the converted tensor on, so the inner .to() is a no-op; the
  // inner builder recomputes its own max: the second .item().
  VARLEN_ASSIGN_OR_RETURN(
      VisionAttentionMetadata metadata,
      PrepareVisionAttentionMetadata(Value::FromTensor(cu), device, options, Mode::kFaithful));
  metadata.stamp = stamp;
  return metadata;
}

}  // namespace varlen
