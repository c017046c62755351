// Tests BindForKernel and BindGroundTruth: each profile's kernel entry turned into launch params.

#include "varlen/backend/bind.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varlen/backend/params.h"
#include "varlen/contract/call.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr Device kCpu = Device::kCpu;
constexpr Device kCuda = Device::kCuda;
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

Value IntTensor(const std::vector<int64_t>& values, DType dtype = DType::kInt32,
                Device device = kCuda) {
  return Value::FromTensor(Tensor::FromInts(values, dtype, device));
}

// q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, Dv], bfloat16 on cuda.
AttentionCall MakeCall(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dim,
                       int64_t dim_v) {
  AttentionCall call;
  call.q = Tensor::Zeros(DType::kBFloat16, kCuda, {tokens, heads, dim});
  call.k = Tensor::Zeros(DType::kBFloat16, kCuda, {tokens, kv_heads, dim});
  call.v = Tensor::Zeros(DType::kBFloat16, kCuda, {tokens, kv_heads, dim_v});
  call.seq_len = tokens;
  return call;
}

ResolvedArgs ResolveOrDie(const AttentionCall& call, Profile profile) {
  Resolution r = Resolve(call, profile, Mode::kFaithful);
  EXPECT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  if (r.args.has_value()) return *r.args;
  ResolvedArgs unresolved;  // the test has already failed
  unresolved.args = FlashVarlenArgs{};
  unresolved.q = call.q;
  unresolved.k = call.k;
  unresolved.v = call.v;
  return unresolved;
}

absl::StatusOr<KernelCall> Bind(const AttentionCall& call, Profile profile) {
  return BindForKernel(ResolveOrDie(call, profile));
}

template <typename Field>
std::vector<int64_t> Array(const VarlenAttentionParams& p, Field field) {
  return std::vector<int64_t>(p.*field, p.*field + p.batch);
}

std::vector<int64_t> Rows(const VarlenAttentionParams& p) {
  std::vector<int64_t> rows;
  for (int b = 0; b < p.batch; ++b) rows.push_back(SequenceAt(p, b).rows);
  return rows;
}

std::string ErrorText(const absl::StatusOr<KernelCall>& kernel) {
  return FormatPythonError(kernel.status());
}

// ---------------------------------------------------------------------------
// flashinfer_cudnn

// Sequences [3, 5] with 2 heads of dim 4 (8 elements per token), passed the
// way a model without metadata would: packed indptrs as cu_seqlens, plus
// sequence_lengths and max_seqlen. The thirds differ so each can be traced.
AttentionCall FlashinferKwargsCall(int64_t max_seqlen) {
  AttentionCall call = MakeCall(8, 2, 2, 4, 4);
  call.cu_seqlens = IntTensor({0, 24, 64, 100, 124, 164, 200, 224, 264});
  call.kwargs.set("sequence_lengths", IntTensor({3, 5}));
  call.kwargs.set("max_seqlen", Value::Int(max_seqlen));
  return call;
}

TEST(BindFlashinferCudnnTest, KReadsTheQkOffsetsAndVAndOTheirOwnThirds) {
  absl::StatusOr<KernelCall> kernel = Bind(FlashinferKwargsCall(5), Profile::kFlashinferCudnn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_EQ(p.batch, 2);
  EXPECT_THAT(Array(p, &VarlenAttentionParams::q_start), ElementsAre(0, 24));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::k_start), ElementsAre(0, 24));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::v_start), ElementsAre(100, 124));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::o_start), ElementsAre(200, 224));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(3, 5));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(3, 5));
  EXPECT_EQ(p.max_rows_q, 5);
  EXPECT_EQ(p.max_keys, 5);
  EXPECT_EQ(p.q_token_stride, 8);
  EXPECT_EQ(p.q_head_stride, 4);
  EXPECT_EQ(p.input_dtype, DType::kBFloat16);
  EXPECT_EQ(p.output_dtype, DType::kBFloat16);
  EXPECT_DOUBLE_EQ(p.softmax_scale, 0.5);
  EXPECT_EQ(kernel->description(),
            "cudnn_batch_prefill_with_kv_cache: 2 sequences, element offsets, "
            "max_token_per_sequence=5");
  // The v third points past v: the bounds check catches it before a run.
  const absl::Status bounds = CheckKernelBounds(p);
  EXPECT_EQ(bounds.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(bounds.message(),
            "sequence 0 touches v elements [100, 124) outside the buffer of 64 elements: a GPU "
            "kernel would read or write foreign memory or fault");
}

TEST(BindFlashinferCudnnTest, TruncatesAtMaxTokenPerSequence) {
  absl::StatusOr<KernelCall> kernel = Bind(FlashinferKwargsCall(4), Profile::kFlashinferCudnn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_EQ(p.max_rows_q, 4);
  EXPECT_EQ(p.max_keys, 4);
  EXPECT_EQ(SequenceAt(p, 0).rows, 3);
  EXPECT_EQ(SequenceAt(p, 1).rows, 4);
  EXPECT_EQ(SequenceAt(p, 1).keys, 4);
}

TEST(BindFlashinferCudnnTest, BuilderMetadataIsPaddedAndBucketed) {
  // Sequences [2, 3], 4 query heads over 2 kv heads of dim 4: the builder
  // pads the batch to 8 and buckets the max to 4096. k is read at the q
  // offsets although its tokens are half as wide, so sequence 1's keys lie
  // outside k.
  AttentionCall call = MakeCall(5, 4, 2, 4, 4);
  absl::StatusOr<VisionAttentionMetadata> metadata =
      PrepareFlashinferCudnnMetadata(IntTensor({0, 2, 5}), kCuda, 16, Mode::kFaithful);
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  call.forward_metadata = *metadata;
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFlashinferCudnn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_EQ(p.batch, 8);
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(2, 3, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::q_start),
              ElementsAre(0, 32, 80, 80, 80, 80, 80, 80));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::k_start),
              ElementsAreArray(Array(p, &VarlenAttentionParams::q_start)));
  EXPECT_EQ(p.k_token_stride, 8);
  EXPECT_EQ(p.num_heads_q, 4);
  EXPECT_EQ(p.num_heads_kv, 2);
  EXPECT_EQ(p.max_rows_q, 4096);
  EXPECT_EQ(p.max_keys, 4096);
  const absl::Status bounds = CheckKernelBounds(p);
  EXPECT_EQ(bounds.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(bounds.message(),
            "sequence 1 touches k elements [32, 56) outside the buffer of 40 elements: a GPU "
            "kernel would read or write foreign memory or fault");
}

TEST(BindFlashinferCudnnTest, BatchedInputGivesA4dResult) {
  // q [2, 4, 2, 4] and v [2, 4, 2, 6]: the kernel sees [8, 2, *], the caller
  // gets [2, 4, 2, 6] back.
  AttentionCall call;
  call.q = Tensor::Zeros(DType::kBFloat16, kCuda, {2, 4, 2, 4});
  call.k = Tensor::Zeros(DType::kBFloat16, kCuda, {2, 4, 2, 4});
  call.v = Tensor::Zeros(DType::kBFloat16, kCuda, {2, 4, 2, 6});
  call.bsz = 2;
  call.seq_len = 4;
  call.cu_seqlens = IntTensor({0, 32, 64, 0, 48, 96, 0, 48, 96});
  call.kwargs.set("sequence_lengths", IntTensor({4, 4}));
  call.kwargs.set("max_seqlen", Value::Int(4));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFlashinferCudnn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->result_shape(), (Shape{2, 4, 2, 6}));
  EXPECT_EQ(kernel->output().shape(), (Shape{8, 2, 6}));
  const VarlenAttentionParams p = kernel->params();
  EXPECT_EQ(p.q_token_stride, 8);
  EXPECT_EQ(p.v_token_stride, 12);
  EXPECT_EQ(p.o_token_stride, 12);
  EXPECT_EQ(p.head_dim_v, 6);
  EXPECT_THAT(Array(p, &VarlenAttentionParams::v_start), ElementsAre(0, 48));
  EXPECT_TRUE(CheckKernelBounds(p).ok());
}

TEST(BindFlashinferCudnnTest, PackedInputKeepsA3dResult) {
  absl::StatusOr<KernelCall> kernel = Bind(FlashinferKwargsCall(5), Profile::kFlashinferCudnn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->result_shape(), (Shape{8, 2, 4}));
}

// vLLM's FLASHINFER: q [1, 8, 2, 4] of sequences [5, 3], v of head size
// `dim_v`, the two offset sections as a caller computes them for its v.
AttentionCall VllmFlashinferCall(int64_t dim_v) {
  AttentionCall call;
  call.q = Tensor::Zeros(DType::kBFloat16, kCuda, {1, 8, 2, 4});
  call.k = Tensor::Zeros(DType::kBFloat16, kCuda, {1, 8, 2, 4});
  call.v = Tensor::Zeros(DType::kBFloat16, kCuda, {1, 8, 2, dim_v});
  call.vllm_layer = {.num_heads = 2, .head_size = 4, .num_kv_heads = 2, .scale = std::nullopt};
  call.cu_seqlens = IntTensor({0, 40, 64, 0, 5 * 2 * dim_v, 8 * 2 * dim_v});
  call.kwargs.set("max_seqlen",
                  Value::FromTensor(Tensor::FromInts({5}, DType::kInt32, kCpu).Reshape({})));
  call.kwargs.set("sequence_lengths", IntTensor({5, 3}));
  return call;
}

TEST(BindFlashinferCudnnTest, VllmWritesVsHeadSizeIntoABufferShapedAsQ) {
  // The buffer is torch.empty_like(q): [8, 2, 4] whatever v's head size,
  // written with v's (dense [.., H * Dv, Dv]) at q's offsets.
  for (const int64_t dim_v : {4, 8, 2}) {
    absl::StatusOr<KernelCall> kernel = Bind(VllmFlashinferCall(dim_v), Profile::kVllmFlashinfer);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(kernel->output().shape(), (Shape{8, 2, 4}));
    EXPECT_EQ(kernel->result_shape(), (Shape{1, 8, 2, 4}));
    const VarlenAttentionParams p = kernel->params();
    EXPECT_EQ(p.o_token_stride, 2 * dim_v);
    EXPECT_EQ(p.o_head_stride, dim_v);
    EXPECT_THAT(Array(p, &VarlenAttentionParams::o_start), ElementsAre(0, 40));
    // Wider: the second sequence writes [40, 40 + 3 * 16) of 64 elements.
    EXPECT_EQ(CheckKernelBounds(p).ok(), dim_v <= 4) << dim_v;
  }
}

// ---------------------------------------------------------------------------
// fa3

// Sequences [100, 300], one head of dim 8, int32 cu_seqlens on cuda.
AttentionCall Fa3Call() {
  AttentionCall call = MakeCall(400, 1, 1, 8, 8);
  call.cu_seqlens = IntTensor({0, 100, 400});
  return call;
}

TEST(BindFa3Test, TokenOffsetsAndLengths) {
  AttentionCall call = Fa3Call();
  call.kwargs.set("max_seqlen", Value::Int(300));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_EQ(p.batch, 2);
  for (auto field : {&VarlenAttentionParams::q_start, &VarlenAttentionParams::k_start,
                     &VarlenAttentionParams::v_start, &VarlenAttentionParams::o_start}) {
    EXPECT_THAT(Array(p, field), ElementsAre(0, 800));
  }
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(100, 300));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(100, 300));
  EXPECT_EQ(p.max_rows_q, 384);
  EXPECT_EQ(p.max_keys, kUnlimited);
  EXPECT_EQ(kernel->result_shape(), (Shape{400, 1, 8}));
  EXPECT_EQ(kernel->description(),
            "flash_attn_varlen_func: 2 sequences, max_seqlen=300 -> rows covered per sequence 384");
  EXPECT_TRUE(CheckKernelBounds(p).ok());
}

TEST(BindFa3Test, GridCoversWholeBlocksOf128Rows) {
  const std::pair<int64_t, int64_t> cases[] = {{100, 128}, {128, 128}, {129, 256},
                                               {1, 128},   {256, 256}, {0, 0}};
  for (const auto& [max_seqlen, rows] : cases) {
    SCOPED_TRACE(max_seqlen);
    AttentionCall call = Fa3Call();
    call.kwargs.set("max_seqlen", Value::Int(max_seqlen));
    absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(kernel->params().max_rows_q, rows);
  }
}

TEST(BindFa3Test, TooSmallMaxSeqlenLeavesRowsUncovered) {
  AttentionCall call = Fa3Call();
  call.kwargs.set("max_seqlen", Value::Int(100));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(Rows(kernel->params()), ElementsAre(100, 128));
  EXPECT_EQ(SequenceAt(kernel->params(), 1).keys, 300);
}

TEST(BindFa3Test, MaxSeqlenDerivedFromCuSeqlensWhenAbsent) {
  absl::StatusOr<KernelCall> kernel = Bind(Fa3Call(), Profile::kFa3);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().max_rows_q, 384);
}

TEST(BindFa3Test, Int64CuSeqlensInGraphModeFailTheInt32Check) {
  AttentionCall call = Fa3Call();
  call.graph_mode = true;
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}, DType::kInt64), Value::Int(300)});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(PythonErrorKindOf(kernel.status()), PyErrorKind::kRuntimeError);
  // FA3's mha_fwd checks the device, contiguity, then the dtype.
  EXPECT_EQ(ErrorText(kernel), "RuntimeError: cu_seqlens_q must have dtype torch.int32");
}

TEST(BindFa3Test, Int64CuSeqlensOutsideGraphModeAreCast) {
  AttentionCall call = Fa3Call();
  call.cu_seqlens = IntTensor({0, 100, 400}, DType::kInt64);
  call.kwargs.set("max_seqlen", Value::Int(300));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(100, 300));
}

TEST(BindFa3Test, GraphModeHostCuSeqlensMustBeOnCuda) {
  AttentionCall call = Fa3Call();
  call.graph_mode = true;
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}, DType::kInt32, kCpu), Value::Int(300)});
  EXPECT_EQ(ErrorText(Bind(call, Profile::kFa3)), "RuntimeError: cu_seqlens_q must be on CUDA");
}

TEST(BindFa3Test, TheOpsTypeGateIsNotModelled) {
  // The FA3 op's dispatcher refuses a float max_seqlen and takes None for
  // cu_seqlens_q; its messages quote the build's namespace and schema, which
  // differ between the builds SGLang loads.
  AttentionCall call = Fa3Call();
  call.graph_mode = true;
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}), Value::Float(300.0)});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  EXPECT_TRUE(absl::IsUnimplemented(kernel.status())) << kernel.status();

  call.cu_seqlens = Value::List({Value::None(), Value::Int(300)});
  kernel = Bind(call, Profile::kFa3);
  EXPECT_TRUE(absl::IsUnimplemented(kernel.status())) << kernel.status();

  // None passes the op's `int?` and mha_fwd refuses it.
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}), Value::None()});
  EXPECT_EQ(ErrorText(Bind(call, Profile::kFa3)),
            "RuntimeError: max_seqlen_q must be provided if cu_seqlens_q is provided");

  // A bool is an int to Python: True covers one block.
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}), Value::Bool(true)});
  kernel = Bind(call, Profile::kFa3);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().max_rows_q, 128);
}

// KernelCall::Launch: a launch in rows

// fa3's call for sequences of 100 and 300 tokens, and the ground truth's.
std::optional<LaunchShape> Fa3Launch(int64_t max_seqlen) {
  AttentionCall call = MakeCall(400, 1, 1, 8, 8);
  call.cu_seqlens = IntTensor({0, 100, 400});
  call.kwargs.set("max_seqlen", Value::Int(max_seqlen));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? kernel->Launch() : std::nullopt;
}

std::optional<LaunchShape> TruthLaunch(double scale) {
  const Tensor t = Tensor::Zeros(DType::kBFloat16, kCuda, {400, 1, 8});
  return BindGroundTruth(t, t, t, {100, 300}, scale, DType::kFloat64).Launch();
}

TEST(LaunchShapeTest, ACorrectCallAsksForTheGroundTruthsLaunch) {
  // fa3's default scale is head_dim ** -0.5.
  const std::optional<LaunchShape> truth = TruthLaunch(std::pow(8.0, -0.5));
  ASSERT_TRUE(truth.has_value());
  EXPECT_EQ(truth->sequences.size(), 2u);
  EXPECT_EQ(truth->output_rows, 400);
  EXPECT_EQ(Fa3Launch(300), truth);
  // Another scale is another launch, to the last bit.
  EXPECT_NE(Fa3Launch(300), TruthLaunch(1 / std::sqrt(8.0)));
}

TEST(LaunchShapeTest, ATooSmallMaxSeqlenIsAnotherLaunch) {
  const std::optional<LaunchShape> truncated = Fa3Launch(100);
  ASSERT_TRUE(truncated.has_value());
  EXPECT_NE(truncated, TruthLaunch(std::pow(8.0, -0.5)));
  EXPECT_EQ(truncated->sequences[1].rows, 128);
}

TEST(LaunchShapeTest, IsUnsetWhereRowsCannotSayIt) {
  // flashinfer_cudnn addresses a strided q as dense [T, H, D].
  AttentionCall call = MakeCall(8, 2, 2, 4, 4);
  const Tensor fused = Tensor::Zeros(DType::kBFloat16, kCuda, {8, 3 * 2 * 4});
  call.q = fused.AsStrided({8, 2, 4}, {24, 4, 1}, 0);
  call.k = fused.AsStrided({8, 2, 4}, {24, 4, 1}, 8);
  call.v = fused.AsStrided({8, 2, 4}, {24, 4, 1}, 16);
  call.kwargs.set("sequence_lengths", IntTensor({3, 5}));
  call.kwargs.set("max_seqlen", Value::Int(5));
  call.cu_seqlens = IntTensor({0, 24, 64, 0, 24, 64, 0, 24, 64});
  absl::StatusOr<KernelCall> dense_view = Bind(call, Profile::kFlashinferCudnn);
  ASSERT_TRUE(dense_view.ok()) << dense_view.status();
  EXPECT_FALSE(dense_view->Launch().has_value());

  // Rows sdpa's library writes after the kernel.
  AttentionCall sdpa = MakeCall(6, 1, 1, 2, 2);
  sdpa.sdpa.flatten_batch = true;
  sdpa.sdpa.softmax_in_single_precision = true;
  sdpa.cu_seqlens = IntTensor({0, 2});
  absl::StatusOr<KernelCall> epilogue = Bind(sdpa, Profile::kSdpa);
  ASSERT_TRUE(epilogue.ok()) << epilogue.status();
  EXPECT_FALSE(epilogue->Launch().has_value());
}

}  // namespace
}  // namespace varlen
