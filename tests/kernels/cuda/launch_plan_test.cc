// Tests the launch planner of the CUDA kernel (kernels/cuda/launch_plan.h)
// without a GPU: head-dim buckets, shared memory per dtype and head dim on
// sm_80 and sm_90, the grid sized from the launch bound, and the refusals.

#include "launch_plan.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen::cuda_kernels {
namespace {

using ::testing::HasSubstr;

// Params with per-sequence arrays (no tensors: the planner reads none).
struct Launch {
  std::vector<int64_t> lengths;
  std::vector<int64_t> zeros;
  VarlenAttentionParams params;

  Launch(std::vector<int64_t> seq_lengths, int head_dim, DType dtype, int64_t max_rows)
      : lengths(std::move(seq_lengths)), zeros(lengths.size(), 0) {
    params.input_dtype = params.output_dtype = dtype;
    params.num_heads_q = 16;
    params.num_heads_kv = 4;
    params.head_dim_qk = params.head_dim_v = head_dim;
    params.batch = static_cast<int>(lengths.size());
    params.q_start = params.k_start = params.v_start = params.o_start = zeros.data();
    params.seqlen_q = params.seqlen_k = lengths.data();
    params.max_rows_q = max_rows;
    params.max_keys = INT64_MAX;
  }
};

TEST(LaunchPlanTest, PadsHeadDimsToTheCompiledBuckets) {
  EXPECT_EQ(PaddedHeadDim(1), 32);
  EXPECT_EQ(PaddedHeadDim(64), 64);
  EXPECT_EQ(PaddedHeadDim(72), 80);
  EXPECT_EQ(PaddedHeadDim(80), 80);
  EXPECT_EQ(PaddedHeadDim(100), 128);
  EXPECT_EQ(PaddedHeadDim(256), 256);
  EXPECT_EQ(PaddedHeadDim(257), 0);
  Launch launch({10}, 72, DType::kBFloat16, INT64_MAX);
  launch.params.head_dim_v = 96;  // the wider of the two decides
  absl::StatusOr<LaunchPlan> plan = PlanForwardLaunch(launch.params, kSm90Limits);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tile.head_dim, 96);
}

TEST(LaunchPlanTest, SharedMemoryRegionsAreAlignedAndDisjoint) {
  for (TileElement e : {TileElement::kFloat32, TileElement::kFloat16, TileElement::kBFloat16}) {
    for (int d : kHeadDimBuckets) {
      const TileShape t = TileShapeFor(e, d);
      EXPECT_EQ(t.head_dim % 16, 0);
      EXPECT_EQ(t.block_rows, 16 * t.warps);
      EXPECT_EQ(t.block_keys % 16, 0);
      const SharedLayout& s = t.shared;
      const int element = ElementBytes(e);
      const std::vector<std::pair<int, int>> regions = {
          {s.q, t.block_rows * d * element},
          {s.k, t.block_keys * d * element},
          {s.v, t.block_keys * d * element},
          {s.scores, t.block_rows * t.block_keys * 4},
          {s.p, t.block_rows * t.block_keys * element},
          {s.acc, t.block_rows * d * 4},
          {s.row_state, t.block_rows * 8},
          {s.correction, t.block_rows * 4}};
      int end = 0;
      for (const auto& [start, bytes] : regions) {
        EXPECT_EQ(start % 32, 0);
        EXPECT_GE(start, end);
        end = start + bytes;
      }
      EXPECT_LE(end, s.bytes);
    }
  }
}

TEST(LaunchPlanTest, EveryHalfPrecisionVariantFitsSm80AndEveryVariantFitsSm90) {
  for (int d : kHeadDimBuckets) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
      Launch launch({100}, d, dtype, INT64_MAX);
      EXPECT_TRUE(PlanForwardLaunch(launch.params, kSm90Limits).ok()) << d;
      if (dtype != DType::kFloat32) {
        EXPECT_TRUE(PlanForwardLaunch(launch.params, kSm80Limits).ok()) << d;
      }
    }
  }
  Launch wide({100}, 256, DType::kFloat32, INT64_MAX);
  absl::StatusOr<LaunchPlan> plan = PlanForwardLaunch(wide.params, kSm80Limits);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("head_dim 256 in float32 needs 213760 bytes of shared memory per block; "
                        "this device allows 166912"));
}

TEST(LaunchPlanTest, TheGridCoversTheLaunchBoundNotTheWholeSequence) {
  // fa3 binds max_seqlen 100 as 128 rows: the 300-token sequence is cut there.
  Launch cut({300, 20}, 64, DType::kBFloat16, 128);
  absl::StatusOr<LaunchPlan> plan = PlanForwardLaunch(cut.params, kSm90Limits);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->row_blocks, 2);
  EXPECT_EQ(plan->heads, 16);
  EXPECT_EQ(plan->sequences, 2);

  Launch loose({65, 3, 0}, 64, DType::kBFloat16, INT64_MAX);  // an over-estimated bound
  plan = PlanForwardLaunch(loose.params, kSm90Limits);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->row_blocks, 2);

  Launch empty({0, 0}, 64, DType::kBFloat16, INT64_MAX);
  plan = PlanForwardLaunch(empty.params, kSm90Limits);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->row_blocks, 0);  // nothing to launch
}

TEST(LaunchPlanTest, RefusesWhatTheKernelDoesNotTake) {
  Launch f64({10}, 64, DType::kFloat64, INT64_MAX);
  EXPECT_THAT(PlanForwardLaunch(f64.params, kSm90Limits).status().message(),
              HasSubstr("takes float32, float16 or bfloat16 inputs, not float64"));

  Launch mixed({10}, 64, DType::kBFloat16, INT64_MAX);
  mixed.params.output_dtype = DType::kFloat32;
  EXPECT_THAT(PlanForwardLaunch(mixed.params, kSm90Limits).status().message(),
              HasSubstr("writes its input dtype (bfloat16), not float32"));

  Launch wide({10}, 320, DType::kBFloat16, INT64_MAX);
  EXPECT_THAT(PlanForwardLaunch(wide.params, kSm90Limits).status().message(),
              HasSubstr("head_dim 320: the cuda kernel is compiled for head dims 1 to 256"));

  Launch many(std::vector<int64_t>(70000, 1), 64, DType::kBFloat16, INT64_MAX);
  absl::StatusOr<LaunchPlan> plan = PlanForwardLaunch(many.params, kSm90Limits);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(), HasSubstr("70000 sequences: the grid's z holds 65535"));
}

}  // namespace
}  // namespace varlen::cuda_kernels
