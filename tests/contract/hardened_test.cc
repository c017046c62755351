// Tests hardened Resolve(): what it derives, what it rejects, and its zero-sync metadata path.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/call.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {
namespace {

using ::varlen::test::ExpectPyError;
using ::varlen::test::Ints;
using ::varlen::test::IntTensor;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr Device kCpu = Device::kCpu;
constexpr Device kCuda = Device::kCuda;

// A call with q [tokens, heads, dim], k and v [tokens, kv_heads, dim], all on
// cuda without storage, and int32 token offsets `cu` on cuda.
AttentionCall Call(const std::vector<int64_t>& cu, int64_t heads, int64_t dim,
                   int64_t kv_heads = -1) {
  const int64_t tokens = cu.back();
  if (kv_heads < 0) kv_heads = heads;
  AttentionCall call;
  call.q = Tensor::ShapeOnly(DType::kBFloat16, kCuda, {tokens, heads, dim});
  call.k = Tensor::ShapeOnly(DType::kBFloat16, kCuda, {tokens, kv_heads, dim});
  call.v = Tensor::ShapeOnly(DType::kBFloat16, kCuda, {tokens, kv_heads, dim});
  call.seq_len = tokens;
  call.sdpa.flatten_batch = true;  // as Qwen-style encoders construct sdpa
  call.cu_seqlens = Value::FromTensor(IntTensor(cu));
  return call;
}

// [3, 5, 2] with 2 heads of dim 4; and [480, 720] with 16 heads of dim 96.
AttentionCall SmallCall() { return Call({0, 3, 8, 10}, 2, 4); }
AttentionCall FlashinferCall() { return Call({0, 480, 1200}, 16, 96); }

VisionAttentionMetadata Built(const std::vector<int64_t>& cu, int64_t elem_per_token,
                              Mode mode = Mode::kHardened) {
  const Value offsets = Value::FromTensor(IntTensor(cu));
  return elem_per_token > 0 ? *PrepareFlashinferCudnnMetadata(offsets, kCuda, elem_per_token, mode)
                            : *PrepareVisionAttentionMetadata(offsets, kCuda, {}, mode);
}

// Metadata built from the very tensor `cu` (a Value holding it).
VisionAttentionMetadata BuiltFrom(const Value& cu, int64_t elem_per_token) {
  return elem_per_token > 0
             ? *PrepareFlashinferCudnnMetadata(cu, kCuda, elem_per_token, Mode::kHardened)
             : *PrepareVisionAttentionMetadata(cu, kCuda, {}, Mode::kHardened);
}

template <typename T>
const T& ArgsOf(const Resolution& r) {
  return std::get<T>(r.args->args);
}

const Value& MaxOf(const Resolution& r, Profile profile) {
  return profile == Profile::kFa3 ? ArgsOf<FlashVarlenArgs>(r).max_seqlen
                                  : ArgsOf<TritonArgs>(r).max_seqlen;
}

// The seed scenario ----------------------------------------------------------------------

TEST(HardenedFlashinferCudnn, TokenOffsetsWithoutSequenceLengthsResolveAsTheBuilderWould) {
  const VisionAttentionMetadata built = Built({0, 480, 1200}, 1536, Mode::kFaithful);
  const std::vector<int64_t> packed = Ints(built.packed_indptrs);
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = FlashinferCall();
    call.entry = entry;
    Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened);
    ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
    EXPECT_FALSE(r.notes.empty());
    const auto& args = ArgsOf<FlashinferCudnnArgs>(r);
    EXPECT_EQ(Ints(args.actual_seq_lens), Ints(built.sequence_lengths));
    EXPECT_EQ(args.actual_seq_lens.shape(), (Shape{8, 1, 1, 1}));
    EXPECT_EQ(Ints(args.batch_offsets_qk),
              std::vector<int64_t>(packed.begin(), packed.begin() + 9));
    EXPECT_EQ(Ints(args.batch_offsets_v),
              std::vector<int64_t>(packed.begin() + 9, packed.begin() + 18));
    EXPECT_EQ(Ints(args.batch_offsets_o), std::vector<int64_t>(packed.begin() + 18, packed.end()));
    EXPECT_EQ(args.max_token_per_sequence, built.flashinfer_max_seqlen.as_int());
    EXPECT_EQ(args.max_sequence_kv, 4096);
  }
}

TEST(HardenedFlashinferCudnn, SeedScenarioFailsFaithfully) {
  ExpectPyError(
      Resolve(FlashinferCall(), Profile::kFlashinferCudnn, Mode::kFaithful).status,
      PyErrorKind::kRuntimeError,
      "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend");
}

// Rejections --------------------------------------------------------------------------------

TEST(HardenedRejects, TooSmallMaxSeqlenOnTokenProfiles) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall call = SmallCall();
    call.kwargs.set("max_seqlen", Value::Int(4));
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "max_seqlen=4 < 5 = cu_seqlens[2] - cu_seqlens[1]: max_seqlen must be at least "
                  "the longest sequence");
    // The same from prepared metadata.
    AttentionCall with_metadata = SmallCall();
    with_metadata.forward_metadata = Built({0, 3, 8, 10}, 0);
    with_metadata.forward_metadata->max_seqlen = Value::Int(4);
    ExpectPyError(Resolve(with_metadata, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "forward_metadata.max_seqlen=4 < 5 = the longest sequence of the metadata: "
                  "max_seqlen must be at least the longest sequence");
  }
}

TEST(HardenedRejects, TooSmallMaxSeqlenOnFlashinfer) {
  AttentionCall call = FlashinferCall();
  call.kwargs.set("max_seqlen", Value::Int(700));
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "max_seqlen=700 < 720 = cu_seqlens[2] - cu_seqlens[1]: max_seqlen must be at "
                "least the longest sequence");
  AttentionCall with_metadata = FlashinferCall();
  with_metadata.forward_metadata = Built({0, 480, 1200}, 1536);
  with_metadata.forward_metadata->flashinfer_max_seqlen = Value::Int(512);
  ExpectPyError(Resolve(with_metadata, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "forward_metadata.flashinfer_max_seqlen=512 < 720 = the longest sequence of the "
                "metadata: max_seqlen must be at least the longest sequence");
}

// sdpa takes no max_seqlen (its mask comes from cu_seqlens alone), so a
// too-small value cannot reach a kernel there; hardened sdpa lets it through
// unread (it describes what sdpa derives itself).
TEST(HardenedRejects, SdpaHasNoMaxSeqlenToCheck) {
  AttentionCall call = SmallCall();
  call.kwargs.set("max_seqlen", Value::Int(1));
  Resolution r = Resolve(call, Profile::kSdpa, Mode::kHardened);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_THAT(ArgsOf<SdpaArgs>(r).cu_seqlens, ElementsAre(0, 3, 8, 10));
}

TEST(HardenedRejects, FloatAndStringMaxSeqlen) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn, Profile::kFlashinferCudnn}) {
    AttentionCall call = profile == Profile::kFlashinferCudnn ? FlashinferCall() : SmallCall();
    call.kwargs.set("max_seqlen", Value::Float(4096.0));
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kTypeError,
                  "max_seqlen=4096.0 is a float: it must be an int, never truncated");
    call.kwargs.set("max_seqlen", Value::Str("4096"));
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kTypeError,
                  "max_seqlen='4096' is a str: it must be an int or a one-element integer tensor");
  }
}

TEST(HardenedRejects, NonMonotoneCuSeqlens) {
  for (Profile profile :
       {Profile::kFa3, Profile::kTritonAttn, Profile::kSdpa, Profile::kFlashinferCudnn}) {
    AttentionCall call = Call({0, 20, 17, 30}, 2, 4);
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "cu_seqlens[2]=17 < cu_seqlens[1]=20: offsets must be non-decreasing");
  }
}

TEST(HardenedRejects, LastOffsetOtherThanTheTokenCount) {
  for (Profile profile :
       {Profile::kFa3, Profile::kTritonAttn, Profile::kSdpa, Profile::kFlashinferCudnn}) {
    AttentionCall call = SmallCall();
    call.cu_seqlens = Value::FromTensor(IntTensor({0, 3, 8, 9}));
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "cu_seqlens[3]=9 != 10 = q.shape[0]: the last offset must equal the number of "
                  "packed tokens");
  }
}

TEST(HardenedRejects, Int64OffsetsBeyondInt32) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall call = Call({0, 4}, 2, 4);
    call.cu_seqlens =
        Value::FromTensor(IntTensor({0, (int64_t{1} << 32) + 4}, DType::kInt64, kCpu));
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "cu_seqlens[1]=4294967300 > 2147483647: offsets must fit in int32");
  }
}

TEST(HardenedRejects, WrongElementsPerTokenInPackedIndptrs) {
  // Kwargs path: packed indptrs built for 1024 elements per token, q has 1536.
  const VisionAttentionMetadata narrow = Built({0, 480, 1200}, 1024, Mode::kFaithful);
  AttentionCall call = FlashinferCall();
  call.cu_seqlens = narrow.packed_indptrs;
  call.kwargs.set("sequence_lengths", narrow.sequence_lengths);
  call.kwargs.set("max_seqlen", Value::Int(4096));
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "cu_seqlens[1]=491520 != 737280 (qk offset of sequence 1): each offset must be the "
                "running sum of sequence_lengths x heads*head_dim (1536)");
  // Unstamped metadata, validated the same way.
  AttentionCall hand_built = FlashinferCall();
  hand_built.forward_metadata = narrow;
  ExpectPyError(Resolve(hand_built, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "forward_metadata.packed_indptrs[1]=491520 != 737280 (qk offset of sequence 1): "
                "each offset must be the running sum of sequence_lengths x heads*head_dim (1536)");
  // Stamped metadata: the stamp names the width it was built for.
  AttentionCall stamped = FlashinferCall();
  stamped.forward_metadata = Built({0, 480, 1200}, 1024);
  ExpectPyError(Resolve(stamped, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "forward_metadata was built with elem_per_token=1024 but q has "
                "heads*head_dim=1536: the packed offsets use the wrong width");
}

TEST(HardenedRejects, GarbageInTheVAndOThirds) {
  const VisionAttentionMetadata m = Built({0, 480, 1200}, 1536, Mode::kFaithful);
  std::vector<int64_t> packed = Ints(m.packed_indptrs);
  packed[9 + 1] = 7;  // the v offset of sequence 1
  AttentionCall call = FlashinferCall();
  call.cu_seqlens = Value::FromTensor(IntTensor(packed));
  call.kwargs.set("sequence_lengths", m.sequence_lengths);
  call.kwargs.set("max_seqlen", Value::Int(4096));
  ASSERT_TRUE(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status.ok());
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "cu_seqlens[10]=7 != 737280 (v offset of sequence 1): each offset must be the "
                "running sum of sequence_lengths x heads*head_dim (1536)");
}

TEST(HardenedRejects, StaleMetadata) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall call = Call({0, 3, 8, 12}, 2, 4);
    call.forward_metadata = Built({0, 3, 8, 10}, 0);
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "forward_metadata was built for 10 tokens but q has 12: metadata must be "
                  "rebuilt for every batch");
  }
  AttentionCall call = Call({0, 480, 1000}, 16, 96);
  call.forward_metadata = Built({0, 480, 1200}, 1536);
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "forward_metadata was built for 1200 tokens but q has 1000: metadata must be "
                "rebuilt for every batch");
}

TEST(HardenedRejects, ElementOffsetsBeyondInt32) {
  AttentionCall call = Call({0, 1864136}, 16, 72);
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "q.shape[0]=1864136 tokens x heads*head_dim=1152 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1864135 tokens at this width)");
}

TEST(HardenedRejects, FlashinferHeadsAndHeadDimMismatch) {
  AttentionCall gqa = Call({0, 480, 1200}, 16, 96, /*kv_heads=*/8);
  ExpectPyError(Resolve(gqa, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "k has 8 heads and v has 8 but q has 16: flashinfer_cudnn offsets q, k and v with "
                "one per-token width, so heads must match");
  AttentionCall wide_v = FlashinferCall();
  wide_v.v = Tensor::ShapeOnly(DType::kBFloat16, kCuda, {1200, 16, 128});
  ExpectPyError(Resolve(wide_v, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "v has head_dim 128 but q has 96: flashinfer_cudnn offsets v with the q/k width, "
                "so head dims must match");
  // GQA is fine for the token-offset profiles.
  Resolution fa3 =
      Resolve(Call({0, 3, 8, 10}, 4, 4, /*kv_heads=*/2), Profile::kFa3, Mode::kHardened);
  EXPECT_TRUE(fa3.status.ok()) << FormatPythonError(fa3.status);
}

TEST(HardenedRejects, GraphModeBuffersTheKernelReadsAsTheyAre) {
  AttentionCall call = SmallCall();
  call.graph_mode = true;
  call.kwargs.set("output_ws",
                  Value::FromTensor(Tensor::Zeros(DType::kBFloat16, kCuda, {10, 2, 4})));
  call.cu_seqlens = Value::List({Value::FromTensor(IntTensor({0, 3, 8, 10}, DType::kInt64, kCpu)),
                                 Value::FromTensor(IntTensor({3, 5, 2})), Value::Int(5)});
  ASSERT_TRUE(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).status.ok());
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "cu_seqlens[0] is int64 on cpu: in cuda-graph mode the kernel reads it as it is, "
                "so it must be contiguous int32 on q's device (cuda)");
}

TEST(HardenedRejects, GraphModeThroughTheLayerWithoutOutputWs) {
  AttentionCall call = SmallCall();
  call.entry = Entry::kLayer;
  call.graph_mode = true;
  call.cu_seqlens = Value::List({Value::FromTensor(IntTensor({0, 3, 8, 10})),
                                 Value::FromTensor(IntTensor({3, 5, 2})), Value::Int(5)});
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "output_ws=None: in cuda-graph mode it must be a preallocated tensor of the "
                "output's shape [10, 2, 4], dtype bfloat16 and device cuda");
}

// Graph safety ------------------------------------------------------------------------------

TEST(HardenedGraphSafety, StampedBuilderMetadataNeedsNoDeviceWork) {
  struct Case {
    Profile profile;
    AttentionCall call;
  };
  // Models hand the builder and every layer the same cu_seqlens tensor.
  AttentionCall fa3 = SmallCall();
  fa3.forward_metadata = BuiltFrom(fa3.cu_seqlens, 0);
  AttentionCall triton = SmallCall();
  triton.forward_metadata = BuiltFrom(triton.cu_seqlens, 0);
  AttentionCall flashinfer = FlashinferCall();
  flashinfer.forward_metadata = Built({0, 480, 1200}, 1536);
  flashinfer.cu_seqlens = Value::None();
  for (const Case& c : std::vector<Case>{{Profile::kFa3, fa3},
                                         {Profile::kTritonAttn, triton},
                                         {Profile::kFlashinferCudnn, flashinfer}}) {
    for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
      AttentionCall call = c.call;
      call.entry = entry;
      Resolution r = Resolve(call, c.profile, Mode::kHardened);
      ASSERT_TRUE(r.status.ok()) << ProfileName(c.profile) << ": " << FormatPythonError(r.status);
      EXPECT_EQ(r.counts().host_syncs, 0) << ProfileName(c.profile);
      EXPECT_THAT(r.events, IsEmpty()) << ProfileName(c.profile);
    }
  }
}

TEST(HardenedGraphSafety, StampedFlashinferMetadataResolvesToTheBuilderValues) {
  AttentionCall call = FlashinferCall();
  call.forward_metadata = Built({0, 480, 1200}, 1536);
  Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_THAT(Ints(ArgsOf<FlashinferCudnnArgs>(r).actual_seq_lens),
              ElementsAre(480, 720, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(r).max_token_per_sequence, 4096);
}

TEST(HardenedGraphSafety, UnstampedMetadataIsValidatedOnTheHost) {
  AttentionCall call = SmallCall();
  call.cu_seqlens = Value::None();
  call.forward_metadata = Built({0, 3, 8, 10}, 0, Mode::kFaithful);
  Resolution r = Resolve(call, Profile::kFa3, Mode::kHardened);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  // cu read once to validate it, seq_lens (which fa3 ignores) once to check
  // that it agrees.
  EXPECT_EQ(r.counts().host_syncs, 2);
  EXPECT_EQ(ArgsOf<FlashVarlenArgs>(r).max_seqlen.as_int(), 5);
}

TEST(HardenedGraphSafety, AnotherCuSeqlensBesideStampedMetadataIsRead) {
  // A second, separate description of the boundaries has to be read to be
  // compared: a host sync, reported as such.
  AttentionCall call = SmallCall();
  call.forward_metadata = Built({0, 3, 8, 10}, 0);
  Resolution r = Resolve(call, Profile::kFa3, Mode::kHardened);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_EQ(r.counts().host_syncs, 1);
}

// Hardened never lets through what faithful lets through silently ---------------------------

TEST(HardenedVsFaithful, TooSmallMaxSeqlen) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall call = SmallCall();
    call.kwargs.set("max_seqlen", Value::Int(3));
    Resolution faithful = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
    EXPECT_EQ(MaxOf(faithful, profile).as_int(), 3);  // below the real 5
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "max_seqlen=3 < 5 = cu_seqlens[2] - cu_seqlens[1]: max_seqlen must be at least "
                  "the longest sequence");
  }
}

TEST(HardenedVsFaithful, TruncatedFloatAndBoolMaxSeqlen) {
  AttentionCall call = SmallCall();
  call.kwargs.set("max_seqlen", Value::Float(5.9));
  Resolution faithful = Resolve(call, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok());
  EXPECT_EQ(ArgsOf<TritonArgs>(faithful).max_seqlen.as_int(), 5);
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kTypeError,
                "max_seqlen=5.9 is a float: it must be an int, never truncated");
  call.kwargs.set("max_seqlen", Value::Bool(true));
  Resolution as_one = Resolve(call, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(as_one.status.ok());
  EXPECT_EQ(ArgsOf<FlashVarlenArgs>(as_one).max_seqlen.as_int(), 1);
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kHardened).status, PyErrorKind::kTypeError,
                "max_seqlen=True is a bool: it must be an int or a one-element integer tensor");
}

TEST(HardenedVsFaithful, Int64OffsetsThatWrapInTheCast) {
  AttentionCall call = Call({0, 4}, 2, 4);
  call.cu_seqlens = Value::FromTensor(IntTensor({0, (int64_t{1} << 32) + 4}, DType::kInt64, kCpu));
  Resolution faithful = Resolve(call, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
  EXPECT_THAT(Ints(ArgsOf<FlashVarlenArgs>(faithful).cu_seqlens), ElementsAre(0, 4));
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kHardened).status, PyErrorKind::kValueError,
                "cu_seqlens[1]=4294967300 > 2147483647: offsets must fit in int32");
}

TEST(HardenedVsFaithful, TooNarrowElementsPerToken) {
  const VisionAttentionMetadata narrow = Built({0, 480, 1200}, 1024, Mode::kFaithful);
  AttentionCall call = FlashinferCall();
  call.forward_metadata = narrow;
  Resolution faithful = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
  EXPECT_THAT(
      Ints(ArgsOf<FlashinferCudnnArgs>(faithful).batch_offsets_qk),
      ElementsAre(0, 491520, 1228800, 1228800, 1228800, 1228800, 1228800, 1228800, 1228800));
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "forward_metadata.packed_indptrs[1]=491520 != 737280 (qk offset of sequence 1): "
                "each offset must be the running sum of sequence_lengths x heads*head_dim (1536)");
}

TEST(HardenedVsFaithful, WrappedElementOffsets) {
  AttentionCall call = Call({0, 1864136}, 16, 72);
  call.forward_metadata = Built({0, 1864136}, 1152, Mode::kFaithful);
  Resolution faithful = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(faithful).batch_offsets_qk.IntAt(1), -2147482624);
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "q.shape[0]=1864136 tokens x heads*head_dim=1152 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1864135 tokens at this width)");
}

TEST(HardenedVsFaithful, NonMonotoneCuInTriton) {
  AttentionCall call = Call({0, 20, 17, 30}, 2, 4);
  Resolution faithful = Resolve(call, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
  EXPECT_THAT(Ints(ArgsOf<TritonArgs>(faithful).seq_lens), ElementsAre(20, -3, 13));
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "cu_seqlens[2]=17 < cu_seqlens[1]=20: offsets must be non-decreasing");
}

TEST(HardenedVsFaithful, SequenceLengthsThatDisagreeWithCu) {
  AttentionCall call = SmallCall();
  call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({3, 4, 3})));
  Resolution faithful = Resolve(call, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
  EXPECT_THAT(Ints(ArgsOf<TritonArgs>(faithful).seq_lens), ElementsAre(3, 4, 3));
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "sequence_lengths[1]=4 != 5 = cu_seqlens[2] - cu_seqlens[1]: lengths must match "
                "the offsets");
}

}  // namespace
}  // namespace varlen

namespace varlen {
namespace {

TEST(HardenedRejects, SdpaPerCallScaleThatWouldBeIgnored) {
  AttentionCall call = SmallCall();
  call.kwargs.set("softmax_scale", Value::Float(0.25));
  ExpectPyError(Resolve(call, Profile::kSdpa, Mode::kHardened).status, PyErrorKind::kValueError,
                "softmax_scale=0.25 differs from the scale sdpa was constructed with (0.5): sdpa "
                "ignores the per-call scale, so it must be set at construction");
  call.kwargs.set("softmax_scale", Value::Float(0.5));  // the construction scale, 4 ** -0.5
  EXPECT_TRUE(Resolve(call, Profile::kSdpa, Mode::kHardened).status.ok());
}

TEST(UnreadKeywords, ReportedByBothModesAndRefusedByHardened) {
  AttentionCall call = SmallCall();
  call.kwargs.set("max_seq_len", Value::Int(5));  // a typo of max_seqlen
  call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({3, 5, 2})));
  // fa3 reads neither: faithful mode goes through and says so.
  const Resolution faithful = Resolve(call, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(faithful.status.ok()) << faithful.status;
  EXPECT_THAT(faithful.unread_keywords, ElementsAre("max_seq_len", "sequence_lengths"));
  // Hardened mode checks that sequence_lengths agree (a read) and refuses
  // the keyword nothing reads, by name.
  const Resolution hardened = Resolve(call, Profile::kFa3, Mode::kHardened);
  EXPECT_THAT(hardened.unread_keywords, ElementsAre("max_seq_len"));
  ExpectPyError(hardened.status, PyErrorKind::kTypeError,
                "max_seq_len=5: fa3 never reads this keyword, so it would change nothing (check "
                "its spelling, or leave it out)");
  // Through the layer, a keyword VisionAttention does not take from its
  // **kwargs is unread, whatever the backend; the ones it takes (and hands
  // on) are the layer's reads.
  call.kwargs.erase("max_seq_len");
  call.kwargs.set("window_size", Value::List({Value::Int(8), Value::Int(8)}));
  call.entry = Entry::kLayer;
  EXPECT_THAT(Resolve(call, Profile::kSdpa, Mode::kFaithful).unread_keywords,
              ElementsAre("window_size"));
  // fa3 hands window_size and s_aux to its kernel: read, and the kernel
  // computes that window; what it does with a window that is not a pair
  // of ints is not modelled, and hardened mode refuses it.
  call.entry = Entry::kDirect;
  const Resolution windowed = Resolve(call, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(windowed.status.ok()) << windowed.status;
  EXPECT_EQ(std::get<FlashVarlenArgs>(windowed.args->args).variant,
            (AttentionVariant{.window_left = 8, .window_right = 8, .sinks = {}}));
  call.kwargs.set("window_size", Value::List({Value::Int(8), Value::Float(8.0)}));
  EXPECT_TRUE(absl::IsUnimplemented(Resolve(call, Profile::kFa3, Mode::kFaithful).status));
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kHardened).status, PyErrorKind::kValueError,
                "window_size=[8, 8.0]: a window is a pair of ints (left, right)");
  call.kwargs.set("window_size", Value::List({Value::Int(-2), Value::Int(0)}));
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kHardened).status, PyErrorKind::kValueError,
                "window_size=[-2, 0]: each bound is -1 (none) or at least 0");
  call.kwargs.set("window_size", Value::List({Value::Int(-1), Value::Int(-1)}));
  const Resolution full = Resolve(call, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(full.status.ok()) << full.status;
  EXPECT_THAT(full.unread_keywords, ElementsAre("sequence_lengths"));
  // Unread but harmless for hardened mode: keywords that describe what the
  // backend derives itself, and full attention's window.
  EXPECT_TRUE(Resolve(call, Profile::kFa4, Mode::kHardened).status.ok());
  call.entry = Entry::kLayer;
  // A call that raised read only what it read before: nothing is reported.
  call.cu_seqlens = Value::Str("x");
  EXPECT_THAT(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).unread_keywords, IsEmpty());
}

TEST(HardenedRejects, ListCuSeqlensOutsideGraphModeNamesTheValue) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn, Profile::kFlashinferCudnn}) {
    AttentionCall call = SmallCall();
    call.cu_seqlens = Value::List({Value::Int(0), Value::Int(3), Value::Int(8), Value::Int(10)});
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kTypeError,
                  "cu_seqlens=[0, 3, 8, 10] is a list: outside cuda-graph mode it must be a tensor "
                  "of token offsets, a SingletonCache or None");
  }
}

TEST(HardenedEmptyBatch, UniformOffsetsForZeroTokensAreAllZero) {
  AttentionCall call = Call({0}, 2, 4);
  call.cu_seqlens = Value::None();
  call.seq_len = 0;
  EXPECT_EQ(FormatPythonError(Resolve(call, Profile::kFa3, Mode::kFaithful).status),
            "RuntimeError: step must be nonzero");
  Resolution r = Resolve(call, Profile::kFa3, Mode::kHardened);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_EQ(Ints(ArgsOf<FlashVarlenArgs>(r).cu_seqlens), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(ArgsOf<FlashVarlenArgs>(r).max_seqlen.as_int(), 0);
}

TEST(HardenedGraphMode, MessagesNameTheValueAndTheLayout) {
  AttentionCall call = SmallCall();
  call.graph_mode = true;
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "output_ws is absent: in cuda-graph mode triton_attn writes into a preallocated "
                "output_ws");
  call.kwargs.set("output_ws", Value::None());
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kHardened).status,
                PyErrorKind::kTypeError,
                "cu_seqlens=tensor([0, 3, 8, 10], dtype=int32, device=cuda) is a Tensor: in "
                "cuda-graph mode it must be the list [cu_seqlens, seq_lens, max_seqlen]");
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kHardened).status, PyErrorKind::kTypeError,
                "cu_seqlens=tensor([0, 3, 8, 10], dtype=int32, device=cuda) is a Tensor: in "
                "cuda-graph mode it must be the list [cu_seqlens, max_seqlen]");
}

}  // namespace
}  // namespace varlen
