// File: varlen/contract/transformers/version.h
// -----------------------------------------------------------------------------
//
// The transformers releases faithful mode models, one per band of its vision
// attention's history, and the steps in which they differ. transformers is
// the third engine of the contract: its vision towers (Qwen2/2.5/3-VL,
// GLM-4V, and 39 model families in 5.25.0) hand a packed sequence to an
// attention function chosen by name, with rules neither SGLang nor vLLM
// has. The transformers resolver reads every version-dependent step from
// one TransformersBehavior. Hardened mode is version-independent.
//
//   4.57.6   the last 4.x: only "flash_attention_2" takes the varlen path;
//            the vision max is a 0-d tensor computed in every layer
//   5.14.1   the substring gate ("flash" in the name); still a 0-d tensor
//   5.25.0   a caller's max_seqlen wins, a Python int otherwise (PR #47170)
//
// docs/contract-transformers.md lists the rules and the case of each.

#ifndef VARLEN_CONTRACT_TRANSFORMERS_VERSION_H_
#define VARLEN_CONTRACT_TRANSFORMERS_VERSION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varlen {

// Oldest first, in the order of the engine's EngineModel::versions
// (engine.h), whose names they are.
enum class TransformersVersion {
  k4_57_6,
  k5_14_1,
  k5_25_0,  // the latest release
};

inline constexpr TransformersVersion kLatestTransformersVersion = TransformersVersion::k5_25_0;

absl::string_view TransformersVersionName(TransformersVersion version);  // "5.25.0"
absl::StatusOr<TransformersVersion> ParseTransformersVersion(absl::string_view name);

// What differs between the bands, one field per difference.
struct TransformersBehavior {
  // VisionAttention's flash gate: `"flash" in name` (5.x) or
  // `name == "flash_attention_2"` (4.53.1 to 4.57.x, where every other
  // flash name splits per image and calls the dense kernel per image).
  bool substring_flash_gate = true;
  // The max the layer hands the kernel: the caller's max_seqlen when given,
  // else one int per tower (5.15.0 on), or its own
  // (cu_seqlens[1:] - cu_seqlens[:-1]).max(), a 0-d tensor, in every layer.
  bool caller_max_wins = true;
  // The kernel a flash name loads: its own (5.x), or always flash_attn's
  // FlashAttention 2 (4.57.x: flash_attention_forward passes the name as
  // `attn_implementation=`, which _flash_attention_forward's **kwargs
  // swallows, so _lazy_imports gets None).
  bool kernel_by_name = true;
  // "flash_attention_4" is a registered implementation (5.x).
  bool registers_flash_attention_4 = true;
  // flash_attention_forward pads v to q's head dim (F.pad by the
  // difference, which crops a wider v), 5.25.0.
  bool pads_value_to_query_head_dim = true;
  // The vision module has num_key_value_groups (= 1, 5.x): SDPA then
  // repeats k and v by it, a no-op, and fewer key heads meet the query's in
  // a broadcast; without it (4.57.x) sdpa_attention_forward passes
  // enable_gqa=True.
  bool module_has_kv_groups = true;
  // sdpa_attention_forward's final reshape of an empty segment's output
  // raises (5.25.0); older bands return the empty output.
  bool sdpa_empty_segment_raises = true;
  // The tower takes a caller's precomputed cu_seqlens from its **kwargs
  // (get_vision_cu_seqlens pops it, 5.x); 4.57.x computes its own inline and
  // passes the caller's beside it to every block.
  bool tower_takes_precomputed_cu_seqlens = true;
  // Qwen2.5-VL's windows come from vision_utils.get_vision_window_index
  // (5.x: grid_thw.tolist(), the offsets on grid_thw's device, a caller's
  // window_index and cu_window_seqlens taken when both are given); 4.57.x's
  // get_window_index method iterates grid_thw as 0-d tensors and puts the
  // offsets on the hidden states' device.
  bool tower_windows_from_vision_utils = true;
  // _flash_attention_forward's packed position_ids (H8, step 4). 4.x and
  // 5.14.x run _is_packed_sequence before any branch (its errors raise
  // whatever the other keywords) and take the varlen branch when it holds,
  // with a caller's cu_seq_lens_q/k where both are given; 5.25.0 tries it
  // only when the four varlen keywords are not all given, after its shape
  // tests (batch size 1, more than one position).
  bool packed_check_before_branches = false;
  // Sequences start where position_ids equals its minimum (5.25.0), or 0.
  bool packed_starts_at_min = true;
  // position_ids.view(-1) (4.x; a view torch cannot make raises), or
  // reshape(-1).
  bool packed_flattens_by_view = false;
  // The derived max: .item(), an int (4.x), or a 0-d tensor (5.x, #48353).
  bool packed_max_item = false;
  // sdpa_attention_forward passes is_causal only for more than one query
  // (`q_length > 1 and attention_mask is None and is_causal`, 5.x); 4.x
  // passes a caller's is_causal as it is.
  bool sdpa_causal_needs_several_queries = true;
};

const TransformersBehavior& BehaviorOf(TransformersVersion version);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_TRANSFORMERS_VERSION_H_
