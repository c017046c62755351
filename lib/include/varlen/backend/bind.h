// File: varlen/backend/bind.h
// -----------------------------------------------------------------------------
//
// Binding models the kernel entry points of each calling convention: what
// cudnn_batch_prefill_with_kv_cache, flash_attn_varlen_func,
// context_attention_fwd and F.scaled_dot_product_attention do with the
// arguments resolution handed them, turned into VarlenAttentionParams.
//
// This is where resolved-but-wrong arguments become wrong numbers, the way
// they do on a GPU:
//   * flashinfer_cudnn reads k at the q/k element offsets, addresses q, k
//     and v as dense [T, H, D] whatever their strides, and truncates
//     sequences longer than max_token_per_sequence;
//   * fa3 and triton_attn launch ceil(max_seqlen / block) row blocks, so rows
//     beyond that are never written;
//   * sdpa's mask gives each row the keys its cu_seqlens name (a row whose
//     mask is all False gets no key, or equal weights in single precision).
// Entry checks the real kernels make (FlashAttention's int32 cu_seqlens
// check, Triton's refusal of host pointers) fail here with their messages.
// Those messages are modelled on the libraries' source, not run.

#ifndef VARLEN_BACKEND_BIND_H_
#define VARLEN_BACKEND_BIND_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varlen/backend/params.h"
#include "varlen/contract/call.h"
#include "varlen/contract/resolve.h"
#include "varlen/core/tensor.h"

namespace varlen {

// Row-block sizes of the modelled launch grids (H200, sm90).
inline constexpr int64_t kTritonBlockRows = 128;  // BLOCK on sm > 8
inline constexpr int64_t kFa3BlockRows = 128;     // kBlockM for head_dim <= 128

// A launch in rows: for each sequence with query rows, the first row of q,
// k, v and the output it touches (tokens of each tensor, not elements) and
// how many rows and keys it computes; sorted. Two launches of the same q, k
// and v with equal shapes compute the same output with any correct kernel,
// so a fuzz target can compare a resolved launch with the ground truth's
// without running either.
struct LaunchShape {
  struct Sequence {
    int64_t q_row, rows, k_row, v_row, keys, o_row;
    auto operator<=>(const Sequence&) const = default;
  };
  int heads_q = 0, heads_kv = 0, head_dim_qk = 0, head_dim_v = 0;
  DType input_dtype = DType::kBFloat16;
  double softmax_scale = 0;
  int64_t output_rows = 0;
  std::vector<Sequence> sequences;
  int64_t window_left = -1, window_right = -1;
  std::vector<float> sinks;
  bool operator==(const LaunchShape&) const = default;
};

// One kernel launch: the output buffer and the per-sequence arrays that
// params() points into. Not copyable (params() points into it); movable.
class KernelCall {
 public:
  KernelCall() = default;
  KernelCall(KernelCall&&) = default;
  KernelCall& operator=(KernelCall&&) = default;
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

  // The launch parameters, pointing into this object and the tensors.
  VarlenAttentionParams params() const;

  // The buffer the kernel writes (poison it before the run), and what the
  // caller gets back: `output` viewed as `result_shape`.
  const Tensor& output() const { return output_; }
  // The output as contiguous [T, Hq, Dv], whatever the buffer's strides (a
  // cuda-graph workspace may be wider), with every byte as the kernel left it.
  Tensor PackedOutput() const;
  const Shape& result_shape() const { return result_shape_; }
  const std::string& description() const { return description_; }

  // The launch in rows; unset when it cannot be said in rows: an access
  // outside a buffer, an offset that is not a whole token, a kernel that
  // addresses a tensor with other strides than its own (flashinfer_cudnn's
  // dense view of a strided tensor), or rows the library writes around the
  // kernel (ApplyEpilogue).
  std::optional<LaunchShape> Launch() const;

  // Writes the output rows the modelled library computes around the kernel,
  // after the kernel ran: torch's single-precision path gives a row whose
  // mask is all False equal weights over its item's keys (bfloat16,
  // float32), and every row NaN for float64. A no-op for every other call.
  void ApplyEpilogue() const;

 private:
  friend class KernelCallBuilder;
  VarlenAttentionParams base_;  // everything but the array pointers
  Tensor q_, k_, v_, output_;
  Shape result_shape_;
  std::vector<int64_t> q_start_, k_start_, v_start_, o_start_, seqlen_q_, seqlen_k_;
  std::vector<float> sinks_;  // one per query head, or none
  struct HostRows {
    int64_t o_start, rows, v_start, keys;  // tokens
    bool nan;                              // NaN rather than the mean of the values
  };
  std::vector<HostRows> host_rows_;
  std::string description_;
};

// Models the kernel entry of `resolved`'s calling convention for the q, k
// and v the backend received (resolved.q, .k, .v). The output buffer is
// freshly allocated (callers poison it to catch unwritten elements). Errors
// are the kernel's own entry checks.
absl::StatusOr<KernelCall> BindForKernel(const ResolvedArgs& resolved);

// True for an entry check that refuses the case's geometry itself (a dtype,
// a head size the kernel was not built for), not the form of an argument:
// the engine raises it whatever its argument handling, so a hardened call
// of that geometry is unsupported by the profile, not wrong.
bool IsKernelCapabilityLimit(const absl::Status& status);

// The ground-truth launch: sequence i of `lengths` at token `starts[i]`,
// every row computed, the output in `output_dtype`, the attention `variant`.
// This is what the float64 reference runs on, independent of any resolved
// argument. REQUIRES: no sinks, or one per head of q.
KernelCall BindGroundTruth(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<int64_t>& starts, const std::vector<int64_t>& lengths,
                           double softmax_scale, DType output_dtype,
                           const AttentionVariant& variant = {});
// The same with the sequences packed back to back from token 0.
KernelCall BindGroundTruth(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<int64_t>& lengths, double softmax_scale,
                           DType output_dtype, const AttentionVariant& variant = {});

}  // namespace varlen

#endif  // VARLEN_BACKEND_BIND_H_
