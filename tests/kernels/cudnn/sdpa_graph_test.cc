// Tests the cuDNN SDPA graph's construction without a device: every graph
// the cudnn backend builds is validated by the cuDNN frontend and lowered to
// cuDNN's operation graph for sm_90, and what cuDNN cannot run is refused
// with its reason. Building execution plans and running need a GPU
// (cudnn_backend_test.cc).

#include "sdpa_graph.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen::cudnn_kernels {
namespace {

using ::testing::HasSubstr;

constexpr int kSm90 = 90;

// The key of B packed sequences of [T, heads, dim] tensors (dense).
SdpaGraphKey Key(DType dtype, int heads, int dim, int64_t batch = 4, int64_t max_rows = 1024) {
  SdpaGraphKey k;
  k.batch = batch;
  k.max_rows_q = k.max_keys = max_rows;
  k.heads_q = k.heads_kv = heads;
  k.head_dim_qk = k.head_dim_v = dim;
  k.dtype = dtype;
  const double scale = 1.0 / std::sqrt(dim);
  std::memcpy(&k.scale_bits, &scale, sizeof scale);
  k.q_token_stride = k.k_token_stride = k.v_token_stride = k.o_token_stride = heads * dim;
  k.q_head_stride = k.k_head_stride = k.v_head_stride = k.o_head_stride = dim;
  return k;
}

TEST(SdpaGraphTest, BuildsTheVisionShapesWithoutADevice) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (int dim : {64, 72, 80, 128}) {
      const SdpaGraphKey key = Key(dtype, 16, dim);
      EXPECT_TRUE(CheckSdpaGraph(key, kSm90).ok())
          << DescribeKey(key) << ": " << CheckSdpaGraph(key, kSm90);
    }
  }
  // Qwen2.5-VL's largest image (65,536 patches, bucket 65536) as one batch.
  const SdpaGraphKey large = Key(DType::kBFloat16, 16, 80, 1, 65536);
  EXPECT_TRUE(CheckSdpaGraph(large, kSm90).ok()) << CheckSdpaGraph(large, kSm90);
}

TEST(SdpaGraphTest, BuildsGqaStridedViewsAndInt64Offsets) {
  SdpaGraphKey gqa = Key(DType::kBFloat16, 16, 64);
  gqa.heads_kv = 4;
  gqa.k_token_stride = gqa.v_token_stride = 4 * 64;
  EXPECT_TRUE(CheckSdpaGraph(gqa, kSm90).ok()) << CheckSdpaGraph(gqa, kSm90);

  // Views of one fused [T, 3 * H * D] projection.
  SdpaGraphKey fused = Key(DType::kFloat16, 16, 80);
  fused.q_token_stride = fused.k_token_stride = fused.v_token_stride = 3 * 16 * 80;
  EXPECT_TRUE(CheckSdpaGraph(fused, kSm90).ok()) << CheckSdpaGraph(fused, kSm90);

  SdpaGraphKey wide = Key(DType::kBFloat16, 16, 80);
  wide.offset_dtype = DType::kInt64;
  EXPECT_TRUE(CheckSdpaGraph(wide, kSm90).ok()) << CheckSdpaGraph(wide, kSm90);
}

TEST(SdpaGraphTest, RefusesWhatCudnnCannotRunWithItsReason) {
  const absl::Status odd = CheckSdpaGraph(Key(DType::kBFloat16, 16, 68), kSm90);
  EXPECT_EQ(odd.code(), absl::StatusCode::kUnimplemented) << odd;
  EXPECT_THAT(odd.message(), HasSubstr("multiple of 8"));

  // Limits that depend on the device's properties (head dims above 256 on
  // Hopper) are not checked without one: a deviceless validation passes
  // them, and the device refuses them when it builds the plans.

  const absl::Status fp32 = CheckSdpaGraph(Key(DType::kFloat32, 16, 64), kSm90);
  EXPECT_EQ(fp32.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(fp32.message(), HasSubstr("bfloat16 or float16, not float32"));
}

TEST(SdpaGraphTest, NamesTheVersionsItRunsWith) {
  EXPECT_THAT(CudnnVersions(), HasSubstr("cuDNN 9."));
  EXPECT_THAT(CudnnVersions(), HasSubstr("frontend 1.32.0"));
}

}  // namespace
}  // namespace varlen::cudnn_kernels
