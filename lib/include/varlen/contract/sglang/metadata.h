// File: varlen/contract/sglang/metadata.h
// -----------------------------------------------------------------------------
//
// The two metadata builders models call once per ViT forward, and the
// bucketing they apply (contract rules 5-9):
//
//   * PrepareVisionAttentionMetadata: int32 cu_seqlens on the device, their
//     diffs, and max_seqlen (computed with one host sync when not given; a
//     given value is kept unvalidated in faithful mode).
//   * PrepareFlashinferCudnnMetadata: additionally pads the batch to a
//     bucket, builds the element-unit packed indptrs [qk | v | o] (computed
//     in int32, so they wrap silently past 2^31 in faithful mode) and buckets
//     the max. Two host syncs.
//
// In hardened mode both builders validate cu_seqlens first, refuse element
// offsets that would not fit in int32, and stamp the metadata with what they
// proved (see MetadataStamp), so resolution can trust it without a sync.

#ifndef VARLEN_CONTRACT_SGLANG_METADATA_H_
#define VARLEN_CONTRACT_SGLANG_METADATA_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "varlen/contract/call.h"
#include "varlen/core/value.h"

namespace varlen {

inline constexpr std::array<int64_t, 4> kBatchBuckets = {8, 16, 32, 64};
inline constexpr std::array<int64_t, 6> kMaxSeqlenBuckets = {4096,  8192,  16384,
                                                             32768, 65536, 131072};

// B_pad: the first batch bucket >= batch, else batch rounded up to 8.
int64_t PaddedBatchSize(int64_t batch);
// The first max bucket >= real_max, else real_max rounded up to 131072.
int64_t BucketedMaxSeqlen(int64_t real_max);

// Optional keyword arguments of prepare_vision_attention_metadata.
struct PlainMetadataOptions {
  Value max_seqlen;
  Value packed_indptrs;
  Value sequence_lengths;
  Value flashinfer_max_seqlen;
};

// prepare_vision_attention_metadata(cu, device, **options).
absl::StatusOr<VisionAttentionMetadata> PrepareVisionAttentionMetadata(
    const Value& cu_seqlens, Device device, const PlainMetadataOptions& options, Mode mode);

// prepare_flashinfer_cudnn_vision_attention_metadata(cu, device,
// elem_per_token=...).
absl::StatusOr<VisionAttentionMetadata> PrepareFlashinferCudnnMetadata(const Value& cu_seqlens,
                                                                       Device device,
                                                                       int64_t elem_per_token,
                                                                       Mode mode);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_SGLANG_METADATA_H_
