// The launch of the CUDA FlashAttention kernel, decided on the host from
// VarlenAttentionParams and the device's limits: which compiled variant
// (dtype x padded head dim), the grid, and the shared memory. Plain C++ (no
// CUDA needed), so every rule is unit-tested on machines without a GPU.
//
// The grid is FlashAttention-2's: x = blocks of query rows, y = query heads,
// z = sequences. Like the real kernels, the row blocks come from the launch
// bound (max_rows_q, which binding derived from max_seqlen): a sequence
// longer than that bound has its extra rows never computed, exactly as the
// kernel models say. The grid is not made larger than the longest sequence
// needs, since blocks past every sequence would only return.

#ifndef VARLEN_KERNELS_CUDA_LAUNCH_PLAN_H_
#define VARLEN_KERNELS_CUDA_LAUNCH_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "tile_shape.h"
#include "varlen/backend/backend.h"
#include "varlen/backend/params.h"

namespace varlen::cuda_kernels {

// What the device allows one launch (cudaDeviceProp).
struct DeviceLimits {
  int shared_bytes_per_block = 0;  // sharedMemPerBlockOptin
  int64_t max_grid_x = 2147483647;
  int max_grid_y = 65535;
  int max_grid_z = 65535;
};

// The two devices the build targets, for tests and messages.
inline constexpr DeviceLimits kSm80Limits{.shared_bytes_per_block = 166912};  // A100
inline constexpr DeviceLimits kSm90Limits{.shared_bytes_per_block = 232448};  // H100, H200

// What the kernel runs: float32, float16 and bfloat16, head dims up to
// kMaxHeadDim, GQA, a distinct value head dim, any strides, the fa3 and
// triton_attn kernel arguments, and as many sequences as sm_90's grid holds.
BackendCapabilities KernelCapabilities();

struct LaunchPlan {
  TileElement element = TileElement::kBFloat16;
  TileShape tile{};
  int64_t row_blocks = 0;  // grid x; 0: no sequence has a row to compute, nothing to launch
  int heads = 0;           // grid y
  int sequences = 0;       // grid z
};

// The plan for `params`, or Unimplemented naming the dtype, head dim,
// shared memory or grid dimension the kernel cannot take.
// REQUIRES: params' per-sequence arrays are readable on the host.
absl::StatusOr<LaunchPlan> PlanForwardLaunch(const VarlenAttentionParams& params,
                                             const DeviceLimits& limits);

}  // namespace varlen::cuda_kernels

#endif  // VARLEN_KERNELS_CUDA_LAUNCH_PLAN_H_
