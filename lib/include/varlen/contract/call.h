// File: varlen/contract/call.h
// -----------------------------------------------------------------------------
//
// The vocabulary of the calling contract: which engine's calling convention a
// backend follows (Engine, Profile), whether resolution reproduces the
// engine exactly or validates everything (Mode), how the backend is reached
// (Entry), the prepared metadata object, and AttentionCall, everything one
// call hands to a backend.
//
// Three engines: SGLang (python/sglang/srt/layers/attention/vision.py, rules
// in docs/contract.md), vLLM (MMEncoderAttention and its custom ops, rules in
// docs/contract-vllm.md) and transformers (its vision towers' attention and
// AttentionInterface, rules in docs/contract-transformers.md).

#ifndef VARLEN_CONTRACT_CALL_H_
#define VARLEN_CONTRACT_CALL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/contract/engine.h"
#include "varlen/contract/platform.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {

// A calling convention: how a backend family obtains its varlen arguments.
// SGLang's are named after its backends ("fa3"), vLLM's after its
// AttentionBackendEnum members, with the FlashAttention version where the
// kernel's checks differ ("FLASH_ATTN/fa2"), transformers' after the
// attn_implementation that selects them ("flash_attention_2").
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
  // vLLM: tensors or None only (the custom ops' schemas), .item() for max.
  kVllmFlashAttnFa2,  // FLASH_ATTN through FlashAttention 2 (checks dtype before device)
  kVllmFlashAttnFa3,  // FLASH_ATTN through FlashAttention 3 (device, contiguity, dtype)
  kVllmTritonAttn,    // TRITON_ATTN: b_start_loc = cu[:-1], lengths from cu, as given
  kVllmTorchSdpa,     // TORCH_SDPA: torch.split by the cu_seqlens diffs, SDPA per chunk
  kVllmFlashinfer,    // FLASHINFER: two-section element offsets [qko | v] + lengths
  // transformers: attn_implementation names. A name containing "flash" takes
  // the varlen path (cu_seq_lens_q/k and max_length_q/k, all four or a dense
  // call over the whole pack); any other splits per sequence.
  kTfFlashAttention2,  // flash_attn's flash_attn_varlen_func (FlashAttention 2)
  kTfFlashAttention3,  // flash_attn_interface's (FlashAttention 3)
  kTfFlashAttention4,  // flash_attn.cute's (FlashAttention 4)
  kTfHubFlashAttn2,    // "kernels-community/flash-attn2": a hub kernel with FA2's signature
  kTfSdpa,             // torch.split per sequence, SDPA per chunk
  kTfEager,            // torch.split per sequence, eager matmul-softmax per chunk
};

// Every profile of every engine, in the order above.
absl::Span<const Profile> AllProfiles();
// The profiles of one engine, in the order above.
absl::Span<const Profile> ProfilesOf(Engine engine);
Engine EngineOf(Profile profile);

absl::string_view ProfileName(Profile profile);  // "flashinfer_cudnn", "FLASH_ATTN/fa2", ...
// "sglang:fa3", "vllm:FLASH_ATTN/fa2": the name with its engine, for listings.
std::string QualifiedProfileName(Profile profile);
// A profile of `engine` by name; an error lists that engine's profiles (and
// says so when the name is another engine's).
absl::StatusOr<Profile> ParseProfile(absl::string_view name, Engine engine = Engine::kSglang);
// A profile of any engine, by its qualified name, or by its name alone;
// a name two engines share ("sdpa") is SGLang's, the default engine's.
absl::StatusOr<Profile> ParseAnyProfile(absl::string_view name);

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
  kTower,   // transformers: the vision tower's forward(hidden_states, grid_thw,
            // **kwargs), which makes cu_seqlens (and its max) from grid_thw
            // before its first block's VisionAttention
};

absl::string_view EntryName(Entry entry);  // "direct", "layer", "tower"
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

// vLLM's MMEncoderAttention(num_heads, head_size, scale, num_kv_heads) as
// the model built it: the layer views q, k and v with these head counts and
// passes its construction-time scale to every kernel.
struct VllmLayer {
  int64_t num_heads = 1;
  int64_t head_size = 64;
  int64_t num_kv_heads = 1;
  std::optional<double> scale;  // None: 1.0 / (head_size ** 0.5)
  bool operator==(const VllmLayer&) const = default;
};

// transformers' tower entry, a tower whose first block attends within
// windows (Qwen2.5-VL: block 0 is a window block unless its config's
// fullatt_block_indexes holds 0): the vision config's sizes that
// get_vision_window_index reads. Unset: the tower attends per frame.
struct TowerWindows {
  int64_t window_size = 112;
  int64_t patch_size = 14;
  int64_t spatial_merge_size = 2;
  bool operator==(const TowerWindows&) const = default;

  // window_size // spatial_merge_size // patch_size: a window's side in
  // merged cells.
  int64_t cells_per_side() const { return window_size / spatial_merge_size / patch_size; }
  // spatial_merge_size ** 2: the tokens of one merged cell.
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
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
  // Tower entry: the tower's windows (unset: one segment per frame).
  std::optional<TowerWindows> tower_windows;
  SdpaOptions sdpa;
  // The version faithful mode reproduces, of the profile's engine.
  EngineVersion version = kLatestSglangVersion;
  // The machine the call runs on; unset: the one the profile's kernel model
  // was read for (no platform rule applies).
  std::optional<Platform> platform;
  // vLLM profiles: the layer. cu_seqlens and kwargs are
  // MMEncoderAttention.forward's arguments.
  VllmLayer vllm_layer;
  // The JSON of the case the harness made this call from (empty for a call
  // made by hand): a worker process makes the same call again from it.
  std::string case_json;
};

}  // namespace varlen

#endif  // VARLEN_CONTRACT_CALL_H_
