// Tests the cuDNN graph cache's key (kernels/cudnn/graph_cache.h) without
// cuDNN: one test per FlashInfer bug whose key lacked a field, each failing
// if our key lacks it too, plus the counters a report shows.

#include "graph_cache.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen::cudnn_kernels {
namespace {

using ::testing::HasSubstr;

// What the flashinfer_cudnn kernel is given for 4 sequences, dense
// [T, 16, 80] bfloat16 tensors; the per-sequence arrays do not enter the key.
VarlenAttentionParams Params() {
  VarlenAttentionParams p;
  p.input_dtype = p.output_dtype = DType::kBFloat16;
  p.num_heads_q = p.num_heads_kv = 16;
  p.head_dim_qk = p.head_dim_v = 80;
  p.q_numel = p.k_numel = p.v_numel = p.o_numel = 4096 * 16 * 80;
  p.q_token_stride = p.k_token_stride = p.v_token_stride = p.o_token_stride = 16 * 80;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = 80;
  p.softmax_scale = 0.11180339887498948;
  p.batch = 4;
  p.max_rows_q = p.max_keys = 1024;
  return p;
}

// A graph that remembers the key it was built for.
struct FakeGraph {
  SdpaGraphKey built_for;
};

GraphCache<FakeGraph> Cache() {
  return GraphCache<FakeGraph>(
      [](const SdpaGraphKey& key) { return std::make_shared<FakeGraph>(FakeGraph{key}); });
}

// Two calls that differ only as `change` says must not share a graph.
void ExpectSeparateGraphs(void (*change)(VarlenAttentionParams&)) {
  VarlenAttentionParams first = Params(), second = Params();
  change(second);
  const SdpaGraphKey a = KeyFor(first, 0), b = KeyFor(second, 0);
  EXPECT_NE(a, b) << DescribeKey(a);
  GraphCache<FakeGraph> cache = Cache();
  ASSERT_TRUE(cache.Get(a).ok());
  absl::StatusOr<std::shared_ptr<FakeGraph>> graph = cache.Get(b);
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ((*graph)->built_for, b) << "the second call replayed the first call's graph";
  EXPECT_EQ(cache.counters().builds, 2);
  EXPECT_EQ(cache.counters().hits, 0);
}

TEST(GraphCacheTest, Issue4014TheScaleIsInTheKey) {
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.softmax_scale = 0.125; });
  // Bit for bit: head_dim ** -0.5 and 1 / sqrt(head_dim) differ in the last bit.
  ExpectSeparateGraphs(
      [](VarlenAttentionParams& p) { p.softmax_scale = std::nextafter(p.softmax_scale, 1.0); });
}

TEST(GraphCacheTest, Issues4146And4270StridesAreInTheKey) {
  // Each stride alone (a view of a fused [T, 3, H, D] projection changes the
  // token strides of q, k and v; a wider output buffer, o's).
  for (int64_t VarlenAttentionParams::*stride :
       {&VarlenAttentionParams::q_token_stride, &VarlenAttentionParams::k_token_stride,
        &VarlenAttentionParams::v_token_stride, &VarlenAttentionParams::o_token_stride,
        &VarlenAttentionParams::q_head_stride, &VarlenAttentionParams::k_head_stride,
        &VarlenAttentionParams::v_head_stride, &VarlenAttentionParams::o_head_stride}) {
    VarlenAttentionParams changed = Params();
    changed.*stride *= 3;
    EXPECT_NE(KeyFor(Params(), 0), KeyFor(changed, 0)) << DescribeKey(KeyFor(changed, 0));
  }
  ExpectSeparateGraphs([](VarlenAttentionParams& p) {
    p.q_token_stride = p.k_token_stride = p.v_token_stride = 3 * 16 * 80;
  });
}

TEST(GraphCacheTest, Issues4146And4270TheDtypeIsInTheKey) {
  ExpectSeparateGraphs(
      [](VarlenAttentionParams& p) { p.input_dtype = p.output_dtype = DType::kFloat16; });
}

TEST(GraphCacheTest, Issue4625TheOffsetDtypeIsInTheKey) {
  // Past 2^31 elements the offsets are int64: a graph built for int32
  // offsets would read them as int32.
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.q_numel = p.o_numel = int64_t{1} << 31; });
  VarlenAttentionParams large = Params();
  large.v_numel = int64_t{3} << 30;
  EXPECT_EQ(KeyFor(large, 0).offset_dtype, DType::kInt64);
  EXPECT_EQ(KeyFor(Params(), 0).offset_dtype, DType::kInt32);
}

TEST(GraphCacheTest, EveryShapeFieldAndTheDeviceAreInTheKey) {
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.batch = 8; });
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.max_rows_q = 2048; });
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.max_keys = 2048; });
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.num_heads_kv = 8; });
  ExpectSeparateGraphs([](VarlenAttentionParams& p) { p.head_dim_v = 64; });
  EXPECT_NE(KeyFor(Params(), 0), KeyFor(Params(), 1));
}

TEST(GraphCacheTest, TheSameCallReusesItsGraphAndCountsTheHit) {
  GraphCache<FakeGraph> cache = Cache();
  VarlenAttentionParams p = Params();
  ASSERT_TRUE(cache.Get(KeyFor(p, 0)).ok());
  // Other sequence lengths in the same buckets: the same graph.
  const int64_t lengths[4] = {1, 2, 3, 4};
  p.seqlen_q = p.seqlen_k = lengths;
  ASSERT_TRUE(cache.Get(KeyFor(p, 0)).ok());
  EXPECT_EQ(cache.counters().builds, 1);
  EXPECT_EQ(cache.counters().hits, 1);
}

TEST(GraphCacheTest, AFailedBuildIsNotCached) {
  int attempts = 0;
  GraphCache<FakeGraph> cache(
      [&attempts](const SdpaGraphKey&) -> absl::StatusOr<std::shared_ptr<FakeGraph>> {
        ++attempts;
        return absl::UnimplementedError("no engine");
      });
  EXPECT_EQ(cache.Get(KeyFor(Params(), 0)).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(cache.Get(KeyFor(Params(), 0)).ok());
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(cache.counters().builds, 0);
}

TEST(GraphCacheTest, DescribesTheKey) {
  EXPECT_THAT(DescribeKey(KeyFor(Params(), 0)),
              HasSubstr("B=4 S_q=1024 S_kv=1024 H=16/16 D=80/80 bfloat16 scale=0.111803 "
                        "offsets=int32 seq_lens=int32"));
}

}  // namespace
}  // namespace varlen::cudnn_kernels
