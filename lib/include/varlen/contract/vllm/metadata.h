// File: varlen/contract/vllm/metadata.h
// -----------------------------------------------------------------------------
//
// vLLM's encoder metadata builders, the classmethods of MMEncoderAttention
// that models (Qwen3-VL's prepare_encoder_metadata and the towers like it)
// call once per forward on host token offsets, and hand every block as the
// three keywords cu_seqlens, max_seqlen and sequence_lengths:
//
//   * compute_max_seqlen: the longest sequence for FLASH_ATTN, TRITON_ATTN
//     and FLASHINFER (0 for TORCH_SDPA), FLASHINFER's bucketed from 1024;
//     handed over as a 0-d host int32 tensor (no host sync at .item()).
//   * maybe_compute_seq_lens: FLASHINFER only, the lengths zero-padded to a
//     batch bucket, copied to the device.
//   * maybe_recompute_cu_seqlens: FLASHINFER turns token offsets into two
//     sections of element offsets [q, k and o | v], v's three times q's
//     (v is a strided view of the fused qkv projection), each padded by
//     repeating its last entry. The product is taken in the offsets' own
//     dtype, so int32 offsets wrap silently (the v section first).
//
// In hardened mode the builder validates the offsets and refuses element
// offsets that would wrap.

#ifndef VARLEN_CONTRACT_VLLM_METADATA_H_
#define VARLEN_CONTRACT_VLLM_METADATA_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "varlen/contract/call.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {

inline constexpr std::array<int64_t, 8> kVllmMaxSeqlenBuckets = {1024,  2048,  4096,  8192,
                                                                 16384, 32768, 65536, 131072};

// bucket_flashinfer_max_seqlen: <= 0 -> 1024; the first bucket >= real_max;
// else real_max rounded up to 131072 (saturated at the int64 maximum).
int64_t VllmBucketedMaxSeqlen(int64_t real_max);

// What the builders are given besides the offsets.
struct VllmMetadataOptions {
  int64_t hidden_size = 0;  // the tower's hidden size (all ranks)
  int64_t tp_size = 1;
  // FP8 attention: heads * round_up(head_size, 16); the sections then share
  // one scale (quantized q, k and v are contiguous).
  std::optional<int64_t> fp8_padded_hidden_size;
};

// The three keywords one forward hands every block.
struct VllmEncoderMetadata {
  Value cu_seqlens;        // device tensor, in the offsets' dtype
  Value max_seqlen;        // 0-d host int32 tensor
  Value sequence_lengths;  // None unless FLASHINFER
};

// The builders for `profile` on host token offsets `cu` (a 1-d integer host
// tensor, as the model's NumPy array), results on `device`.
absl::StatusOr<VllmEncoderMetadata> PrepareVllmEncoderMetadata(Profile profile, const Tensor& cu,
                                                               const VllmMetadataOptions& options,
                                                               Device device, Mode mode);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_VLLM_METADATA_H_
