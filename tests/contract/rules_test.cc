// Tests the testable rules of the SGLang vision-attention calling contract, one test per rule.

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/call.h"
#include "varlen/contract/platform.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/seqlens.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/contract/sglang/platform.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {
namespace {

using ::varlen::test::ExpectPyError;
using ::varlen::test::Ints;
using ::varlen::test::IntTensor;
using ::varlen::test::Offsets;

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr Device kCpu = Device::kCpu;
constexpr Device kCuda = Device::kCuda;

// A call whose q, k and v have `shape` and no storage.
AttentionCall CallWithShape(const Shape& shape, Device device = kCuda) {
  AttentionCall call;
  call.q = Tensor::ShapeOnly(DType::kBFloat16, device, shape);
  call.k = Tensor::ShapeOnly(DType::kBFloat16, device, shape);
  call.v = Tensor::ShapeOnly(DType::kBFloat16, device, shape);
  call.seq_len = shape[0];
  call.sdpa.flatten_batch = true;  // as Qwen-style encoders construct sdpa
  return call;
}

// A call over sequences of `lengths`, with int32 token cu_seqlens on `device`.
AttentionCall TokenCall(const std::vector<int64_t>& lengths, int64_t heads = 2, int64_t dim = 4,
                        Device device = kCuda) {
  const std::vector<int64_t> offsets = Offsets(lengths);
  AttentionCall call = CallWithShape({offsets.back(), heads, dim}, device);
  call.cu_seqlens = Value::FromTensor(IntTensor(offsets, DType::kInt32, device));
  return call;
}

VisionAttentionMetadata FlashinferMetadata(const std::vector<int64_t>& lengths,
                                           int64_t elem_per_token) {
  return *PrepareFlashinferCudnnMetadata(Value::FromTensor(IntTensor(Offsets(lengths))), kCuda,
                                         elem_per_token, Mode::kFaithful);
}

// A flashinfer_cudnn call that passes builder-made packed indptrs and padded
// lengths as keyword arguments (the earlier Qwen3-VL path), with `max_seqlen`.
AttentionCall FlashinferKwargsCall(const std::vector<int64_t>& lengths, Value max_seqlen,
                                   int64_t heads = 2, int64_t dim = 4) {
  AttentionCall call = TokenCall(lengths, heads, dim);
  VisionAttentionMetadata metadata = FlashinferMetadata(lengths, heads * dim);
  call.cu_seqlens = metadata.packed_indptrs;
  call.kwargs.set("sequence_lengths", metadata.sequence_lengths);
  call.kwargs.set("max_seqlen", std::move(max_seqlen));
  return call;
}

template <typename T>
const T& ArgsOf(const Resolution& r) {
  return std::get<T>(r.args->args);
}

constexpr absl::string_view kIntOfNone =
    "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'";
constexpr absl::string_view kEmptyMax =
    "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
    "reduction dim with the 'dim' argument.";
constexpr absl::string_view kOutOfBounds = "offset + len out of bounds; packed indptr is wrong";

TEST(ContractRule01, CuSeqlensForShapeIsUniformInt32OnDevice) {
  for (Device device : {kCpu, kCuda}) {
    absl::StatusOr<Tensor> cu = GetCuSeqlensForShape(3, 5, device);
    ASSERT_TRUE(cu.ok()) << cu.status();
    EXPECT_EQ(cu->dtype(), DType::kInt32);
    EXPECT_EQ(cu->device(), device);
    EXPECT_THAT(Ints(*cu), ElementsAre(0, 5, 10, 15));
  }
  absl::StatusOr<Tensor> single = GetCuSeqlensForShape(1, 7, kCuda);
  ASSERT_TRUE(single.ok());
  EXPECT_THAT(Ints(*single), ElementsAre(0, 7));

  // §10: no tokens means arange(0, 0, step=0).
  ExpectPyError(GetCuSeqlensForShape(1, 0, kCuda).status(), PyErrorKind::kRuntimeError,
                "step must be nonzero");
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall call = CallWithShape({0, 2, 4});
    call.seq_len = 0;
    Resolution r = Resolve(call, profile, Mode::kFaithful);
    ExpectPyError(r.status, PyErrorKind::kRuntimeError, "step must be nonzero");
  }
}

TEST(ContractRule02, ResolveSeqlensFillsDefaultsAndAssertsTensor) {
  absl::StatusOr<Tensor> uniform = ResolveSeqlens(Value::None(), 2, 4, kCuda);
  ASSERT_TRUE(uniform.ok());
  EXPECT_EQ(uniform->dtype(), DType::kInt32);
  EXPECT_EQ(uniform->device(), kCuda);
  EXPECT_THAT(Ints(*uniform), ElementsAre(0, 4, 8));

  auto cache = std::make_shared<SingletonCache>();
  absl::StatusOr<Tensor> filled = ResolveSeqlens(Value::Cache(cache), 2, 4, kCuda);
  ASSERT_TRUE(filled.ok());
  ASSERT_TRUE(cache->data.has_value());
  EXPECT_THAT(Ints(*cache->data), ElementsAre(0, 4, 8));
  EXPECT_TRUE(filled->SharesStorageWith(*cache->data));

  Tensor given = IntTensor({0, 3, 8});
  auto full = std::make_shared<SingletonCache>();
  full->set_data(given);
  absl::StatusOr<Tensor> from_cache = ResolveSeqlens(Value::Cache(full), 2, 4, kCuda);
  ASSERT_TRUE(from_cache.ok());
  EXPECT_TRUE(from_cache->SharesStorageWith(given));

  absl::StatusOr<Tensor> unchanged = ResolveSeqlens(Value::FromTensor(given), 2, 4, kCuda);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_TRUE(unchanged->SharesStorageWith(given));

  const Value list = Value::List({Value::Int(0), Value::Int(3), Value::Int(8)});
  ExpectPyError(ResolveSeqlens(list, 1, 8, kCuda).status(), PyErrorKind::kAssertionError,
                "cu_seqlens must be a torch.Tensor");
  // A list outside graph mode reaches resolve_seqlens.
  AttentionCall call = TokenCall({3, 5});
  call.cu_seqlens = list;
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    ExpectPyError(Resolve(call, profile, Mode::kFaithful).status, PyErrorKind::kAssertionError,
                  "cu_seqlens must be a torch.Tensor");
  }
}

TEST(ContractRule03, ResolveMaxSeqlenCachesOnlyOnSingletonCache) {
  Tensor raw = IntTensor({0, 2, 7});
  {
    ScopedDeviceLedger ledger;
    absl::StatusOr<int64_t> max = ResolveMaxSeqlen(Value::FromTensor(raw), raw);
    ASSERT_TRUE(max.ok()) << max.status();  // no AttributeError on a raw tensor
    EXPECT_EQ(*max, 5);
    EXPECT_EQ(ledger.counts().host_syncs, 1);
  }
  EXPECT_THAT(Ints(raw), ElementsAre(0, 2, 7));

  auto cache = std::make_shared<SingletonCache>();
  cache->set_data(raw);
  absl::StatusOr<int64_t> first = ResolveMaxSeqlen(Value::Cache(cache), *cache->data);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 5);
  EXPECT_EQ(cache->max_seqlen, 5);
  {
    // The cached value wins, without a sync, whatever cu is passed.
    ScopedDeviceLedger ledger;
    absl::StatusOr<int64_t> again = ResolveMaxSeqlen(Value::Cache(cache), IntTensor({0, 100}));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, 5);
    EXPECT_EQ(ledger.counts().host_syncs, 0);
  }
  cache->set_data(IntTensor({0, 9}));
  EXPECT_EQ(cache->max_seqlen, std::nullopt);
  absl::StatusOr<int64_t> refreshed = ResolveMaxSeqlen(Value::Cache(cache), *cache->data);
  ASSERT_TRUE(refreshed.ok());
  EXPECT_EQ(*refreshed, 9);
}

TEST(ContractRule04, ResolvePrecomputedMaxSeqlenCoercesWithoutValidating) {
  const Tensor cu = IntTensor({0, 2, 7});
  struct Case {
    Value max_seqlen;
    int64_t expected;
  };
  const std::vector<Case> accepted = {
      {Value::None(), 5},
      {Value::FromTensor(IntTensor({17})), 17},
      {Value::FromTensor(Tensor::FromInts({17}, DType::kInt64, kCpu, Shape{})), 17},
      {Value::Int(17), 17},
      {Value::Float(5.9), 5},
      {Value::Str("17"), 17},
      {Value::Str(" 17 "), 17},
      {Value::Bool(true), 1},
      {Value::Int(-3), -3},
      {Value::Int(0), 0},
  };
  for (const Case& c : accepted) {
    absl::StatusOr<int64_t> max = ResolvePrecomputedMaxSeqlen(cu, c.max_seqlen);
    ASSERT_TRUE(max.ok()) << c.max_seqlen.Repr() << ": " << max.status();
    EXPECT_EQ(*max, c.expected) << c.max_seqlen.Repr();
  }
  ExpectPyError(ResolvePrecomputedMaxSeqlen(cu, Value::Str("17.0")).status(),
                PyErrorKind::kValueError, "invalid literal for int() with base 10: '17.0'");
  ExpectPyError(ResolvePrecomputedMaxSeqlen(cu, Value::FromTensor(IntTensor({17, 18}))).status(),
                PyErrorKind::kRuntimeError,
                "a Tensor with 2 elements cannot be converted to Scalar");
  ExpectPyError(ResolvePrecomputedMaxSeqlen(cu, Value::FromTensor(IntTensor({}))).status(),
                PyErrorKind::kRuntimeError,
                "a Tensor with 0 elements cannot be converted to Scalar");

  // §10 host syncs for fa3 and triton_attn: none with metadata or a host max;
  // one when the max comes from a device cu or a device tensor.
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall with_metadata = TokenCall({2, 5});
    with_metadata.forward_metadata = *PrepareVisionAttentionMetadata(
        Value::FromTensor(IntTensor({0, 2, 7})), kCuda, {}, Mode::kFaithful);
    struct SyncCase {
      AttentionCall call;
      int host_syncs;
    };
    std::vector<SyncCase> cases = {{with_metadata, 0}};
    for (const Value& max : {Value::Int(5), Value::FromTensor(IntTensor({5}, DType::kInt32, kCpu)),
                             Value::None(), Value::FromTensor(IntTensor({5}))}) {
      AttentionCall call = TokenCall({2, 5});
      call.kwargs.set("max_seqlen", max);
      const bool on_device =
          max.is_none() || (max.is_tensor() && max.as_tensor().device() == kCuda);
      cases.push_back({call, on_device ? 1 : 0});
    }
    for (const SyncCase& c : cases) {
      Resolution r = Resolve(c.call, profile, Mode::kFaithful);
      ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
      EXPECT_EQ(r.counts().host_syncs, c.host_syncs)
          << ProfileName(profile) << " max_seqlen=" << c.call.kwargs.get("max_seqlen").Repr();
    }
  }
}

TEST(ContractRule05, PlainBuilderKeepsRealLengthsAndUnvalidatedMax) {
  const Value cu = Value::FromTensor(IntTensor({0, 3, 8, 10}, DType::kInt64, kCpu));
  {
    ScopedDeviceLedger ledger;
    absl::StatusOr<VisionAttentionMetadata> m =
        PrepareVisionAttentionMetadata(cu, kCuda, {}, Mode::kFaithful);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->cu_seqlens.as_tensor().dtype(), DType::kInt32);
    EXPECT_EQ(m->cu_seqlens.as_tensor().device(), kCuda);
    EXPECT_THAT(Ints(m->cu_seqlens), ElementsAre(0, 3, 8, 10));
    EXPECT_THAT(Ints(m->seq_lens), ElementsAre(3, 5, 2));
    ASSERT_EQ(m->max_seqlen.kind(), Value::Kind::kInt);
    EXPECT_EQ(m->max_seqlen.as_int(), 5);
    EXPECT_TRUE(m->packed_indptrs.is_none());
    EXPECT_EQ(ledger.counts().host_syncs, 1);  // the max's .item()
  }
  {
    ScopedDeviceLedger ledger;
    PlainMetadataOptions options;
    options.max_seqlen = Value::Int(99);
    absl::StatusOr<VisionAttentionMetadata> m =
        PrepareVisionAttentionMetadata(cu, kCuda, options, Mode::kFaithful);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->max_seqlen.as_int(), 99);  // kept, never checked against 5
    EXPECT_EQ(ledger.counts().host_syncs, 0);
  }
  ExpectPyError(
      PrepareVisionAttentionMetadata(Value::FromTensor(IntTensor({0})), kCuda, {}, Mode::kFaithful)
          .status(),
      PyErrorKind::kRuntimeError, std::string(kEmptyMax));
  ExpectPyError(PrepareVisionAttentionMetadata(Value::None(), kCuda, {}, Mode::kFaithful).status(),
                PyErrorKind::kAttributeError, "'NoneType' object has no attribute 'to'");
  ExpectPyError(PrepareVisionAttentionMetadata(Value::List({Value::Int(0), Value::Int(3)}), kCuda,
                                               {}, Mode::kFaithful)
                    .status(),
                PyErrorKind::kAttributeError, "'list' object has no attribute 'to'");
}

TEST(ContractRule06, FlashinferBuilderMatchesSglangTestCase) {
  ScopedDeviceLedger ledger;
  absl::StatusOr<VisionAttentionMetadata> m = PrepareFlashinferCudnnMetadata(
      Value::FromTensor(IntTensor({0, 480, 1200})), kCuda, 1536, Mode::kFaithful);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<int64_t> third = {0,       737280,  1843200, 1843200, 1843200,
                                      1843200, 1843200, 1843200, 1843200};
  std::vector<int64_t> packed;
  for (int i = 0; i < 3; ++i) packed.insert(packed.end(), third.begin(), third.end());
  EXPECT_THAT(Ints(m->packed_indptrs), ElementsAreArray(packed));
  EXPECT_THAT(Ints(m->sequence_lengths), ElementsAre(480, 720, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(m->sequence_lengths.as_tensor().shape(), (Shape{8, 1, 1, 1}));
  EXPECT_EQ(m->flashinfer_max_seqlen.as_int(), 4096);
  EXPECT_THAT(Ints(m->cu_seqlens), ElementsAre(0, 480, 1200));
  EXPECT_THAT(Ints(m->seq_lens), ElementsAre(480, 720));
  EXPECT_EQ(m->max_seqlen.as_int(), 720);
  EXPECT_EQ(ledger.counts().host_syncs, 2);
}

TEST(ContractRule07, BatchIsPaddedToABucket) {
  const std::vector<std::pair<int64_t, int64_t>> table = {{0, 8},   {1, 8},    {8, 8},   {9, 16},
                                                          {16, 16}, {17, 32},  {33, 64}, {64, 64},
                                                          {65, 72}, {100, 104}};
  for (const auto& [batch, padded] : table) EXPECT_EQ(PaddedBatchSize(batch), padded) << batch;

  // Padded indptrs equal the total; padded lengths are 0.
  const std::vector<int64_t> lengths = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  VisionAttentionMetadata m = FlashinferMetadata(lengths, 2);
  const std::vector<int64_t> packed = Ints(m.packed_indptrs);
  ASSERT_EQ(packed.size(), 3u * 17u);
  for (int i = 10; i < 17; ++i) EXPECT_EQ(packed[i], 45 * 2) << i;
  const std::vector<int64_t> padded = Ints(m.sequence_lengths);
  ASSERT_EQ(padded.size(), 16u);
  for (int i = 9; i < 16; ++i) EXPECT_EQ(padded[i], 0) << i;

  // B = 0 pads to 8 and then raises at the max.
  ExpectPyError(
      PrepareFlashinferCudnnMetadata(Value::FromTensor(IntTensor({0})), kCuda, 8, Mode::kFaithful)
          .status(),
      PyErrorKind::kRuntimeError, std::string(kEmptyMax));
}

TEST(ContractRule08, MaxSeqlenIsBucketed) {
  const std::vector<std::pair<int64_t, int64_t>> table = {
      {1, 4096}, {4096, 4096}, {4097, 8192}, {65536, 65536}, {131072, 131072}, {131073, 262144}};
  for (const auto& [real, bucket] : table) EXPECT_EQ(BucketedMaxSeqlen(real), bucket) << real;
  EXPECT_EQ(FlashinferMetadata({4097, 3}, 2).flashinfer_max_seqlen.as_int(), 8192);
}

TEST(ContractRule09, PackedIndptrsAreThreeIdenticalInt32ThirdsInElements) {
  VisionAttentionMetadata m = FlashinferMetadata({3, 5, 2}, 6);
  const Tensor& packed = m.packed_indptrs.as_tensor();
  EXPECT_EQ(packed.dtype(), DType::kInt32);
  EXPECT_EQ(packed.device(), kCuda);
  const std::vector<int64_t> third = {0, 18, 48, 60, 60, 60, 60, 60, 60};
  std::vector<int64_t> expected;
  for (int i = 0; i < 3; ++i) expected.insert(expected.end(), third.begin(), third.end());
  EXPECT_THAT(Ints(packed), ElementsAreArray(expected));

  // §10: int32 arithmetic wraps modulo 2^32.
  VisionAttentionMetadata wrapped = FlashinferMetadata({2000000}, 1152);
  const std::vector<int64_t> values = Ints(wrapped.packed_indptrs);
  EXPECT_THAT(std::vector<int64_t>(values.begin(), values.begin() + 2),
              ElementsAre(0, -1990967296));
}

TEST(ContractRule10, FlashinferMetadataOverridesKwargs) {
  AttentionCall call = TokenCall({480, 720}, 16, 96);
  call.forward_metadata = FlashinferMetadata({480, 720}, 1536);
  call.cu_seqlens = Value::None();
  call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({1, 2, 3})));
  call.kwargs.set("max_seqlen", Value::Str("auto"));
  Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  const auto& args = ArgsOf<FlashinferCudnnArgs>(r);
  EXPECT_THAT(Ints(args.actual_seq_lens), ElementsAre(480, 720, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(Ints(args.batch_offsets_qk), ElementsAre(0, 737280, 1843200, 1843200, 1843200,
                                                       1843200, 1843200, 1843200, 1843200));
  EXPECT_EQ(args.max_token_per_sequence, 4096);
  EXPECT_EQ(r.counts().host_syncs, 1);  // §10: the bounds check syncs even with metadata
}

TEST(ContractRule11, DirectFlashinferChecksKeyPresenceInOrder) {
  AttentionCall call = TokenCall({480, 720}, 16, 96);
  ExpectPyError(
      Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
      "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend");
  call.kwargs.set("max_seqlen", Value::Int(4096));  // max alone: lengths still checked first
  ExpectPyError(
      Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
      "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend");
  call.kwargs.erase("max_seqlen");
  call.kwargs.set("sequence_lengths", FlashinferMetadata({480, 720}, 1536).sequence_lengths);
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "max_seqlen should be prepared for vision flashinfer_cudnn attention backend");

  // Plain metadata (no packed_indptrs) falls through to the same checks.
  call.kwargs = Kwargs();
  call.forward_metadata = *PrepareVisionAttentionMetadata(
      Value::FromTensor(IntTensor({0, 480, 1200})), kCuda, {}, Mode::kFaithful);
  ExpectPyError(
      Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
      "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend");

  // §10: keys present as None pass the presence checks and fail later.
  call.kwargs = Kwargs{{"sequence_lengths", Value::None()}, {"max_seqlen", Value::None()}};
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kTypeError, std::string(kIntOfNone));
}

TEST(ContractRule12, LayerWithoutMaxSeqlenFailsInIntBeforeTypeChecks) {
  AttentionCall call = TokenCall({480, 720}, 16, 96);
  call.entry = Entry::kLayer;
  call.cu_seqlens = Value::None();  // packed None would fail the type check
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kTypeError, std::string(kIntOfNone));
  call.cu_seqlens = Value::List({Value::Int(0)});
  call.kwargs.set("sequence_lengths", Value::Str("not a tensor"));
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kTypeError, std::string(kIntOfNone));

  // Metadata whose flashinfer_max_seqlen is None fails the same way.
  AttentionCall with_metadata = TokenCall({480, 720}, 16, 96);
  with_metadata.forward_metadata = FlashinferMetadata({480, 720}, 1536);
  with_metadata.forward_metadata->flashinfer_max_seqlen = Value::None();
  ExpectPyError(Resolve(with_metadata, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kTypeError, std::string(kIntOfNone));
}

TEST(ContractRule13, FlashinferMaxSeqlenCoercion) {
  struct Case {
    Value max_seqlen;
    int64_t expected;
    int host_syncs;  // the max's own, plus the bounds check's one
  };
  const std::vector<Case> accepted = {
      {Value::FromTensor(IntTensor({4096}, DType::kInt64, kCuda)), 4096, 2},
      {Value::FromTensor(IntTensor({4096}, DType::kInt64, kCpu)), 4096, 1},
      {Value::Int(4096), 4096, 1},
      {Value::Str("4096"), 4096, 1},
      {Value::Str(" 4096 "), 4096, 1},
      {Value::Float(4096.9), 4096, 1},
      {Value::Bool(true), 1, 1},
      {Value::Int(-7), -7, 1},
  };
  for (const Case& c : accepted) {
    Resolution r = Resolve(FlashinferKwargsCall({480, 720}, c.max_seqlen),
                           Profile::kFlashinferCudnn, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << c.max_seqlen.Repr() << ": " << FormatPythonError(r.status);
    EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(r).max_token_per_sequence, c.expected);
    EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(r).max_sequence_kv, c.expected);
    EXPECT_EQ(r.counts().host_syncs, c.host_syncs) << c.max_seqlen.Repr();
  }
  for (const char* text : {"4096.0", "4k", "0x10", "", "auto"}) {
    Resolution r = Resolve(FlashinferKwargsCall({480, 720}, Value::Str(text)),
                           Profile::kFlashinferCudnn, Mode::kFaithful);
    ExpectPyError(r.status, PyErrorKind::kValueError,
                  absl::StrCat("invalid literal for int() with base 10: '", text, "'"));
  }
  // With both packed indptrs and sequence_lengths of the wrong type, the
  // packed check fires first.
  AttentionCall both = FlashinferKwargsCall({480, 720}, Value::Int(4096));
  both.cu_seqlens = Value::List({Value::Int(0)});
  both.kwargs.set("sequence_lengths", Value::List({Value::Int(480)}));
  ExpectPyError(Resolve(both, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "flashinfer_cudnn expects packed indptrs as a torch.Tensor");
}

TEST(ContractRule14, FlashinferRejectsNonTensorPackedAndLengths) {
  const std::vector<Value> not_tensors = {
      Value::None(), Value::Cache(std::make_shared<SingletonCache>()),
      Value::List({Value::Int(0), Value::Int(480), Value::Int(1200)})};
  for (const Value& packed : not_tensors) {
    AttentionCall call = FlashinferKwargsCall({480, 720}, Value::Int(4096));
    call.cu_seqlens = packed;
    ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                  PyErrorKind::kRuntimeError,
                  "flashinfer_cudnn expects packed indptrs as a torch.Tensor");
  }
  for (const Value& lengths :
       {Value::None(), Value::List({Value::Int(480), Value::Int(720)}), Value::Int(2)}) {
    AttentionCall call = FlashinferKwargsCall({480, 720}, Value::Int(4096));
    call.kwargs.set("sequence_lengths", lengths);
    ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                  PyErrorKind::kRuntimeError, "sequence_lengths must be a torch.Tensor");
  }
  AttentionCall from_metadata = TokenCall({480, 720}, 2, 4);
  from_metadata.forward_metadata = FlashinferMetadata({480, 720}, 8);
  from_metadata.forward_metadata->sequence_lengths = Value::None();
  ExpectPyError(Resolve(from_metadata, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "sequence_lengths must be a torch.Tensor");
}

TEST(ContractRule15, PackedNumelMustBeThreeTimesBatchPlusOne) {
  AttentionCall call = TokenCall({480, 720}, 2, 4);  // cu_seqlens = token offsets [0,480,1200]
  call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({480, 720})));
  call.kwargs.set("max_seqlen", Value::Int(4096));
  ExpectPyError(Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError,
                "packed indptr numel mismatch: got 3, expected 9 (= 3*(B+1))");
}

TEST(ContractRule16, BoundsCheckCoversOnlyTheQkThirdUpperBound) {
  // q is 1000 x 16 x 72 = 1,152,000 elements.
  auto make = [](const std::vector<int64_t>& packed) {
    AttentionCall call = CallWithShape({1000, 16, 72});
    call.cu_seqlens = Value::FromTensor(IntTensor(packed));
    call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({480, 520})));
    call.kwargs.set("max_seqlen", Value::Int(4096));
    return call;
  };
  const int64_t e = 1536;  // 737,280 + 520 * 1152 = 1,336,320 > 1,152,000
  Resolution too_wide =
      Resolve(make({0, 480 * e, 1000 * e, 0, 480 * e, 1000 * e, 0, 480 * e, 1000 * e}),
              Profile::kFlashinferCudnn, Mode::kFaithful);
  ExpectPyError(too_wide.status, PyErrorKind::kRuntimeError, std::string(kOutOfBounds));

  const int64_t w = 1152;  // the last end equals the total exactly
  Resolution exact =
      Resolve(make({0, 480 * w, 1000 * w, 0, 480 * w, 1000 * w, 0, 480 * w, 1000 * w}),
              Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(exact.status.ok()) << FormatPythonError(exact.status);
  EXPECT_EQ(exact.counts().host_syncs, 1);  // the .any() inside the if

  // §10: garbage in the v and o thirds passes.
  Resolution garbage = Resolve(make({0, 480 * w, 1000 * w, 7, -5, 999999999, -1, -1, -1}),
                               Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(garbage.status.ok()) << FormatPythonError(garbage.status);
  EXPECT_THAT(Ints(ArgsOf<FlashinferCudnnArgs>(garbage).batch_offsets_v),
              ElementsAre(7, -5, 999999999));
  EXPECT_THAT(Ints(ArgsOf<FlashinferCudnnArgs>(garbage).batch_offsets_o), ElementsAre(-1, -1, -1));
}

TEST(ContractRule17, CudnnArgumentsHaveKernelShapesAndBucketedMax) {
  AttentionCall call = TokenCall({480, 720}, 16, 96);
  call.forward_metadata = FlashinferMetadata({480, 720}, 1536);
  Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  const auto& args = ArgsOf<FlashinferCudnnArgs>(r);
  EXPECT_EQ(args.actual_seq_lens.shape(), (Shape{8, 1, 1, 1}));
  EXPECT_EQ(args.actual_seq_lens.dtype(), DType::kInt32);
  EXPECT_EQ(args.actual_seq_lens.device(), kCuda);
  // One indptr serves q and k (batch_offsets_q and batch_offsets_k).
  for (const Tensor* indptr :
       {&args.batch_offsets_qk, &args.batch_offsets_v, &args.batch_offsets_o}) {
    EXPECT_EQ(indptr->shape(), (Shape{9, 1, 1, 1}));
    EXPECT_EQ(indptr->dtype(), DType::kInt32);
    EXPECT_EQ(indptr->device(), kCuda);
    EXPECT_THAT(Ints(*indptr), ElementsAre(0, 737280, 1843200, 1843200, 1843200, 1843200, 1843200,
                                           1843200, 1843200));
  }
  EXPECT_EQ(args.max_token_per_sequence, 4096);
  EXPECT_EQ(args.max_sequence_kv, 4096);
  EXPECT_DOUBLE_EQ(args.scale, 1.0 / std::sqrt(96.0));

  // §10: on the kwargs path the caller's max passes through unbucketed.
  Resolution kwargs = Resolve(FlashinferKwargsCall({480, 720}, Value::Int(720), 16, 96),
                              Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(kwargs.status.ok()) << FormatPythonError(kwargs.status);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(kwargs).max_token_per_sequence, 720);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(kwargs).max_sequence_kv, 720);
}

TEST(ContractRule18, FourDimensionalQueryKeepsItsShapeAndTheLayerIsThreeDimensional) {
  AttentionCall call = CallWithShape({2, 600, 16, 96});
  call.bsz = 2;
  call.seq_len = 600;
  call.forward_metadata = FlashinferMetadata({480, 720}, 1536);
  Resolution r = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_TRUE(ArgsOf<FlashinferCudnnArgs>(r).output_4d);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(r).input_shape, (Shape{2, 600, 16, 96}));

  AttentionCall flat = TokenCall({480, 720}, 16, 96);
  flat.forward_metadata = FlashinferMetadata({480, 720}, 1536);
  for (Entry entry : {Entry::kDirect, Entry::kLayer}) {
    flat.entry = entry;
    Resolution r3 = Resolve(flat, Profile::kFlashinferCudnn, Mode::kFaithful);
    ASSERT_TRUE(r3.status.ok()) << FormatPythonError(r3.status);
    EXPECT_FALSE(ArgsOf<FlashinferCudnnArgs>(r3).output_4d);
    EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(r3).input_shape, (Shape{1200, 16, 96}));
  }

  // VisionAttention makes q [bsz*s, heads, head_dim] before calling the
  // backend, so through the layer the backend's output is always 3-D.
  call.entry = Entry::kLayer;
  Resolution layer = Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  ASSERT_TRUE(layer.status.ok()) << FormatPythonError(layer.status);
  EXPECT_FALSE(ArgsOf<FlashinferCudnnArgs>(layer).output_4d);

  // Called directly, sdpa asserts a 3-D q (`assert q.dim() == 3, q.shape`);
  // through the layer it receives the flattened q.
  AttentionCall sdpa = CallWithShape({1, 10, 2, 4});
  sdpa.seq_len = 10;
  sdpa.cu_seqlens = Value::FromTensor(IntTensor({0, 3, 8, 10}));
  ExpectPyError(Resolve(sdpa, Profile::kSdpa, Mode::kFaithful).status, PyErrorKind::kAssertionError,
                "torch.Size([1, 10, 2, 4])");
  sdpa.entry = Entry::kLayer;
  Resolution sdpa_layer = Resolve(sdpa, Profile::kSdpa, Mode::kFaithful);
  ASSERT_TRUE(sdpa_layer.status.ok()) << FormatPythonError(sdpa_layer.status);
  EXPECT_EQ(ArgsOf<SdpaArgs>(sdpa_layer).tokens_per_item, 10);
}

TEST(ContractRule19, GraphModeListLayoutsAndErrors) {
  AttentionCall call = TokenCall({3, 5, 2});
  call.graph_mode = true;
  // triton_attn: output_ws is checked before the list.
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "output_ws should be prepared for cuda-graph mode");
  const Tensor output_ws = Tensor::Zeros(DType::kBFloat16, kCuda, {10, 2, 4});
  call.kwargs.set("output_ws", Value::FromTensor(output_ws));
  ExpectPyError(Resolve(call, Profile::kTritonAttn, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "cuda-graph mode cu_seqlens should be a list");
  // fa3 needs no output_ws.
  call.kwargs.erase("output_ws");
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kFaithful).status, PyErrorKind::kRuntimeError,
                "cuda-graph mode cu_seqlens should be a list");
  // ascend_attn's "output_ws should be prepared for npu-graph mode" belongs to
  // a backend the contract library does not resolve.

  // The list entries reach the kernel untouched (§10): an int64 CPU cu and a
  // tensor max.
  const Tensor cu = IntTensor({0, 3, 8, 10}, DType::kInt64, kCpu);
  const Tensor seq_lens = IntTensor({3, 5, 2}, DType::kInt64, kCpu);
  const Tensor max = IntTensor({5}, DType::kInt64, kCuda);
  AttentionCall triton = TokenCall({3, 5, 2});
  triton.graph_mode = true;
  triton.cu_seqlens =
      Value::List({Value::FromTensor(cu), Value::FromTensor(seq_lens), Value::FromTensor(max)});
  triton.kwargs.set("output_ws", Value::FromTensor(output_ws));
  Resolution t = Resolve(triton, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(t.status.ok()) << FormatPythonError(t.status);
  const auto& targs = ArgsOf<TritonArgs>(t);
  EXPECT_TRUE(targs.cu_seqlens.as_tensor().SharesStorageWith(cu));
  EXPECT_EQ(targs.cu_seqlens.as_tensor().dtype(), DType::kInt64);
  EXPECT_EQ(targs.cu_seqlens.as_tensor().device(), kCpu);
  EXPECT_TRUE(targs.seq_lens.as_tensor().SharesStorageWith(seq_lens));
  EXPECT_TRUE(targs.max_seqlen.as_tensor().SharesStorageWith(max));
  EXPECT_TRUE(targs.output_from_workspace);
  EXPECT_TRUE(targs.output_ws.as_tensor().SharesStorageWith(output_ws));
  EXPECT_THAT(t.events, IsEmpty());

  AttentionCall fa3 = TokenCall({3, 5, 2});
  fa3.graph_mode = true;
  fa3.cu_seqlens = Value::List({Value::FromTensor(cu), Value::FromTensor(max)});
  Resolution f = Resolve(fa3, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(f.status.ok()) << FormatPythonError(f.status);
  EXPECT_TRUE(ArgsOf<FlashVarlenArgs>(f).cu_seqlens.as_tensor().SharesStorageWith(cu));
  EXPECT_TRUE(ArgsOf<FlashVarlenArgs>(f).max_seqlen.as_tensor().SharesStorageWith(max));
  EXPECT_THAT(f.events, IsEmpty());

  // Through the layer triton_attn gets output_ws=None and hands it to the
  // kernel as o (whose launcher then fails on o.stride, bind_test.cc).
  triton.kwargs = Kwargs();
  triton.entry = Entry::kLayer;
  Resolution layer = Resolve(triton, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(layer.status.ok()) << FormatPythonError(layer.status);
  EXPECT_TRUE(ArgsOf<TritonArgs>(layer).output_from_workspace);
  EXPECT_TRUE(ArgsOf<TritonArgs>(layer).output_ws.is_none());
}

// The library models fa3 as the one member of the family that casts cu to
// int32 on q's device (fa3, fa4, aiter, amx, xpu), so the rule is tested on it.
TEST(ContractRule20, Fa3GivesTheSameArgumentsForInt32AndInt64Cu) {
  std::vector<std::vector<int64_t>> resolved;
  for (DType dtype : {DType::kInt32, DType::kInt64}) {
    for (Device device : {kCpu, kCuda}) {
      AttentionCall call = TokenCall({3, 5, 2});
      call.cu_seqlens = Value::FromTensor(IntTensor({0, 3, 8, 10}, dtype, device));
      Resolution r = Resolve(call, Profile::kFa3, Mode::kFaithful);
      ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
      const Tensor& cu = ArgsOf<FlashVarlenArgs>(r).cu_seqlens.as_tensor();
      EXPECT_EQ(cu.dtype(), DType::kInt32);
      EXPECT_EQ(cu.device(), kCuda);
      EXPECT_EQ(ArgsOf<FlashVarlenArgs>(r).max_seqlen.as_int(), 5);
      resolved.push_back(Ints(cu));
    }
  }
  for (const auto& cu : resolved) EXPECT_THAT(cu, ElementsAre(0, 3, 8, 10));

  // §10: hand-built metadata passes an int64 CPU cu straight to the kernel;
  // the builders cast.
  AttentionCall hand_built = TokenCall({3, 5, 2});
  VisionAttentionMetadata metadata;
  const Tensor cu64 = IntTensor({0, 3, 8, 10}, DType::kInt64, kCpu);
  metadata.cu_seqlens = Value::FromTensor(cu64);
  metadata.max_seqlen = Value::Int(5);
  hand_built.forward_metadata = metadata;
  Resolution r = Resolve(hand_built, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_TRUE(ArgsOf<FlashVarlenArgs>(r).cu_seqlens.as_tensor().SharesStorageWith(cu64));
  hand_built.forward_metadata =
      *PrepareVisionAttentionMetadata(Value::FromTensor(cu64), kCuda, {}, Mode::kFaithful);
  Resolution built = Resolve(hand_built, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(built.status.ok());
  EXPECT_EQ(ArgsOf<FlashVarlenArgs>(built).cu_seqlens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(ArgsOf<FlashVarlenArgs>(built).cu_seqlens.as_tensor().device(), kCuda);

  // §10: int64 values >= 2^31 wrap in the cast.
  AttentionCall wrapping = TokenCall({4, 6});
  wrapping.cu_seqlens = Value::FromTensor(
      IntTensor({0, (int64_t{1} << 32) + 4, (int64_t{1} << 32) + 10}, DType::kInt64, kCpu));
  Resolution w = Resolve(wrapping, Profile::kFa3, Mode::kFaithful);
  ASSERT_TRUE(w.status.ok()) << FormatPythonError(w.status);
  EXPECT_THAT(Ints(ArgsOf<FlashVarlenArgs>(w).cu_seqlens), ElementsAre(0, 4, 10));
  EXPECT_EQ(ArgsOf<FlashVarlenArgs>(w).max_seqlen.as_int(), 6);
}

TEST(ContractRule21, SdpaFlattenBatchMaskAndErrors) {
  AttentionCall call = TokenCall({3, 5, 2});
  call.bsz = 2;
  ExpectPyError(Resolve(call, Profile::kSdpa, Mode::kFaithful).status, PyErrorKind::kAssertionError,
                "flatten_batch is True, bsz must be 1");

  AttentionCall no_mask = TokenCall({3, 5, 2});
  no_mask.cu_seqlens = Value::None();
  no_mask.sdpa.softmax_in_single_precision = true;
  ExpectPyError(Resolve(no_mask, Profile::kSdpa, Mode::kFaithful).status,
                PyErrorKind::kRuntimeError, "Empty attention mask");

  Resolution r = Resolve(TokenCall({3, 5, 2}), Profile::kSdpa, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_EQ(ArgsOf<SdpaArgs>(r).mask, SdpaArgs::Mask::kBlockDiagonal);
  EXPECT_THAT(ArgsOf<SdpaArgs>(r).cu_seqlens, ElementsAre(0, 3, 8, 10));
  EXPECT_EQ(r.counts().host_syncs, 1);  // cu.cpu().tolist()
}

TEST(ContractRule22, AscendActualSeqLengthsAreCumulativeEnds) {
  for (Device device : {kCpu, kCuda}) {
    ScopedDeviceLedger ledger;
    absl::StatusOr<std::vector<int64_t>> ends =
        AscendActualSeqLengths(IntTensor({0, 3, 8, 10}, DType::kInt32, device), 10);
    ASSERT_TRUE(ends.ok()) << ends.status();
    EXPECT_THAT(*ends, ElementsAre(3, 8, 10));
    EXPECT_EQ(ledger.counts().host_syncs, device == kCuda ? 1 : 0);
  }
  ExpectPyError(AscendActualSeqLengths(IntTensor({0, 100, 264}, DType::kInt32, kCpu), 1000,
                                       SglangVersion::k0026249)
                    .status(),
                PyErrorKind::kRuntimeError,
                "queryT(1000) must be equal to the last element of actualSequenceLengthQ(264)");
  // 0.5.23 gathers the real rows of padded images first.
  absl::StatusOr<std::vector<int64_t>> unpadded = AscendActualSeqLengths(
      IntTensor({0, 100, 264}, DType::kInt32, kCpu), 1000, SglangVersion::k0_5_23);
  ASSERT_TRUE(unpadded.ok()) << unpadded.status();
  EXPECT_THAT(*unpadded, ElementsAre(100, 264));
  ExpectPyError(AscendActualSeqLengths(IntTensor({0, 1200}, DType::kInt32, kCpu), 1000,
                                       SglangVersion::k0_5_23)
                    .status(),
                PyErrorKind::kRuntimeError,
                "queryT(1000) must be equal to the last element of actualSequenceLengthQ(1200)");
  // Two images of 600 in slots of 500: the second's gather runs past q, on
  // the NPU, whose answer is not modelled.
  EXPECT_TRUE(
      absl::IsUnimplemented(AscendActualSeqLengths(IntTensor({0, 600, 1200}, DType::kInt32, kCpu),
                                                   1000, SglangVersion::k0_5_23)
                                .status()));
}

// Rule 23 is numerical (backend output against a reference); the kernel tests cover it.

TEST(ContractRule24, TooSmallMaxSeqlenIsSilentWhenFaithfulAndRejectedWhenHardened) {
  for (Profile profile : {Profile::kTritonAttn, Profile::kFa3}) {
    AttentionCall call = TokenCall({3, 5, 2});
    call.kwargs.set("max_seqlen", Value::Int(3));
    Resolution faithful = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(faithful.status.ok()) << FormatPythonError(faithful.status);
    const Value& max = profile == Profile::kFa3 ? ArgsOf<FlashVarlenArgs>(faithful).max_seqlen
                                                : ArgsOf<TritonArgs>(faithful).max_seqlen;
    EXPECT_EQ(max.as_int(), 3);
    ExpectPyError(Resolve(call, profile, Mode::kHardened).status, PyErrorKind::kValueError,
                  "max_seqlen=3 < 5 = cu_seqlens[2] - cu_seqlens[1]: max_seqlen must be at "
                  "least the longest sequence");
  }
}

TEST(ContractRule25, ElementOffsetsBeyondInt32) {
  // At 1152 elements per token, 1,864,135 tokens is the last count that fits.
  EXPECT_TRUE(CheckElementOffsetsFitInt32(1864135, "cu_seqlens[-1]", 1152, "elem_per_token").ok());
  ExpectPyError(CheckElementOffsetsFitInt32(1864136, "cu_seqlens[-1]", 1152, "elem_per_token"),
                PyErrorKind::kValueError,
                "cu_seqlens[-1]=1864136 tokens x elem_per_token=1152 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1864135 tokens at this width)");

  auto faithful = [](const std::vector<int64_t>& lengths) {
    AttentionCall call = CallWithShape({Offsets(lengths).back(), 16, 72});
    call.forward_metadata = FlashinferMetadata(lengths, 1152);
    return Resolve(call, Profile::kFlashinferCudnn, Mode::kFaithful);
  };
  Resolution last_fit = faithful({1864135});
  ASSERT_TRUE(last_fit.status.ok()) << FormatPythonError(last_fit.status);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(last_fit).batch_offsets_qk.IntAt(1), 2147483520);

  // Above the limit SGLang sometimes passes with wrapped offsets...
  Resolution wrapped = faithful({1864136});
  ASSERT_TRUE(wrapped.status.ok()) << FormatPythonError(wrapped.status);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(wrapped).batch_offsets_qk.IntAt(1), -2147482624);
  // ...and sometimes fails the bounds check with a misleading message.
  for (const std::vector<int64_t>& lengths : std::vector<std::vector<int64_t>>{
           {932068, 932068}, {100, 1864036}, {1000000, 1000000, 1000000}}) {
    ExpectPyError(faithful(lengths).status, PyErrorKind::kRuntimeError, std::string(kOutOfBounds));
  }

  // Hardened rejects the input instead, in the builder and in resolution.
  ExpectPyError(PrepareFlashinferCudnnMetadata(Value::FromTensor(IntTensor({0, 1864136})), kCuda,
                                               1152, Mode::kHardened)
                    .status(),
                PyErrorKind::kValueError,
                "cu_seqlens[-1]=1864136 tokens x elem_per_token=1152 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1864135 tokens at this width)");
  AttentionCall hardened = CallWithShape({1864136, 16, 72});
  hardened.cu_seqlens = Value::FromTensor(IntTensor({0, 1864136}));
  ExpectPyError(Resolve(hardened, Profile::kFlashinferCudnn, Mode::kHardened).status,
                PyErrorKind::kValueError,
                "q.shape[0]=1864136 tokens x heads*head_dim=1152 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1864135 tokens at this width)");
  AttentionCall fits = CallWithShape({1864135, 16, 72});
  fits.cu_seqlens = Value::FromTensor(IntTensor({0, 1864135}));
  Resolution ok = Resolve(fits, Profile::kFlashinferCudnn, Mode::kHardened);
  ASSERT_TRUE(ok.status.ok()) << FormatPythonError(ok.status);
  EXPECT_EQ(ArgsOf<FlashinferCudnnArgs>(ok).batch_offsets_qk.IntAt(1), 2147483520);
}

TEST(ContractRule26, BackendSelectionAndWrongPlatformConstructors) {
  using Kind = Platform::Kind;
  struct Default {
    Platform platform;
    std::string backend;
  };
  const std::vector<Default> defaults = {
      {{.kind = Kind::kCuda, .major = 9, .minor = 0}, "fa3"},
      {{.kind = Kind::kCuda, .major = 10, .minor = 0}, "fa4"},
      {{.kind = Kind::kCuda, .major = 10, .minor = 3}, "triton_attn"},
      {{.kind = Kind::kCuda, .major = 8, .minor = 0}, "triton_attn"},
      {{.kind = Kind::kNpu}, "ascend_attn"},
      {{.kind = Kind::kMusa, .major = 3, .minor = 1}, "fa3"},
      {{.kind = Kind::kHip, .major = 9, .minor = 4, .use_aiter = true}, "aiter_attn"},
      {{.kind = Kind::kCpu, .cpu_amx = true}, "amx_attn"},
      {{.kind = Kind::kXpu, .intel_xpu_backend = true}, "xpu_attn"},
      {{.kind = Kind::kOther}, "sdpa"},
      {{.kind = Kind::kMusa, .major = 3, .minor = 0}, "triton_attn"},
      {{.kind = Kind::kHip, .major = 9, .minor = 4}, "triton_attn"},
      {{.kind = Kind::kHip, .major = 9, .minor = 0, .use_aiter = true}, "triton_attn"},
      {{.kind = Kind::kCpu}, "sdpa"},
      {{.kind = Kind::kXpu}, "triton_attn"},
  };
  // The documented commit's table.
  for (const Default& d : defaults) {
    absl::StatusOr<std::string> backend =
        DetermineAttentionBackend(d.platform, std::nullopt, std::nullopt, SglangVersion::k0026249);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ(*backend, d.backend);
  }
  // 0.5.23 defaults sm103 to fa4 and XPU to xpu_attn; the rest is unchanged.
  for (const Default& d : defaults) {
    absl::StatusOr<std::string> backend =
        DetermineAttentionBackend(d.platform, std::nullopt, std::nullopt, SglangVersion::k0_5_23);
    ASSERT_TRUE(backend.ok()) << backend.status();
    const bool sm103 = d.platform.kind == Kind::kCuda && d.platform.major == 10;
    const bool xpu = d.platform.kind == Kind::kXpu;
    EXPECT_EQ(*backend, sm103 ? "fa4" : xpu ? "xpu_attn" : d.backend);
  }
  const Platform hopper{.kind = Kind::kCuda, .major = 9};
  const Platform blackwell{.kind = Kind::kCuda, .major = 10, .minor = 0};
  EXPECT_EQ(*DetermineAttentionBackend(hopper, "sdpa", "triton_attn"), "sdpa");
  EXPECT_EQ(*DetermineAttentionBackend(hopper, std::nullopt, "triton_attn"), "triton_attn");
  EXPECT_EQ(*DetermineAttentionBackend(blackwell, "sdpa", "fa3"), "sdpa");
  ExpectPyError(DetermineAttentionBackend(blackwell, std::nullopt, "fa3").status(),
                PyErrorKind::kValueError, "The 'fa3' backend is not supported on Blackwell GPUs");
  ExpectPyError(DetermineAttentionBackend(blackwell, "fa3", std::nullopt).status(),
                PyErrorKind::kValueError, "The 'fa3' backend is not supported on Blackwell GPUs");

  const Platform npu{.kind = Kind::kNpu};
  const Platform musa{.kind = Kind::kMusa, .major = 3, .minor = 1};
  const Platform hip{.kind = Kind::kHip, .major = 9, .minor = 4};
  const Platform cpu{.kind = Kind::kCpu};
  struct Wrong {
    std::string backend;
    Platform platform;
    std::string message;
  };
  const std::vector<Wrong> wrong = {
      {"fa3", npu, "VisionFlash3Attention is only available for cuda or musa"},
      {"fa4", musa, "VisionFlash4Attention is only available for cuda"},
      {"flashinfer_cudnn", hip, "VisionFlashInferAttention is only available for cuda"},
      {"aiter_attn", hopper, "aiter_attn is only available for AMD"},
      {"ascend_attn", hopper, "VisionAscendAttention is only available for ascend npu"},
      {"amx_attn", cpu, "VisionAMXAttention is only available for cpu with amx support"},
      {"xpu_attn", hopper, "VisionIntelXPUAttention is only available for Intel XPU"},
  };
  for (const Wrong& w : wrong) {
    ExpectPyError(ConstructBackend(w.backend, w.platform), PyErrorKind::kException, w.message);
  }
  EXPECT_TRUE(ConstructBackend("fa3", hopper).ok());
  EXPECT_TRUE(ConstructBackend("fa3", musa).ok());
  EXPECT_TRUE(ConstructBackend("flashinfer_cudnn", hopper).ok());
  for (const Platform& p : {hopper, npu, hip, cpu}) {
    EXPECT_TRUE(ConstructBackend("sdpa", p).ok());
    EXPECT_TRUE(ConstructBackend("triton_attn", p).ok());
  }
}

TEST(ContractRule26, PlatformsAreSpelledAsCasesWriteThem) {
  using Kind = Platform::Kind;
  for (absl::string_view name : {"cuda:9.0", "cuda:10.3", "cuda:12.0", "musa:3.1", "hip:9.4",
                                 "hip:9.4+aiter", "npu", "xpu", "xpu+intel_xpu_backend", "cpu",
                                 "cpu+amx", "other", "cuda:8.0+flash_attn_disable_uneven_k"}) {
    absl::StatusOr<Platform> p = ParsePlatform(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(PlatformName(*p), name);
  }
  EXPECT_EQ(*ParsePlatform("hip:9.4+aiter"),
            (Platform{.kind = Kind::kHip, .major = 9, .minor = 4, .use_aiter = true}));
  EXPECT_EQ(*ParsePlatform("cpu+amx"), (Platform{.kind = Kind::kCpu, .cpu_amx = true}));
  const std::string kinds =
      " (one of cuda:MAJOR.MINOR[+flash_attn_disable_uneven_k], musa:MAJOR.MINOR, "
      "hip:MAJOR.MINOR[+aiter], npu, xpu[+intel_xpu_backend], cpu[+amx], other)";
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"cuda", "cuda needs its device capability, MAJOR.MINOR"},
           {"cuda:9", "cuda needs its device capability, MAJOR.MINOR"},
           {"cuda:9.x", "cuda needs its device capability, MAJOR.MINOR"},
           {"npu:1.0", "npu has no device capability"},
           {"cpu+aiter", "cpu's one flag is +amx"},
           {"cuda:9.0+amx", "cuda's one flag is +flash_attn_disable_uneven_k"},
           {"musa:3.1+aiter", "musa takes no flag"},
           {"cpu+amx+amx", "at most one +FLAG"},
           {"sm90", "unknown kind"}}) {
    absl::StatusOr<Platform> p = ParsePlatform(name);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.status().message(), absl::StrCat("platform \"", name, "\": ", why, kinds));
  }
}

TEST(ContractRule26, ACallsPlatformSelectsAndConstructsItsBackend) {
  AttentionCall call = TokenCall({3, 5});
  call.kwargs.set("max_seqlen", Value::Int(5));
  call.platform = *ParsePlatform("cuda:9.0");
  EXPECT_TRUE(Resolve(call, Profile::kFa3, Mode::kFaithful).status.ok());
  // Through the layer on Blackwell, _determine_attention_backend refuses
  // fa3; the class alone constructs, and its kernel there is not modelled.
  call.platform = *ParsePlatform("cuda:10.0");
  call.entry = Entry::kLayer;
  ExpectPyError(Resolve(call, Profile::kFa3, Mode::kFaithful).status, PyErrorKind::kValueError,
                "The 'fa3' backend is not supported on Blackwell GPUs");
  call.entry = Entry::kDirect;
  EXPECT_EQ(Resolve(call, Profile::kFa3, Mode::kFaithful).status.message(),
            "fa3 on cuda:10.0: its kernel is modelled as FA3's mha_fwd on Hopper (cuda:9.x) only");
  call.platform = *ParsePlatform("cpu");
  ExpectPyError(Resolve(call, Profile::kAmxAttn, Mode::kHardened).status, PyErrorKind::kException,
                "VisionAMXAttention is only available for cpu with amx support");
  // transformers: a platform is modelled where the profile's kernel was read for it.
  EXPECT_THAT(std::string(Resolve(call, Profile::kTfSdpa, Mode::kFaithful).status.message()),
              ::testing::StartsWith("sdpa on cpu: transformers' attention off CUDA runs kernels "
                                    "not read here"));
  call.platform = *ParsePlatform("cuda:7.5");
  EXPECT_EQ(Resolve(call, Profile::kTfFlashAttention2, Mode::kFaithful).status.message(),
            "flash_attention_2 on cuda:7.5: FlashAttention 2 runs on compute capability 8.0 and "
            "later; its refusal of older GPUs is not modelled");
  call.platform = *ParsePlatform("cuda:8.0");
  EXPECT_EQ(Resolve(call, Profile::kTfFlashAttention3, Mode::kFaithful).status.message(),
            "flash_attention_3 on cuda:8.0: FlashAttention 3's kernels are modelled on Hopper "
            "(9.x) only");
  call.platform = *ParsePlatform("cuda:12.0");
  EXPECT_EQ(Resolve(call, Profile::kTfFlashAttention4, Mode::kFaithful).status.message(),
            "flash_attention_4 on cuda:12.0: flash_attn.cute's kernels are modelled on Hopper "
            "(9.x) and Blackwell (10.x) only");
}

TEST(ContractRule26, AFlashAttention2BuildWithoutUnevenHeadDimsIsAPlatformFlag) {
  EXPECT_EQ(
      *ParsePlatform("cuda:8.9+flash_attn_disable_uneven_k"),
      (Platform{
          .kind = Platform::Kind::kCuda, .major = 8, .minor = 9, .fa2_disable_uneven_k = true}));
  EXPECT_TRUE(Fa2DisablesUnevenK(*ParsePlatform("cuda:8.9+flash_attn_disable_uneven_k")));
  EXPECT_FALSE(Fa2DisablesUnevenK(*ParsePlatform("cuda:8.9")));
  EXPECT_FALSE(Fa2DisablesUnevenK(std::nullopt));
}

}  // namespace
}  // namespace varlen
