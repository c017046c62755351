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
#include "varlen/contract/metadata.h"
#include "varlen/contract/resolve.h"
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

// ---------------------------------------------------------------------------
// fa3

// Sequences [100, 300], one head of dim 2, int32 cu_seqlens on cuda.
AttentionCall Fa3Call() {
  AttentionCall call = MakeCall(400, 1, 1, 2, 2);
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
    EXPECT_THAT(Array(p, field), ElementsAre(0, 200));
  }
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(100, 300));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(100, 300));
  EXPECT_EQ(p.max_rows_q, 384);
  EXPECT_EQ(p.max_keys, kUnlimited);
  EXPECT_EQ(kernel->result_shape(), (Shape{400, 1, 2}));
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
  EXPECT_EQ(ErrorText(kernel), "RuntimeError: cu_seqlens_q must have dtype int32");
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

TEST(BindFa3Test, GraphModeArgumentTypesAreChecked) {
  AttentionCall call = Fa3Call();
  call.graph_mode = true;
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}), Value::Float(300.0)});
  EXPECT_EQ(ErrorText(Bind(call, Profile::kFa3)),
            "TypeError: flash_attn_varlen_func(): argument 'max_seqlen_q' must be int, not float");

  call.cu_seqlens = Value::List({Value::None(), Value::Int(300)});
  EXPECT_EQ(ErrorText(Bind(call, Profile::kFa3)),
            "TypeError: flash_attn_varlen_func(): argument 'cu_seqlens_q' must be Tensor, not "
            "NoneType");

  // A bool is an int to Python: True covers one block.
  call.cu_seqlens = Value::List({IntTensor({0, 100, 400}), Value::Bool(true)});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().max_rows_q, 128);
}

// ---------------------------------------------------------------------------
// triton_attn

// Sequences [3, 5], 2 heads of dim 4.
AttentionCall TritonCall(Device cu_device = kCuda) {
  AttentionCall call = MakeCall(8, 2, 2, 4, 4);
  call.cu_seqlens = IntTensor({0, 3, 8}, DType::kInt32, cu_device);
  return call;
}

TEST(BindTritonTest, TokenOffsetsAnd128RowGrid) {
  absl::StatusOr<KernelCall> kernel = Bind(TritonCall(), Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_THAT(Array(p, &VarlenAttentionParams::q_start), ElementsAre(0, 24));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::o_start), ElementsAre(0, 24));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(3, 5));
  EXPECT_EQ(p.max_rows_q, 128);
  EXPECT_EQ(p.max_keys, kUnlimited);
  EXPECT_EQ(kernel->description(),
            "context_attention_fwd: 2 sequences, max_input_len=5 -> rows covered per sequence 128");

  AttentionCall call = TritonCall();
  call.kwargs.set("max_seqlen", Value::Int(129));
  kernel = Bind(call, Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().max_rows_q, 256);
}

TEST(BindTritonTest, LengthsFromSequenceLengthsStartsFromCuSeqlens) {
  AttentionCall call = TritonCall();
  call.kwargs.set("sequence_lengths", IntTensor({2, 4}));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(2, 4));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::q_start), ElementsAre(0, 24));
}

TEST(BindTritonTest, HostCuSeqlensAreRefusedAtTheKernel) {
  // The kwargs path neither casts nor moves cu_seqlens: a cpu tensor reaches
  // the Triton launch.
  absl::StatusOr<KernelCall> kernel = Bind(TritonCall(kCpu), Profile::kTritonAttn);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(PythonErrorKindOf(kernel.status()), PyErrorKind::kValueError);
  EXPECT_EQ(ErrorText(kernel),
            "ValueError: Pointer argument cannot be accessed from Triton (cpu tensor?)");
}

AttentionCall TritonGraphCall(Value output_ws) {
  AttentionCall call = TritonCall();
  call.graph_mode = true;
  call.cu_seqlens = Value::List({IntTensor({0, 3, 8}), IntTensor({3, 5}), Value::Int(5)});
  call.kwargs.set("output_ws", std::move(output_ws));
  return call;
}

// The launcher reads o.stride(0) as it builds the launch (SGLang's own
// context_attention_fwd, run through the call-level entry).
TEST(BindTritonTest, GraphModeWithoutAWorkspaceFailsOnItsStride) {
  absl::StatusOr<KernelCall> kernel = Bind(TritonGraphCall(Value::None()), Profile::kTritonAttn);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(ErrorText(kernel), "AttributeError: 'NoneType' object has no attribute 'stride'");
  kernel = Bind(TritonGraphCall(Value::Int(3)), Profile::kTritonAttn);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(ErrorText(kernel), "AttributeError: 'int' object has no attribute 'stride'");
}

TEST(BindTritonTest, GraphModeWritesIntoTheWorkspace) {
  const Tensor ws = Tensor::Zeros(DType::kBFloat16, kCuda, {8, 2, 4});
  absl::StatusOr<KernelCall> kernel =
      Bind(TritonGraphCall(Value::FromTensor(ws)), Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(kernel->output().SharesStorageWith(ws));
  EXPECT_EQ(kernel->params().o, static_cast<void*>(ws.mutable_data<unsigned char>()));
  EXPECT_EQ(kernel->params().max_rows_q, 128);
}

TEST(BindTritonTest, GraphModeWorkspaceOfTheWrongShapeIsRefused) {
  const Tensor ws = Tensor::Zeros(DType::kBFloat16, kCuda, {8, 2, 2});
  EXPECT_EQ(ErrorText(Bind(TritonGraphCall(Value::FromTensor(ws)), Profile::kTritonAttn)),
            "ValueError: context_attention_fwd received output_ws of shape [8, 2, 2] and dtype "
            "bfloat16 for an output of shape [8, 2, 4]");
}

// Graph mode hands the list's items to context_attention_fwd untouched: the
// launcher's own rules decide (triton.cdiv on max_input_len, the grid parsed
// as C ints, pointers from data_ptr()).
AttentionCall TritonGraphCall(Value start_loc, Value seq_lens, Value max_input_len) {
  AttentionCall call =
      TritonGraphCall(Value::FromTensor(Tensor::Zeros(DType::kBFloat16, kCuda, {8, 2, 4})));
  call.cu_seqlens =
      Value::List({std::move(start_loc), std::move(seq_lens), std::move(max_input_len)});
  return call;
}

TEST(BindTritonTest, TheGridIsParsedAsCInts) {
  const auto bind = [](Value max_input_len) {
    return ErrorText(Bind(TritonGraphCall(IntTensor({0, 3}), IntTensor({3, 5}), max_input_len),
                          Profile::kTritonAttn));
  };
  EXPECT_EQ(bind(Value::Float(5.0)),
            "TypeError: 'float' object cannot be interpreted as an integer");
  EXPECT_EQ(bind(Value::None()),
            "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'");
  EXPECT_EQ(bind(Value::Str("5")), "TypeError: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(bind(Value::Int(int64_t{1} << 40)),
            "OverflowError: signed integer is greater than maximum");
  EXPECT_EQ(bind(Value::FromTensor(Tensor::FromDoubles({5.0}, DType::kFloat32, kCuda))),
            "TypeError: only integer tensors of a single element can be converted to an index");
  // An integer tensor is read by its __index__: a host sync.
  ScopedDeviceLedger ledger;
  absl::StatusOr<KernelCall> kernel =
      Bind(TritonGraphCall(IntTensor({0, 3}), IntTensor({3, 5}),
                           Value::FromTensor(IntTensor({5}).as_tensor().Reshape({}))),
           Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().max_rows_q, 128);
  EXPECT_EQ(ledger.counts().host_syncs, 1);
}

TEST(BindTritonTest, EmptyHostTensorsAreNullPointersAndNoBlocksLaunchNothing) {
  // An empty tensor's data_ptr() is 0, which the launcher takes as a valid
  // null pointer; a non-positive max_input_len gives a grid of no blocks.
  const Tensor empty_host = Tensor::FromInts({}, DType::kInt32, kCpu);
  absl::StatusOr<KernelCall> kernel = Bind(
      TritonGraphCall(Value::FromTensor(empty_host), Value::FromTensor(empty_host), Value::Int(0)),
      Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().batch, 0);
  kernel = Bind(TritonGraphCall(IntTensor({0, 3}), IntTensor({3, 5}), Value::Int(-64)),
                Profile::kTritonAttn);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->params().max_rows_q, 0);
}

TEST(BindTritonTest, BSeqLenMustHaveAShape) {
  EXPECT_EQ(ErrorText(Bind(TritonGraphCall(IntTensor({0, 3}), Value::Int(2), Value::Int(5)),
                           Profile::kTritonAttn)),
            "AttributeError: 'int' object has no attribute 'shape'");
  EXPECT_EQ(
      ErrorText(Bind(
          TritonGraphCall(IntTensor({0, 3}),
                          Value::FromTensor(IntTensor({3}).as_tensor().Reshape({})), Value::Int(5)),
          Profile::kTritonAttn)),
      "IndexError: tuple index out of range");
}

// ---------------------------------------------------------------------------
// sdpa

std::vector<int64_t> TokenStarts(const VarlenAttentionParams& p) {
  std::vector<int64_t> starts;
  for (int b = 0; b < p.batch; ++b) starts.push_back(p.q_start[b] / p.q_token_stride);
  return starts;
}

std::vector<int64_t> KeyStarts(const VarlenAttentionParams& p) {
  std::vector<int64_t> starts;
  for (int b = 0; b < p.batch; ++b) starts.push_back(p.k_start[b] / p.k_token_stride);
  return starts;
}

TEST(BindSdpaTest, FlattenBatchIsBlockDiagonalOverCuSeqlens) {
  AttentionCall call = MakeCall(10, 2, 2, 4, 4);
  call.sdpa.flatten_batch = true;
  call.cu_seqlens = IntTensor({0, 3, 8, 10});
  call.kwargs.set("softmax_scale", Value::Float(0.1));  // ignored by sdpa
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_THAT(TokenStarts(p), ElementsAre(0, 3, 8));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(3, 5, 2));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(3, 5, 2));
  EXPECT_EQ(p.max_rows_q, kUnlimited);
  EXPECT_DOUBLE_EQ(p.softmax_scale, 0.5);  // the construction scale, 1/sqrt(4)
  EXPECT_EQ(kernel->description(),
            "scaled_dot_product_attention with a boolean mask over 1 item of 10 tokens");
}

TEST(BindSdpaTest, RowsOutsideEveryBlockGetNoKeys) {
  // torch's SDPA writes 0 for a row whose mask is all False.
  AttentionCall call = MakeCall(10, 1, 1, 4, 4);
  call.sdpa.flatten_batch = true;
  call.cu_seqlens = IntTensor({0, 3, 3, 6});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_THAT(TokenStarts(p), ElementsAre(0, 3, 6));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(3, 3, 4));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(3, 3, 0));
}

TEST(BindSdpaTest, OverlappingBlocksGiveEachRowTheUnionOfItsBlocks) {
  // A non-monotone cu_seqlens makes blocks [0, 5) and [3, 8): rows 3 and 4
  // sit in both and attend to keys [0, 8).
  AttentionCall call = MakeCall(8, 1, 1, 4, 4);
  call.sdpa.flatten_batch = true;
  call.cu_seqlens = IntTensor({0, 5, 3, 8});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const VarlenAttentionParams p = kernel->params();
  EXPECT_THAT(TokenStarts(p), ElementsAre(0, 3, 5));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(3, 2, 3));
  EXPECT_THAT(KeyStarts(p), ElementsAre(0, 0, 3));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(5, 8, 5));
}

TEST(BindSdpaTest, PaddingMaskGivesOneSequencePerItem) {
  AttentionCall call = MakeCall(8, 1, 1, 4, 4);
  call.sdpa.flatten_batch = false;
  call.bsz = 2;
  call.seq_len = 4;
  call.cu_seqlens = IntTensor({0, 3, 7});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // Item 0 keeps 3 rows and keys; its last row has none (written as 0).
  EXPECT_THAT(TokenStarts(kernel->params()), ElementsAre(0, 3, 4));
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(3, 1, 4));
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_k), ElementsAre(3, 0, 4));

  // A length beyond the item is clamped to the item.
  call.cu_seqlens = IntTensor({0, 6, 7});
  kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(4, 1, 3));
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_k), ElementsAre(4, 1, 0));
}

TEST(BindSdpaTest, OnePaddingItemBroadcastsToEveryBatchItem) {
  AttentionCall call = MakeCall(8, 1, 1, 4, 4);
  call.bsz = 2;
  call.seq_len = 4;
  call.cu_seqlens = IntTensor({0, 2});
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(TokenStarts(kernel->params()), ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_k), ElementsAre(2, 0, 2, 0));
}

TEST(BindSdpaTest, NoCuSeqlensMeansEachItemAttendsToItself) {
  AttentionCall call = MakeCall(8, 1, 1, 4, 4);
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(TokenStarts(kernel->params()), ElementsAre(0));
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(8));

  call.sdpa.flatten_batch = false;
  call.bsz = 2;
  call.seq_len = 4;
  kernel = Bind(call, Profile::kSdpa);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(TokenStarts(kernel->params()), ElementsAre(0, 4));
  EXPECT_THAT(Array(kernel->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(4, 4));
}

TEST(BindSdpaTest, SinglePrecisionEmptyRowsFollowTheDtype) {
  // Rows outside the mask: bfloat16 and float32 average the item's values
  // (the library writes them after the kernel), float16 attends to the whole
  // item, float64 is NaN everywhere.
  auto bind = [](DType dtype) {
    AttentionCall call = MakeCall(6, 1, 1, 2, 2);
    for (Tensor* t : {&call.q, &call.k, &call.v}) {
      *t = Tensor::Zeros(dtype, kCuda, t->shape());
    }
    for (int64_t i = 0; i < call.v.numel(); ++i) call.v.SetDoubleAt(i, static_cast<double>(i));
    call.sdpa.flatten_batch = true;
    call.sdpa.softmax_in_single_precision = true;
    call.cu_seqlens = IntTensor({0, 2});
    return Bind(call, Profile::kSdpa);
  };
  absl::StatusOr<KernelCall> bf16 = bind(DType::kBFloat16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_THAT(Array(bf16->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(2));
  bf16->ApplyEpilogue();
  // Mean of v over the 6 tokens: dim 0 holds 0, 2, ..., 10 -> 5 (weights 1/6 in bf16).
  EXPECT_NEAR(bf16->output().DoubleAt(2 * 2), 5.0, 0.05);

  absl::StatusOr<KernelCall> f16 = bind(DType::kFloat16);
  ASSERT_TRUE(f16.ok()) << f16.status();
  EXPECT_THAT(Array(f16->params(), &VarlenAttentionParams::seqlen_q), ElementsAre(2, 4));
  EXPECT_THAT(Array(f16->params(), &VarlenAttentionParams::seqlen_k), ElementsAre(2, 6));

  absl::StatusOr<KernelCall> f64 = bind(DType::kFloat64);
  ASSERT_TRUE(f64.ok()) << f64.status();
  EXPECT_EQ(f64->params().batch, 0);
  f64->ApplyEpilogue();
  EXPECT_TRUE(std::isnan(f64->output().DoubleAt(0)));
}

// ---------------------------------------------------------------------------
// BindGroundTruth

TEST(BindGroundTruthTest, PacksLengthsBackToBackAndComputesEveryRow) {
  const Tensor q = Tensor::Zeros(DType::kFloat16, kCpu, {5, 6, 8});
  const Tensor k = Tensor::Zeros(DType::kFloat16, kCpu, {5, 2, 8});
  const Tensor v = Tensor::Zeros(DType::kFloat16, kCpu, {5, 2, 3});
  KernelCall call = BindGroundTruth(q, k, v, {2, 0, 3}, 0.125, DType::kFloat64);
  const VarlenAttentionParams p = call.params();
  EXPECT_EQ(p.batch, 3);
  EXPECT_THAT(Array(p, &VarlenAttentionParams::q_start), ElementsAre(0, 96, 96));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::k_start), ElementsAre(0, 32, 32));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::v_start), ElementsAre(0, 12, 12));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::o_start), ElementsAre(0, 36, 36));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(2, 0, 3));
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_k), ElementsAre(2, 0, 3));
  EXPECT_EQ(p.max_rows_q, kUnlimited);
  EXPECT_EQ(p.max_keys, kUnlimited);
  EXPECT_EQ(p.input_dtype, DType::kFloat16);
  EXPECT_EQ(p.output_dtype, DType::kFloat64);
  EXPECT_EQ(p.num_heads_q, 6);
  EXPECT_EQ(p.num_heads_kv, 2);
  EXPECT_EQ(p.head_dim_qk, 8);
  EXPECT_EQ(p.head_dim_v, 3);
  EXPECT_EQ(p.softmax_scale, 0.125);
  EXPECT_EQ(p.q_numel, 240);
  EXPECT_EQ(p.k_numel, 80);
  EXPECT_EQ(p.v_numel, 30);
  EXPECT_EQ(p.o_numel, 90);
  EXPECT_EQ(p.o_token_stride, 18);
  EXPECT_EQ(p.o_head_stride, 3);
  EXPECT_EQ(call.output().dtype(), DType::kFloat64);
  EXPECT_EQ(call.output().shape(), (Shape{5, 6, 3}));
  EXPECT_EQ(call.result_shape(), (Shape{5, 6, 3}));
  EXPECT_EQ(call.description(), "ground truth");
  EXPECT_EQ(p.q, static_cast<const void*>(q.data<unsigned char>()));
  EXPECT_TRUE(CheckKernelBounds(p).ok());
}

TEST(BindGroundTruthTest, KernelCallMovesKeepParamsValid) {
  const Tensor q = Tensor::Zeros(DType::kFloat32, kCpu, {4, 1, 2});
  KernelCall moved = BindGroundTruth(q, q, q, {1, 3}, 1.0, DType::kFloat32);
  KernelCall call = std::move(moved);
  const VarlenAttentionParams p = call.params();
  EXPECT_THAT(Array(p, &VarlenAttentionParams::seqlen_q), ElementsAre(1, 3));
  EXPECT_EQ(p.o, static_cast<void*>(call.output().mutable_data<unsigned char>()));
}

// ---------------------------------------------------------------------------
// KernelCall::Launch: a launch in rows

// fa3's call for sequences of 100 and 300 tokens, and the ground truth's.
std::optional<LaunchShape> Fa3Launch(int64_t max_seqlen) {
  AttentionCall call = MakeCall(400, 1, 1, 2, 2);
  call.cu_seqlens = IntTensor({0, 100, 400});
  call.kwargs.set("max_seqlen", Value::Int(max_seqlen));
  absl::StatusOr<KernelCall> kernel = Bind(call, Profile::kFa3);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? kernel->Launch() : std::nullopt;
}

std::optional<LaunchShape> TruthLaunch(double scale) {
  const Tensor t = Tensor::Zeros(DType::kBFloat16, kCuda, {400, 1, 2});
  return BindGroundTruth(t, t, t, {100, 300}, scale, DType::kFloat64).Launch();
}

TEST(LaunchShapeTest, ACorrectCallAsksForTheGroundTruthsLaunch) {
  // fa3's default scale is head_dim ** -0.5.
  const std::optional<LaunchShape> truth = TruthLaunch(std::pow(2.0, -0.5));
  ASSERT_TRUE(truth.has_value());
  EXPECT_EQ(truth->sequences.size(), 2u);
  EXPECT_EQ(truth->output_rows, 400);
  EXPECT_EQ(Fa3Launch(300), truth);
  // Another scale is another launch, to the last bit.
  EXPECT_NE(Fa3Launch(300), TruthLaunch(1 / std::sqrt(2.0)));
}

TEST(LaunchShapeTest, ATooSmallMaxSeqlenIsAnotherLaunch) {
  const std::optional<LaunchShape> truncated = Fa3Launch(100);
  ASSERT_TRUE(truncated.has_value());
  EXPECT_NE(truncated, TruthLaunch(std::pow(2.0, -0.5)));
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
