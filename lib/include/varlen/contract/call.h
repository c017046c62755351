// File: varlen/contract/call.h
// -----------------------------------------------------------------------------
//
// The vocabulary of the calling contract: which calling convention a backend
// follows (Profile), whether resolution reproduces SGLang exactly or
// validates everything (Mode), how the backend is reached (Entry), the
// prepared metadata object, and AttentionCall, everything one call hands to
// a backend.
//
// The model follows python/sglang/srt/layers/attention/vision.py; the rules
// it reproduces are listed in docs/contract.md.

#ifndef VARLEN_CONTRACT_CALL_H_
#define VARLEN_CONTRACT_CALL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/contract/sglang_version.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {

// A calling convention: how a backend family obtains its varlen arguments.
enum class Profile {
  kFlashinferCudnn,  // padded lengths + element-unit packed indptrs
  kFa3,              // int32 token cu_seqlens on q's device + int max_seqlen
  kTritonAttn,       // cu_seqlens as given + per-sequence lengths + max
  kSdpa,             // a boolean mask built on the host from cu_seqlens
  kFa4,              // fa3's convention through FlashAttention 4 (no window, no sinks)
  kAiterAttn,        // int32 cu_seqlens on q's device; max always from .max().item()
  kAscendAttn,       // cumulative ends cu_seqlens[1:] as a host list (the NPU's TND layout)
  kAmxAttn,          // cu_seqlens or uniform offsets; no metadata, no softmax_scale
  kXpuAttn,          // fa3's convention on Intel XPUs (metadata read before 0.5.18)
};

// Every profile, in the order above.
absl::Span<const Profile> AllProfiles();

absl::string_view ProfileName(Profile profile);  // "flashinfer_cudnn", "fa3", ...
absl::StatusOr<Profile> ParseProfile(absl::string_view name);

enum class Mode {
  kFaithful,  // SGLang's behaviour: quirks, silent corruptions and messages
  kHardened,  // the same inputs, but no bad argument gets through
};

absl::string_view ModeName(Mode mode);  // "faithful", "hardened"
absl::StatusOr<Mode> ParseMode(absl::string_view name);

enum class Entry {
  kDirect,  // backend.forward(...) called with exactly the caller's kwargs
  kLayer,   // through VisionAttention.forward, which always passes the keys
            // sequence_lengths, max_seqlen and output_ws (None when absent)
};

absl::string_view EntryName(Entry entry);  // "direct", "layer"
absl::StatusOr<Entry> ParseEntry(absl::string_view name);

// What a hardened builder proved about the metadata it built, recorded on
// the host while it built it. Hardened resolution checks a stamped metadata
// object against q with host integers only, so it needs no host sync.
struct MetadataStamp {
  int64_t total_tokens = 0;
  int64_t batch = 0;             // real sequences, before padding
  int64_t longest = 0;           // the true maximum sequence length
  int64_t elem_per_token = 0;    // 0 unless built for flashinfer_cudnn
  std::vector<int64_t> offsets;  // the validated token offsets, read on the host
  // The cu_seqlens tensor the builder was given: a caller that hands the same
  // tensor to the layer describes the same sequences (no need to read it).
  Tensor input;
};

// SGLang's VisionAttentionMetadata. Builders fill it with tensors and ints;
// a hand-built object may hold anything, including None, so fields are
// Values.
struct VisionAttentionMetadata {
  Value cu_seqlens;                    // int32 token offsets, B+1
  Value seq_lens;                      // int32, B
  Value max_seqlen;                    // int
  Value packed_indptrs;                // flashinfer_cudnn only: 3*(B_pad+1) int32
  Value sequence_lengths;              // flashinfer_cudnn only: (B_pad,1,1,1) int32
  Value flashinfer_max_seqlen;         // flashinfer_cudnn only: the bucketed max
  std::optional<MetadataStamp> stamp;  // set by hardened builders only
};

// Options of SGLang's SDPA backend fixed at construction (SGLang's defaults;
// Qwen-style encoders construct it with flatten_batch=True).
struct SdpaOptions {
  bool flatten_batch = false;  // block-diagonal mask over cu_seqlens
  bool softmax_in_single_precision = false;
  // The constructor's softmax_scale; unset is None (1 / math.sqrt(head_dim)).
  // Through the layer, VisionAttention passes its own softmax_scale instead.
  std::optional<double> softmax_scale;
  bool operator==(const SdpaOptions&) const = default;
};

// Everything a caller hands to a backend's forward().
struct AttentionCall {
  // [T, H, D], or [b, s, H, D] (flashinfer_cudnn only). Views of one fused
  // projection output are strided: their token stride is (H + 2*KV) * D.
  Tensor q, k, v;
  int64_t bsz = 1;
  int64_t seq_len = 0;  // the layer passes s = tokens per batch item
  Value cu_seqlens;     // None, a Tensor, a SingletonCache or a list
  std::optional<VisionAttentionMetadata> forward_metadata;  // nullopt is None
  Kwargs kwargs;  // sequence_lengths, max_seqlen, output_ws, softmax_scale
  Entry entry = Entry::kDirect;
  bool graph_mode = false;  // SGLANG_VIT_ENABLE_CUDA_GRAPH
  // Through the layer: rotary position embeddings replace q and k with new
  // dense tensors (v stays as the projection left it).
  bool rotary = false;
  SdpaOptions sdpa;
  SglangVersion sglang = kLatestSglangVersion;  // what faithful mode reproduces
};

}  // namespace varlen

#endif  // VARLEN_CONTRACT_CALL_H_
