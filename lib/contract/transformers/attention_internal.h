// Internal to transformers' resolvers: what VisionAttention (layer.cc) hands
// the attention function registered under the implementation's name, and
// the two ways that function's arguments reach a kernel: the flash path
// (flash.cc) and per-sequence attention (split.cc).

#ifndef VARLEN_LIB_CONTRACT_TRANSFORMERS_ATTENTION_INTERNAL_H_
#define VARLEN_LIB_CONTRACT_TRANSFORMERS_ATTENTION_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "resolve_internal.h"
#include "varlen/contract/transformers/version.h"

namespace varlen::internal {

// The keywords of one call of an attention interface function
// (fn(module, query, key, value, attention_mask, ...)), as it receives them.
// The caller's other keywords stay in the ResolveContext's kwargs: the
// function's **kwargs.
struct InterfaceCall {
  Value attention_mask;
  Value scaling;
  Value dropout;
  Value cu_seq_lens_q, cu_seq_lens_k;
  Value max_length_q, max_length_k;
  Value is_causal;
};

// The band faithful mode reproduces (hardened mode reads none).
const TransformersBehavior& TransformersBehaviorOf(const ResolveContext& ctx);

// flash_attention_forward (integrations/flash_attention.py) through
// _flash_attention_forward's branches and the kernel's Python binding.
absl::StatusOr<ResolvedArgs> ResolveFlashInterface(const ResolveContext& ctx, Profile profile,
                                                   const InterfaceCall& in);

// flash_attention_forward's refusal of a query ([1, H, T, D]) with an
// empty dimension.
absl::Status FlashZeroDimensionError();

// The FlashVarlenArgs of the kernel a flash implementation's name loads in
// the band, with the entry checks of its build.
FlashVarlenArgs FlashKernelArgs(const ResolveContext& ctx, Profile profile);

// sdpa_attention_forward or eager_attention_forward called once over the
// whole of q, k and v: the varlen keywords fall into **kwargs, unread.
absl::StatusOr<ResolvedArgs> ResolveDenseInterface(const ResolveContext& ctx, Profile profile,
                                                   const InterfaceCall& in);

// VisionAttention's split path: torch.split by cu_seqlens' differences, the
// interface function once per sequence (SDPA or eager; in 4.57.6 also the
// flash names other than flash_attention_2, each sequence a dense flash call).
absl::StatusOr<ResolvedArgs> ResolveSplit(const ResolveContext& ctx, Profile profile,
                                          const Value& cu_seqlens, double scaling);

// module.scaling: head_dim ** -0.5, as Python computes it.
double ModuleScaling(int64_t head_dim);

// Whether the implementation's name contains "flash".
bool IsFlashName(Profile profile);

// VisionAttention.forward given one of the keywords it passes the
// interface itself, in its **kwargs.
absl::Status CheckLayerKeywords(const ResolveContext& ctx);

// Whether the band's flash gate sends `profile` to the flash path (one
// interface call over the pack) rather than the split path.
bool TakesFlashPath(const ResolveContext& ctx, Profile profile);

// The max VisionAttention.forward computes or takes for its flash call, by
// band (a 0-d tensor, or one .item(), or the caller's value).
absl::StatusOr<Value> LayerMaxSeqlen(const ResolveContext& ctx, const Value& cu);

// The "tower" entry up to its first block (tower.cc): the layer call the
// block makes, with the tower's cu_seqlens (and, from 5.15.0, its max) made
// from grid_thw or taken from the tower's **kwargs.
absl::StatusOr<AttentionCall> TowerLayerCall(const AttentionCall& call, Profile profile, Mode mode,
                                             std::vector<std::string>* notes);

// The split path's lengths: cu_seqlens' differences, read on the host once
// per q, k and v and checked as torch.split checks them.
absl::StatusOr<std::vector<int64_t>> SplitLengths(const ResolveContext& ctx, const Value& cu);

}  // namespace varlen::internal

#endif  // VARLEN_LIB_CONTRACT_TRANSFORMERS_ATTENTION_INTERNAL_H_
