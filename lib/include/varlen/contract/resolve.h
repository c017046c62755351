// File: varlen/contract/resolve.h
// -----------------------------------------------------------------------------
//
// Resolve() turns whatever a caller passed (AttentionCall) into the native
// arguments of one calling convention (ResolvedArgs), in one of two modes:
//
//   * faithful: SGLang's resolution, step for step. Errors carry SGLang's
//     Python kind and exact message; bad values it lets through (a too-small
//     max_seqlen, a wrong elements-per-token, wrapped int32 offsets) are let
//     through here too, and surface later as numerical corruption.
//   * hardened: the same inputs, but every argument is validated; an error
//     names the argument, the value and the rule.
//
// Whatever the outcome, the Resolution records what resolution made the
// device do (host syncs, copies, casts) and a few notes on the path taken.
//
// Example:
//   AttentionCall call = ...;
//   Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
//   if (!r.status.ok()) std::cout << FormatPythonError(r.status);

#ifndef VARLEN_CONTRACT_RESOLVE_H_
#define VARLEN_CONTRACT_RESOLVE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "varlen/contract/call.h"
#include "varlen/contract/variant.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {

// cudnn_batch_prefill_with_kv_cache's varlen arguments (contract rule 17).
struct FlashinferCudnnArgs {
  Tensor actual_seq_lens;   // (B, 1, 1, 1) int32 on q's device, B padded
  Tensor batch_offsets_qk;  // (B+1, 1, 1, 1) int32 element offsets, q and k
  Tensor batch_offsets_v;
  Tensor batch_offsets_o;
  int64_t max_token_per_sequence = 0;
  int64_t max_sequence_kv = 0;
  double scale = 0.0;
  bool output_4d = false;  // q arrived as [b, s, h, d]; the output is reshaped back
  Shape input_shape;       // q's shape as the caller passed it
  // SGLang builds cuDNN's graph for dense [T, H, D] whatever q, k and v's
  // strides; vLLM hands v as the strided view of its fused projection, read
  // with its own strides (its v offsets are in those units).
  bool inputs_as_strided = false;
};

// The varlen arguments of the flash_attn_varlen_func family (fa3, fa4,
// aiter_attn, amx_attn and xpu_attn call one each; vLLM's FLASH_ATTN). The
// values are whatever resolution produced (a hand-built metadata object, a
// graph-mode list or a vLLM caller can hand the kernel anything); the kernel
// entry checks them.
struct FlashVarlenArgs {
  absl::string_view kernel = "flash_attn_varlen_func";  // the function called
  Value cu_seqlens;  // used for both q and k
  Value max_seqlen;  // used for both q and k
  double scale = 0.0;
  // vLLM's fa_version=2 or 3: the FlashAttention build whose C++ entry checks
  // cu_seqlens (FA2: dtype, device, contiguity; FA3: device, contiguity,
  // dtype). 0 for SGLang's kernels, whose entry is `sglang_entry`.
  int fa_version = 0;
  enum class SglangEntry {
    kUnread,  // entry checks not read from a source (xpu)
    kAmx,     // sgl-kernel's CPU flash_attn_varlen_func (csrc/cpu/flash_attn.cpp)
    kFa3,     // FA3's mha_fwd behind the wrapper of the build SGLang loads
    kFa4,     // FA4's CuTe interface as SGLang vendors it (on sm100)
    kAiter,   // aiter's flash_attn_varlen_func to CK's or the assembly's entry (gfx942)
  };
  SglangEntry sglang_entry = SglangEntry::kUnread;
  // Faithful mode's softmax_scale as the caller passed it. A non-number is
  // refused or taken at the kernel's entry, in its own order
  // (`scale_not_modelled`); a float, int or bool has `scale`.
  Value scale_argument;
  absl::Status scale_not_modelled;
  // fa_version 2 compiled with FLASHATTENTION_DISABLE_UNEVEN_K (the case's
  // platform says so): set_params_fprop refuses a head size other than its
  // rounded one.
  bool disables_uneven_k = false;
  // flash_attn's own Python wrapper (FA2 as transformers loads it) pads q, k
  // and v's head dims by q's remainder to a multiple of 8 before the op
  // checks them, and slices the output back; vLLM's build does not.
  bool pads_head_dim_to_8 = false;
  // What the kernel computes besides full attention: SGLang's fa3 and
  // xpu_attn hand the caller's window_size and s_aux (as sinks) to it.
  AttentionVariant variant;
  // FA4 through flash_attn.cute: the CuTe DSL's position of max_seqlen_q,
  // where it refuses a tensor (DSLRuntimeError); 0 where that conversion is
  // not modelled (SGLang's vendored copy).
  int dsl_max_seqlen_position = 0;
};

// context_attention_fwd's varlen arguments.
struct TritonArgs {
  Value cu_seqlens;  // neither cast nor moved on the kwargs path
  Value seq_lens;
  Value max_seqlen;
  bool output_from_workspace = false;  // graph mode writes into output_ws
  Value output_ws;
  double scale = 0.0;
  // Faithful mode's non-number softmax_scale: the kernel reads sm_scale only
  // as a launch argument, so the launch decides (BindTriton).
  absl::Status scale_not_modelled;
};

// The SDPA backend's boolean mask, built on the host from cu_seqlens, and
// the torch path that applies it (modelled on torch 2.15 on the CPU).
struct SdpaArgs {
  enum class Mask {
    kBlockDiagonal,  // flatten_batch: [1, s, s], True on each block (their union)
    kPadding,        // [n, 1, s, s]: (row < len) & (col < len) per mask item
    kNone,           // no cu_seqlens and no mask: plain attention per item
  };
  Mask mask = Mask::kNone;
  std::vector<int64_t> cu_seqlens;  // host copy the mask is built from (integer values)
  // kBlockDiagonal: the [begin, end) rows and keys of each block, after
  // Python's slice clamping to [0, s).
  std::vector<std::pair<int64_t, int64_t>> blocks;
  // kPadding: rows (and keys) each mask item keeps, in [0, s]. One item is
  // broadcast to every batch item; otherwise there is one per batch item.
  std::vector<int64_t> kept;
  int64_t bsz = 1;
  int64_t tokens_per_item = 0;  // s = q.shape[0] // bsz
  double scale = 0.0;           // the construction-time scale
  // softmax_in_single_precision: a row whose mask is all False gets equal
  // weights over the item's keys (the mask adds finfo.min to every logit);
  // on the SDPA path such a row is 0.
  bool single_precision = false;
  // is_causal=True reached torch's SDPA: each item attends causally
  // (top-left aligned), over the whole item (no mask).
  bool causal = false;
};

// torch_npu.npu_fused_infer_attention_score's varlen arguments (input_layout
// "TND", sparse_mode 0): one host list of cumulative ends for q and kv.
struct AscendArgs {
  std::vector<int64_t> actual_seq_lengths;  // as the list holds them
  // Where each sequence's rows start in q, k and v as the backend received
  // them: the previous end, unless 0.5.23 dropped per-image padding first
  // (then image b's rows start at b * (rows / images), and the result goes
  // back to those rows of an empty_like(q) output).
  std::vector<int64_t> row_starts;
  bool padded = false;                 // rows outside the sequences are never written
  bool output_from_workspace = false;  // npu-graph mode with padding writes into output_ws
  Value output_ws;
  double scale = 0.0;
};

struct ResolvedArgs {
  Profile profile = Profile::kFa3;  // the calling convention resolved
  std::variant<FlashinferCudnnArgs, FlashVarlenArgs, TritonArgs, SdpaArgs, AscendArgs> args;
  // The q, k and v the backend receives. Called directly, the caller's;
  // through the layer, flattened to [T, H, D] and, unless the layer passes
  // strided views to this backend, contiguous copies.
  Tensor q, k, v;
  // What the library raises after the kernel returned, when it does (vLLM's
  // einops rearrange of a batch of 0, its reshape of an empty output): the
  // kernel's own entry checks come first (BindForKernel returns this after
  // them).
  absl::Status after_kernel;
};

// The outcome of one resolution.
struct Resolution {
  absl::Status status;               // OK, or the error resolution raised
  std::optional<ResolvedArgs> args;  // set exactly when status is OK
  std::vector<DeviceEvent> events;   // host syncs, copies, casts, in order
  std::vector<std::string> notes;    // the path taken, for reports
  // Keywords the caller passed that nothing on the way read, when the call
  // went through: a typo (max_seq_len) or a keyword this backend ignores
  // (window_size) changes nothing. Hardened mode refuses those that ask for
  // something on SGLang's profiles, whose forward(..., **kwargs) swallows
  // any keyword.
  std::vector<std::string> unread_keywords;

  DeviceEventCounts counts() const;
};

// The softmax scale `profile`'s code computes when handed None, bit for bit
// as Python computes it (C's pow() is what Python's float ** calls):
//   flashinfer_cudnn  head_size ** -0.5               (SGLang)
//   fa3               q.shape[-1] ** (-0.5)           (the FlashAttention 3 wrapper)
//   triton_attn       1.0 / (Lq ** 0.5)               (context_attention_fwd)
//   sdpa              1.0 / math.sqrt(head_size)      (SGLang's constructor)
//   fa4               1.0 / math.sqrt(head_dim)       (FlashAttention 4's interface)
//   aiter_attn        q.shape[-1] ** (-0.5)           (aiter's interface)
//   ascend_attn       head_size**-0.5                 (SGLang)
//   amx_attn          1.0 / sqrt(head_size)           (sgl_kernel's CPU kernel; SGLang
//                                                      passes no scale at all)
//   xpu_attn          q.shape[-1] ** (-0.5)           (sgl_kernel's XPU interface)
//   vLLM's profiles   1.0 / (head_size**0.5)          (MMEncoderAttention's constructor)
double DefaultSoftmaxScale(Profile profile, int64_t head_dim);

// Resolves `call` for `profile` in `mode`. Never throws; never reads past
// what it validated.
Resolution Resolve(const AttentionCall& call, Profile profile, Mode mode);

// The call a backend's forward() receives, as a direct call: through the
// layer, q, k and v as VisionAttention (of call.version) reshapes them and
// the keyword arguments it always passes; a direct call as it is. What a
// call-level backend, an engine's own class, is handed.
AttentionCall BackendCallOf(const AttentionCall& call, Profile profile);

// One call of a function a user registers in an engine that calls its
// backends as functions (transformers' AttentionInterface), and what its
// arguments ask a correct function to compute.
struct FunctionCall {
  // A direct call: q, k and v are the [T_i, H, D] token views the function's
  // tensors are made of ([1, H, T_i, D] in transformers), kwargs every
  // keyword it receives.
  AttentionCall call;
  // Whether the caller unpacks the function's result (`out, _ = fn(...)`)
  // or indexes it (`fn(...)[0]`).
  bool unpacks_result = true;
  // The sequences the keywords delimit in the call's tokens, and the scale
  // they ask for.
  std::vector<int64_t> sequences;
  double scale = 0.0;
};

// The calls an engine's entry makes of the function for one call (the
// layer: one over the pack, or one per sequence), in order; their outputs
// joined along the tokens are the entry's output.
struct FunctionCalls {
  std::vector<FunctionCall> calls;
  // The attributes of the module object each call receives first
  // (transformers: the VisionAttention layer's is_causal, scaling, ...).
  Kwargs module;
  // Set when a call's arguments do not say one attention a correct function
  // would compute (a partial set of varlen keywords, a max below the longest
  // sequence, a mask): what a function does with them is its own.
  std::string ambiguous;
};

// Whether `profile`'s engine calls a user's backend as a function
// (FunctionCallsOf), rather than calling an object's forward().
bool CallsFunctions(Profile profile);

// What a function registered under `profile`'s name receives from the
// engine's entry for `call` (faithful, at call.version). An error is the
// entry's own, raised before the function is called; Unimplemented is a
// path the model does not reproduce.
absl::StatusOr<FunctionCalls> FunctionCallsOf(const AttentionCall& call, Profile profile);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_RESOLVE_H_
