// Tests faithful Resolve() end to end for every profile, entry and argument path.

#include "varlen/contract/resolve.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/call.h"
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
constexpr DeviceEventKind kSync = DeviceEventKind::kHostSync;
constexpr DeviceEventKind kH2D = DeviceEventKind::kHostToDeviceCopy;
constexpr DeviceEventKind kD2H = DeviceEventKind::kDeviceToHostCopy;
constexpr DeviceEventKind kCast = DeviceEventKind::kCast;

std::vector<DeviceEventKind> Kinds(const Resolution& r) {
  std::vector<DeviceEventKind> kinds;
  for (const DeviceEvent& e : r.events) kinds.push_back(e.kind);
  return kinds;
}

// A call over [3, 5, 2] (10 tokens, 2 heads of dim 4) with cu_seqlens of
// `dtype` on `cu_device`; q, k and v live on cuda.
AttentionCall Call(Entry entry = Entry::kDirect, DType dtype = DType::kInt32,
                   Device cu_device = kCuda) {
  AttentionCall call;
  for (Tensor* t : {&call.q, &call.k, &call.v}) {
    *t = Tensor::ShapeOnly(DType::kBFloat16, kCuda, {10, 2, 4});
  }
  call.seq_len = 10;
  call.sdpa.flatten_batch = true;  // as Qwen-style encoders construct sdpa
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 3, 8, 10}, dtype, cu_device));
  call.entry = entry;
  return call;
}

// The same geometry shaped for flashinfer_cudnn: [480, 720] with 16 heads of
// dim 96 (1536 elements per token).
AttentionCall FlashinferCall(Entry entry = Entry::kDirect) {
  AttentionCall call;
  for (Tensor* t : {&call.q, &call.k, &call.v}) {
    *t = Tensor::ShapeOnly(DType::kBFloat16, kCuda, {1200, 16, 96});
  }
  call.seq_len = 1200;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 480, 1200}));
  call.entry = entry;
  return call;
}

VisionAttentionMetadata PlainMetadata() {
  return *PrepareVisionAttentionMetadata(Value::FromTensor(IntTensor({0, 3, 8, 10})), kCuda, {},
                                         Mode::kFaithful);
}

VisionAttentionMetadata FlashinferMetadata() {
  return *PrepareFlashinferCudnnMetadata(Value::FromTensor(IntTensor({0, 480, 1200})), kCuda, 1536,
                                         Mode::kFaithful);
}

// Resolves and requires success with a non-empty record of the path taken.
template <typename T>
T ResolveOk(const AttentionCall& call, Profile profile, Resolution* out) {
  *out = Resolve(call, profile, Mode::kFaithful);
  EXPECT_TRUE(out->status.ok()) << FormatPythonError(out->status);
  EXPECT_FALSE(out->notes.empty());
  if (!out->status.ok() || !out->args.has_value()) return T{};
  EXPECT_TRUE(std::holds_alternative<T>(out->args->args));
  return std::get<T>(out->args->args);
}

constexpr absl::string_view kIntOfNone =
    "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'";
const std::vector<int64_t> kPackedThird = {0,       737280,  1843200, 1843200, 1843200,
                                           1843200, 1843200, 1843200, 1843200};

// flashinfer_cudnn ------------------------------------------------------------------

TEST(ResolveFlashinferCudnn, FromBuilderMetadataOnEitherEntry) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = FlashinferCall(entry);
    call.forward_metadata = FlashinferMetadata();
    Resolution r;
    auto args = ResolveOk<FlashinferCudnnArgs>(call, Profile::kFlashinferCudnn, &r);
    EXPECT_THAT(Ints(args.actual_seq_lens), ElementsAre(480, 720, 0, 0, 0, 0, 0, 0));
    EXPECT_EQ(Ints(args.batch_offsets_qk), kPackedThird);
    EXPECT_EQ(Ints(args.batch_offsets_v), kPackedThird);
    EXPECT_EQ(Ints(args.batch_offsets_o), kPackedThird);
    EXPECT_EQ(args.max_token_per_sequence, 4096);
    EXPECT_EQ(args.max_sequence_kv, 4096);
    EXPECT_DOUBLE_EQ(args.scale, 1.0 / std::sqrt(96.0));
    EXPECT_FALSE(args.output_4d);
    // Even with prepared metadata the bounds check's .any() syncs.
    EXPECT_THAT(Kinds(r), ElementsAre(kSync)) << EntryName(entry);
  }
}

TEST(ResolveFlashinferCudnn, FromKwargsOnEitherEntry) {
  const VisionAttentionMetadata m = FlashinferMetadata();
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = FlashinferCall(entry);
    call.cu_seqlens = m.packed_indptrs;
    call.kwargs.set("sequence_lengths", m.sequence_lengths);
    call.kwargs.set("max_seqlen", Value::Int(4096));
    call.kwargs.set("softmax_scale", Value::Float(0.125));
    Resolution r;
    auto args = ResolveOk<FlashinferCudnnArgs>(call, Profile::kFlashinferCudnn, &r);
    EXPECT_THAT(Ints(args.actual_seq_lens), ElementsAre(480, 720, 0, 0, 0, 0, 0, 0));
    EXPECT_EQ(Ints(args.batch_offsets_qk), kPackedThird);
    EXPECT_EQ(args.max_token_per_sequence, 4096);
    EXPECT_DOUBLE_EQ(args.scale, 0.125);
    EXPECT_THAT(Kinds(r), ElementsAre(kSync));
  }
}

TEST(ResolveFlashinferCudnn, HostInt64KwargsAreCastAndCopiedToQsDevice) {
  AttentionCall call = FlashinferCall();
  const VisionAttentionMetadata m = FlashinferMetadata();
  std::vector<int64_t> packed = Ints(m.packed_indptrs);
  call.cu_seqlens = Value::FromTensor(IntTensor(packed, DType::kInt64, kCpu));
  call.kwargs.set("sequence_lengths",
                  Value::FromTensor(IntTensor({480, 720, 0, 0, 0, 0, 0, 0}, DType::kInt64, kCpu)));
  call.kwargs.set("max_seqlen", Value::FromTensor(IntTensor({720}, DType::kInt64, kCuda)));
  Resolution r;
  auto args = ResolveOk<FlashinferCudnnArgs>(call, Profile::kFlashinferCudnn, &r);
  EXPECT_EQ(args.actual_seq_lens.dtype(), DType::kInt32);
  EXPECT_EQ(args.actual_seq_lens.device(), kCuda);
  EXPECT_EQ(args.batch_offsets_qk.dtype(), DType::kInt32);
  EXPECT_EQ(args.batch_offsets_qk.device(), kCuda);
  EXPECT_EQ(args.max_token_per_sequence, 720);
  // max: .detach().cpu() then .item(); lengths, then packed: cast and copy;
  // then the bounds check.
  EXPECT_THAT(Kinds(r), ElementsAre(kD2H, kSync, kCast, kH2D, kCast, kH2D, kSync));
  EXPECT_EQ(r.counts().host_syncs, 2);
}

TEST(ResolveFlashinferCudnn, DirectWithoutKeysNamesTheMissingKey) {
  ExpectPyError(
      Resolve(FlashinferCall(), Profile::kFlashinferCudnn, Mode::kFaithful).status,
      PyErrorKind::kRuntimeError,
      "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend");
}

TEST(ResolveFlashinferCudnn, LayerWithoutMaxFailsInInt) {
  AttentionCall call = FlashinferCall(Entry::kLayer);
  call.kwargs.set("sequence_lengths", FlashinferMetadata().sequence_lengths);
  Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ExpectPyError(r.status, PyErrorKind::kTypeError, std::string(kIntOfNone));
  EXPECT_FALSE(r.args.has_value());
  EXPECT_THAT(r.events, IsEmpty());
}

TEST(ResolveFlashinferCudnn, LayerWithMaxButNoLengthsFailsTheLengthsTypeCheck) {
  AttentionCall call = FlashinferCall(Entry::kLayer);
  call.kwargs.set("max_seqlen", Value::Int(4096));
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "sequence_lengths must be a torch.Tensor");
}

TEST(ResolveFlashinferCudnn, GraphModeChangesNothing) {
  AttentionCall call = FlashinferCall();
  call.graph_mode = true;
  call.forward_metadata = FlashinferMetadata();
  Resolution r;
  auto args = ResolveOk<FlashinferCudnnArgs>(call, Profile::kFlashinferCudnn, &r);
  EXPECT_EQ(args.max_token_per_sequence, 4096);
  EXPECT_THAT(Kinds(r), ElementsAre(kSync));
}

TEST(ResolveFlashinferCudnn, HostQueryNeedsNoSync) {
  AttentionCall call = FlashinferCall();
  for (Tensor* t : {&call.q, &call.k, &call.v}) {
    *t = Tensor::ShapeOnly(DType::kBFloat16, kCpu, {1200, 16, 96});
  }
  call.forward_metadata = *PrepareFlashinferCudnnMetadata(
      Value::FromTensor(IntTensor({0, 480, 1200}, DType::kInt32, kCpu)), kCpu, 1536,
      Mode::kFaithful);
  Resolution r;
  ResolveOk<FlashinferCudnnArgs>(call, Profile::kFlashinferCudnn, &r);
  EXPECT_THAT(r.events, IsEmpty());
}

// fa3 ---------------------------------------------------------------------------------

TEST(ResolveFa3, FromMetadataOnEitherEntryWithoutDeviceEvents) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = Call(entry);
    call.forward_metadata = PlainMetadata();
    call.kwargs.set("max_seqlen", Value::Int(1));  // ignored: metadata wins
    Resolution r;
    auto args = ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &r);
    EXPECT_TRUE(args.cu_seqlens.as_tensor().SharesStorageWith(
        call.forward_metadata->cu_seqlens.as_tensor()));
    EXPECT_EQ(args.max_seqlen.as_int(), 5);
    EXPECT_DOUBLE_EQ(args.scale, 0.5);
    EXPECT_THAT(r.events, IsEmpty());
  }
}

TEST(ResolveFa3, MetadataWinsOverGraphMode) {
  AttentionCall call = Call();
  call.graph_mode = true;
  call.forward_metadata = PlainMetadata();
  Resolution r;
  auto args = ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &r);
  EXPECT_EQ(args.max_seqlen.as_int(), 5);
  EXPECT_THAT(r.events, IsEmpty());
}

TEST(ResolveFa3, KwargsWithHostMaxNeedNoSync) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = Call(entry);
    call.kwargs.set("max_seqlen", Value::Int(17));
    Resolution r;
    auto args = ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &r);
    EXPECT_THAT(Ints(args.cu_seqlens), ElementsAre(0, 3, 8, 10));
    EXPECT_EQ(args.max_seqlen.as_int(), 17);  // both max_seqlen_q and max_seqlen_k
    EXPECT_THAT(r.events, IsEmpty());
  }
}

TEST(ResolveFa3, MaxDerivedFromDeviceCuCostsOneSync) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    Resolution r;
    auto args = ResolveOk<FlashVarlenArgs>(Call(entry), Profile::kFa3, &r);
    EXPECT_EQ(args.max_seqlen.as_int(), 5);
    EXPECT_THAT(Kinds(r), ElementsAre(kSync));
  }
}

TEST(ResolveFa3, HostInt64CuIsCastThenCopiedThenReduced) {
  Resolution r;
  auto args = ResolveOk<FlashVarlenArgs>(Call(Entry::kDirect, DType::kInt64, kCpu), Profile::kFa3, &r);
  EXPECT_EQ(args.cu_seqlens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(args.cu_seqlens.as_tensor().device(), kCuda);
  EXPECT_THAT(Ints(args.cu_seqlens), ElementsAre(0, 3, 8, 10));
  EXPECT_EQ(args.max_seqlen.as_int(), 5);
  EXPECT_THAT(Kinds(r), ElementsAre(kCast, kH2D, kSync));
}

TEST(ResolveFa3, MaxAsTensor) {
  AttentionCall call = Call();
  call.kwargs.set("max_seqlen", Value::FromTensor(IntTensor({5}, DType::kInt64, kCuda)));
  Resolution device;
  EXPECT_EQ(ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &device).max_seqlen.as_int(), 5);
  EXPECT_THAT(Kinds(device), ElementsAre(kSync));
  call.kwargs.set("max_seqlen", Value::FromTensor(IntTensor({5}, DType::kInt64, kCpu)));
  Resolution host;
  EXPECT_EQ(ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &host).max_seqlen.as_int(), 5);
  EXPECT_THAT(host.events, IsEmpty());
}

TEST(ResolveFa3, NoneCuBecomesUniformOnQsDevice) {
  AttentionCall call = Call();
  call.cu_seqlens = Value::None();
  call.bsz = 2;
  call.seq_len = 5;
  Resolution r;
  auto args = ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &r);
  EXPECT_THAT(Ints(args.cu_seqlens), ElementsAre(0, 5, 10));
  EXPECT_EQ(args.cu_seqlens.as_tensor().device(), kCuda);
  EXPECT_EQ(args.max_seqlen.as_int(), 5);
}

TEST(ResolveFa3, GraphListPassesThroughOnEitherEntry) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = Call(entry);
    call.graph_mode = true;
    const Tensor cu = IntTensor({0, 3, 8, 10});
    call.cu_seqlens = Value::List({Value::FromTensor(cu), Value::Int(5)});
    Resolution r;
    auto args = ResolveOk<FlashVarlenArgs>(call, Profile::kFa3, &r);
    EXPECT_TRUE(args.cu_seqlens.as_tensor().SharesStorageWith(cu));
    EXPECT_EQ(args.max_seqlen.as_int(), 5);
    EXPECT_THAT(r.events, IsEmpty());
  }
}

TEST(ResolveFa3, GraphModeErrors) {
  AttentionCall call = Call();
  call.graph_mode = true;
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
                "cuda-graph mode cu_seqlens should be a list");
  call.cu_seqlens = Value::List({Value::FromTensor(IntTensor({0, 10}))});
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kFaithful).status, PyErrorKind::kIndexError,
                "list index out of range");
}

// triton_attn -------------------------------------------------------------------------

TEST(ResolveTriton, FromMetadataOnEitherEntryWithoutDeviceEvents) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = Call(entry);
    call.forward_metadata = PlainMetadata();
    Resolution r;
    auto args = ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &r);
    EXPECT_THAT(Ints(args.cu_seqlens), ElementsAre(0, 3, 8, 10));
    EXPECT_THAT(Ints(args.seq_lens), ElementsAre(3, 5, 2));
    EXPECT_EQ(args.max_seqlen.as_int(), 5);
    EXPECT_FALSE(args.output_from_workspace);
    EXPECT_THAT(r.events, IsEmpty());
  }
}

TEST(ResolveTriton, MetadataWinsOverGraphModeWithoutOutputWs) {
  AttentionCall call = Call();
  call.graph_mode = true;
  call.forward_metadata = PlainMetadata();
  Resolution r;
  auto args = ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &r);
  EXPECT_FALSE(args.output_from_workspace);
  EXPECT_THAT(r.events, IsEmpty());
}

TEST(ResolveTriton, KwargsCuIsNeitherCastNorMoved) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    AttentionCall call = Call(entry, DType::kInt64, kCpu);
    call.version = SglangVersion::k0026249;
    Resolution r;
    auto args = ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &r);
    EXPECT_TRUE(args.cu_seqlens.as_tensor().SharesStorageWith(call.cu_seqlens.as_tensor()));
    EXPECT_EQ(args.cu_seqlens.as_tensor().dtype(), DType::kInt64);
    EXPECT_EQ(args.cu_seqlens.as_tensor().device(), kCpu);
    EXPECT_THAT(Ints(args.seq_lens), ElementsAre(3, 5, 2));
    EXPECT_EQ(args.max_seqlen.as_int(), 5);
    EXPECT_THAT(r.events, IsEmpty());  // the max reduces a host cu
    // The derived lengths stay where cu_seqlens is, in its dtype.
    EXPECT_EQ(args.seq_lens.as_tensor().dtype(), DType::kInt64);
    EXPECT_EQ(args.seq_lens.as_tensor().device(), kCpu);
  }
}

TEST(ResolveTriton, DerivedSeqLensMoveToQsDeviceSince0523) {
  AttentionCall call = Call(Entry::kDirect, DType::kInt64, kCpu);
  call.version = SglangVersion::k0_5_23;
  Resolution r;
  auto args = ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &r);
  // cu_seqlens itself is still neither cast nor moved.
  EXPECT_TRUE(args.cu_seqlens.as_tensor().SharesStorageWith(call.cu_seqlens.as_tensor()));
  EXPECT_EQ(args.seq_lens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(args.seq_lens.as_tensor().device(), kCuda);
  EXPECT_THAT(Ints(args.seq_lens), ElementsAre(3, 5, 2));
  EXPECT_EQ(r.counts(), (DeviceEventCounts{.host_to_device_copies = 1, .casts = 1}));
}

TEST(ResolveTriton, MaxDerivedFromDeviceCuCostsOneSync) {
  Resolution r;
  auto args = ResolveOk<TritonArgs>(Call(), Profile::kTritonAttn, &r);
  EXPECT_EQ(args.max_seqlen.as_int(), 5);
  EXPECT_THAT(Kinds(r), ElementsAre(kSync));
}

TEST(ResolveTriton, HostMaxNeedsNoSyncAndDeviceMaxOne) {
  AttentionCall call = Call();
  call.kwargs.set("max_seqlen", Value::Int(5));
  Resolution host;
  ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &host);
  EXPECT_THAT(host.events, IsEmpty());
  call.kwargs.set("max_seqlen", Value::FromTensor(IntTensor({5})));
  Resolution device;
  ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &device);
  EXPECT_THAT(Kinds(device), ElementsAre(kSync));
}

TEST(ResolveTriton, SequenceLengthsAreCastToInt32OnQsDevice) {
  AttentionCall call = Call();
  call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({3, 5, 2}, DType::kInt64, kCpu)));
  call.kwargs.set("max_seqlen", Value::Int(5));
  Resolution r;
  auto args = ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &r);
  EXPECT_EQ(args.seq_lens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(args.seq_lens.as_tensor().device(), kCuda);
  EXPECT_THAT(Ints(args.seq_lens), ElementsAre(3, 5, 2));
  EXPECT_THAT(Kinds(r), ElementsAre(kCast, kH2D));
}

TEST(ResolveTriton, NonTensorSequenceLengthsHaveNoTo) {
  AttentionCall call = Call();
  call.kwargs.set("sequence_lengths", Value::List({Value::Int(3), Value::Int(5)}));
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kAttributeError, "'list' object has no attribute 'to'");
}

TEST(ResolveTriton, GraphListWritesIntoOutputWs) {
  AttentionCall call = Call();
  call.graph_mode = true;
  const Tensor output_ws = Tensor::Zeros(DType::kBFloat16, kCuda, {10, 2, 4});
  call.kwargs.set("output_ws", Value::FromTensor(output_ws));
  call.cu_seqlens = Value::List({Value::FromTensor(IntTensor({0, 3, 8, 10})),
                                 Value::FromTensor(IntTensor({3, 5, 2})), Value::Int(5)});
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    call.entry = entry;
    Resolution r;
    auto args = ResolveOk<TritonArgs>(call, Profile::kTritonAttn, &r);
    EXPECT_TRUE(args.output_from_workspace);
    EXPECT_TRUE(args.output_ws.as_tensor().SharesStorageWith(output_ws));
    EXPECT_THAT(Ints(args.seq_lens), ElementsAre(3, 5, 2));
    EXPECT_EQ(args.max_seqlen.as_int(), 5);
    EXPECT_THAT(r.events, IsEmpty());
  }
}

TEST(ResolveTriton, GraphModeErrorsInOrder) {
  AttentionCall call = Call();
  call.graph_mode = true;
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "output_ws should be prepared for cuda-graph mode");
  call.kwargs.set("output_ws", Value::None());  // present: the key check passes
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "cuda-graph mode cu_seqlens should be a list");
}

// The layer passes output_ws=None, which graph mode hands the kernel as o.
TEST(ResolveTriton, GraphModeThroughTheLayerWritesIntoNone) {
  AttentionCall call = Call(Entry::kLayer);
  call.graph_mode = true;
  call.cu_seqlens = Value::List({Value::FromTensor(IntTensor({0, 3, 8, 10})),
                                 Value::FromTensor(IntTensor({3, 5, 2})), Value::Int(5)});
  Resolution r = Resolve(call, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  const TritonArgs& args = std::get<TritonArgs>(r.args->args);
  EXPECT_TRUE(args.output_from_workspace);
  EXPECT_TRUE(args.output_ws.is_none());
}

// sdpa ----------------------------------------------------------------------------------

TEST(ResolveSdpa, FlattenBatchReadsDeviceCuOnTheHost) {
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    Resolution r;
    auto args = ResolveOk<SdpaArgs>(Call(entry), Profile::kSdpa, &r);
    EXPECT_EQ(args.mask, SdpaArgs::Mask::kBlockDiagonal);
    EXPECT_THAT(args.cu_seqlens, ElementsAre(0, 3, 8, 10));
    EXPECT_EQ(args.bsz, 1);
    EXPECT_EQ(args.tokens_per_item, 10);
    EXPECT_DOUBLE_EQ(args.scale, 0.5);
    // cu.cpu().tolist(), then the mask goes to q's device.
    EXPECT_THAT(Kinds(r), ElementsAre(kD2H, kSync, kH2D));
  }
}

TEST(ResolveSdpa, HostCuNeedsNoSync) {
  Resolution r;
  ResolveOk<SdpaArgs>(Call(Entry::kDirect, DType::kInt64, kCpu), Profile::kSdpa, &r);
  EXPECT_THAT(Kinds(r), ElementsAre(kH2D));
}

TEST(ResolveSdpa, PaddingMaskWithoutFlattenBatch) {
  AttentionCall call = Call();
  call.sdpa.flatten_batch = false;
  call.bsz = 2;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 3, 8}));
  Resolution r;
  auto args = ResolveOk<SdpaArgs>(call, Profile::kSdpa, &r);
  EXPECT_EQ(args.mask, SdpaArgs::Mask::kPadding);
  EXPECT_EQ(args.bsz, 2);
  EXPECT_EQ(args.tokens_per_item, 5);
  EXPECT_THAT(args.cu_seqlens, ElementsAre(0, 3, 8));
}

TEST(ResolveSdpa, IgnoresTheCallScaleMetadataAndGraphMode) {
  AttentionCall call = Call();
  call.kwargs.set("softmax_scale", Value::Float(0.01));
  call.forward_metadata = PlainMetadata();
  call.graph_mode = true;
  call.cu_seqlens = Value::None();
  Resolution r;
  auto args = ResolveOk<SdpaArgs>(call, Profile::kSdpa, &r);
  EXPECT_DOUBLE_EQ(args.scale, 0.5);
  EXPECT_EQ(args.mask, SdpaArgs::Mask::kNone);
  EXPECT_THAT(r.events, IsEmpty());
}

TEST(ResolveSdpa, Errors) {
  AttentionCall call = Call();
  call.bsz = 2;
  ExpectPyError(Resolve(call, Profile::kSdpa, Mode::kFaithful).status, PyErrorKind::kAssertionError,
                "flatten_batch is True, bsz must be 1");
  AttentionCall single = Call(Entry::kLayer);
  single.cu_seqlens = Value::None();
  single.sdpa.softmax_in_single_precision = true;
  ExpectPyError(Resolve(single, Profile::kSdpa, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
                "Empty attention mask");
}

}  // namespace
}  // namespace varlen
