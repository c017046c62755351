#include "launch_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace varlen::cuda_kernels {
namespace {

absl::StatusOr<TileElement> TileElementOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return TileElement::kFloat32;
    case DType::kFloat16:
      return TileElement::kFloat16;
    case DType::kBFloat16:
      return TileElement::kBFloat16;
    default:
      return absl::UnimplementedError(absl::StrCat(
          "the cuda kernel takes float32, float16 or bfloat16 inputs, not ", DTypeName(dtype)));
  }
}

}  // namespace

BackendCapabilities KernelCapabilities() {
  return {
      .input_dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16},
      .max_head_dim = kMaxHeadDim,
      .grouped_query_attention = true,
      .distinct_value_head_dim = true,
      .strided_inputs = true,
      .windows = true,
      .sinks = true,
      .profiles = {Profile::kFa3, Profile::kTritonAttn, Profile::kFa4, Profile::kAiterAttn,
                   Profile::kAscendAttn, Profile::kAmxAttn, Profile::kXpuAttn,
                   Profile::kVllmFlashAttnFa2, Profile::kVllmFlashAttnFa3, Profile::kVllmTritonAttn,
                   Profile::kTfFlashAttention2, Profile::kTfFlashAttention3,
                   Profile::kTfFlashAttention4, Profile::kTfHubFlashAttn2},
      .max_sequences = kSm90Limits.max_grid_z,
      .device = "cuda"};
}

absl::StatusOr<LaunchPlan> PlanForwardLaunch(const VarlenAttentionParams& p,
                                             const DeviceLimits& limits) {
  LaunchPlan plan;
  absl::StatusOr<TileElement> element = TileElementOf(p.input_dtype);
  if (!element.ok()) return element.status();
  plan.element = *element;
  if (p.output_dtype != p.input_dtype) {
    return absl::UnimplementedError(absl::StrCat("the cuda kernel writes its input dtype (",
                                                 DTypeName(p.input_dtype), "), not ",
                                                 DTypeName(p.output_dtype)));
  }
  const int head_dim = std::max(p.head_dim_qk, p.head_dim_v);
  const int padded = PaddedHeadDim(head_dim);
  if (head_dim < 1 || padded == 0) {
    return absl::UnimplementedError(absl::StrCat(
        "head_dim ", head_dim, ": the cuda kernel is compiled for head dims 1 to ", kMaxHeadDim));
  }
  plan.tile = TileShapeFor(plan.element, padded);
  if (plan.tile.shared.bytes > limits.shared_bytes_per_block) {
    return absl::UnimplementedError(absl::StrCat(
        "head_dim ", head_dim, " in ", DTypeName(p.input_dtype), " needs ", plan.tile.shared.bytes,
        " bytes of shared memory per block; this device allows ", limits.shared_bytes_per_block));
  }
  if (p.num_heads_q > limits.max_grid_y) {
    return absl::UnimplementedError(
        absl::StrCat(p.num_heads_q, " query heads: the grid's y holds ", limits.max_grid_y));
  }
  if (p.batch > limits.max_grid_z) {
    return absl::UnimplementedError(
        absl::StrCat(p.batch, " sequences: the grid's z holds ", limits.max_grid_z));
  }
  int64_t longest = 0;
  for (int b = 0; b < p.batch; ++b) longest = std::max(longest, SequenceAt(p, b).rows);
  plan.row_blocks = longest / plan.tile.block_rows + (longest % plan.tile.block_rows != 0);
  if (plan.row_blocks > limits.max_grid_x) {
    return absl::UnimplementedError(
        absl::StrCat(longest, " query rows in one sequence: the grid's x holds ", limits.max_grid_x,
                     " blocks of ", plan.tile.block_rows));
  }
  plan.heads = p.num_heads_q;
  plan.sequences = p.batch;
  return plan;
}

}  // namespace varlen::cuda_kernels
