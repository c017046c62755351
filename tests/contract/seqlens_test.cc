// Tests the cu_seqlens / max_seqlen helpers of seqlens.h and the hardened checks built on them.

#include "varlen/contract/seqlens.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
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

Value IntValue(const std::vector<int64_t>& values, DType dtype = DType::kInt32,
               Device device = kCuda) {
  return Value::FromTensor(IntTensor(values, dtype, device));
}

// GetCuSeqlensForShape ---------------------------------------------------------

TEST(GetCuSeqlensForShape, UniformOffsetsAsInt32OnTheRequestedDevice) {
  absl::StatusOr<Tensor> cu = GetCuSeqlensForShape(4, 3, kCpu);
  ASSERT_TRUE(cu.ok());
  EXPECT_EQ(cu->dtype(), DType::kInt32);
  EXPECT_EQ(cu->device(), kCpu);
  EXPECT_EQ(cu->shape(), (Shape{5}));
  EXPECT_THAT(Ints(*cu), ElementsAre(0, 3, 6, 9, 12));
}

TEST(GetCuSeqlensForShape, ZeroBatchGivesASingleZero) {
  absl::StatusOr<Tensor> cu = GetCuSeqlensForShape(0, 3, kCuda);
  ASSERT_TRUE(cu.ok());
  EXPECT_THAT(Ints(*cu), ElementsAre(0));
}

TEST(GetCuSeqlensForShape, ZeroSeqlenIsAZeroStep) {
  ExpectPyError(GetCuSeqlensForShape(2, 0, kCuda).status(), PyErrorKind::kRuntimeError,
                "step must be nonzero");
}

TEST(GetCuSeqlensForShape, RecordsNoDeviceEvents) {
  ScopedDeviceLedger ledger;
  ASSERT_TRUE(GetCuSeqlensForShape(2, 8, kCuda).ok());
  EXPECT_THAT(ledger.events(), IsEmpty());
}

// ResolveSeqlens -------------------------------------------------------------

TEST(ResolveSeqlens, NoneBecomesTheUniformTensor) {
  absl::StatusOr<Tensor> cu = ResolveSeqlens(Value::None(), 3, 2, kCuda);
  ASSERT_TRUE(cu.ok());
  EXPECT_EQ(cu->device(), kCuda);
  EXPECT_THAT(Ints(*cu), ElementsAre(0, 2, 4, 6));
}

TEST(ResolveSeqlens, NoneWithZeroSeqlenFails) {
  ExpectPyError(ResolveSeqlens(Value::None(), 1, 0, kCuda).status(), PyErrorKind::kRuntimeError,
                "step must be nonzero");
}

TEST(ResolveSeqlens, EmptyCacheIsFilledAndItsMaxCleared) {
  auto cache = std::make_shared<SingletonCache>();
  cache->max_seqlen = 99;
  absl::StatusOr<Tensor> cu = ResolveSeqlens(Value::Cache(cache), 2, 5, kCpu);
  ASSERT_TRUE(cu.ok());
  ASSERT_TRUE(cache->data.has_value());
  EXPECT_THAT(Ints(*cache->data), ElementsAre(0, 5, 10));
  EXPECT_EQ(cache->max_seqlen, std::nullopt);
  EXPECT_TRUE(cu->SharesStorageWith(*cache->data));
}

TEST(ResolveSeqlens, FilledCacheReturnsItsDataAndKeepsItsMax) {
  auto cache = std::make_shared<SingletonCache>();
  const Tensor data = IntTensor({0, 7, 9});
  cache->set_data(data);
  cache->max_seqlen = 7;
  absl::StatusOr<Tensor> cu = ResolveSeqlens(Value::Cache(cache), 5, 5, kCuda);
  ASSERT_TRUE(cu.ok());
  EXPECT_TRUE(cu->SharesStorageWith(data));
  EXPECT_EQ(cache->max_seqlen, 7);
}

TEST(ResolveSeqlens, TensorIsReturnedUnchanged) {
  const Tensor cu64 = IntTensor({0, 3, 8}, DType::kInt64, kCpu);
  ScopedDeviceLedger ledger;
  absl::StatusOr<Tensor> cu = ResolveSeqlens(Value::FromTensor(cu64), 1, 8, kCuda);
  ASSERT_TRUE(cu.ok());
  EXPECT_TRUE(cu->SharesStorageWith(cu64));
  EXPECT_EQ(cu->dtype(), DType::kInt64);  // neither cast nor moved
  EXPECT_EQ(cu->device(), kCpu);
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(ResolveSeqlens, AnythingElseFailsTheTensorAssertion) {
  for (const Value& v : {Value::List({Value::Int(0), Value::Int(8)}), Value::Int(8),
                         Value::Str("0,8"), Value::Float(8.0)}) {
    ExpectPyError(ResolveSeqlens(v, 1, 8, kCuda).status(), PyErrorKind::kAssertionError,
                  "cu_seqlens must be a torch.Tensor");
  }
}

// ResolveMaxSeqlen -----------------------------------------------------------

TEST(ResolveMaxSeqlen, RawTensorSourceIsNotCachedOn) {
  const Tensor cu = IntTensor({0, 2, 7}, DType::kInt32, kCpu);
  absl::StatusOr<int64_t> max = ResolveMaxSeqlen(Value::FromTensor(cu), cu);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(*max, 5);
}

TEST(ResolveMaxSeqlen, NoneSourceComputesFromCu) {
  absl::StatusOr<int64_t> max = ResolveMaxSeqlen(Value::None(), IntTensor({0, 4, 4, 10}));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(*max, 6);
}

TEST(ResolveMaxSeqlen, CachesOnSingletonCache) {
  auto cache = std::make_shared<SingletonCache>();
  cache->set_data(IntTensor({0, 2, 7}));
  {
    ScopedDeviceLedger ledger;
    EXPECT_EQ(*ResolveMaxSeqlen(Value::Cache(cache), *cache->data), 5);
    EXPECT_EQ(ledger.counts().host_syncs, 1);
  }
  EXPECT_EQ(cache->max_seqlen, 5);
  ScopedDeviceLedger ledger;
  EXPECT_EQ(*ResolveMaxSeqlen(Value::Cache(cache), *cache->data), 5);
  EXPECT_EQ(ledger.counts().host_syncs, 0);
}

TEST(ResolveMaxSeqlen, SyncsOnlyForDeviceCu) {
  for (Device device : {kCpu, kCuda}) {
    ScopedDeviceLedger ledger;
    ASSERT_TRUE(ResolveMaxSeqlen(Value::None(), IntTensor({0, 3}, DType::kInt32, device)).ok());
    EXPECT_EQ(ledger.counts().host_syncs, device == kCuda ? 1 : 0);
  }
}

TEST(ResolveMaxSeqlen, SingleEntryCuHasNoMax) {
  ExpectPyError(ResolveMaxSeqlen(Value::None(), IntTensor({0})).status(),
                PyErrorKind::kRuntimeError,
                "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
}

// ResolvePrecomputedMaxSeqlen -------------------------------------------------

TEST(ResolvePrecomputedMaxSeqlen, DeviceTensorCostsOneSyncAndHostValuesNone) {
  const Tensor cu = IntTensor({0, 2, 7}, DType::kInt32, kCpu);
  struct Case {
    Value max;
    int64_t expected;
    int syncs;
  };
  const std::vector<Case> cases = {
      {IntValue({11}, DType::kInt64, kCuda), 11, 1},
      {IntValue({11}, DType::kInt64, kCpu), 11, 0},
      {Value::Int(11), 11, 0},
      {Value::FromTensor(Tensor::FromDoubles({11.7}, DType::kFloat32, kCpu)), 11, 0},
  };
  for (const Case& c : cases) {
    ScopedDeviceLedger ledger;
    absl::StatusOr<int64_t> max = ResolvePrecomputedMaxSeqlen(cu, c.max);
    ASSERT_TRUE(max.ok()) << max.status();
    EXPECT_EQ(*max, c.expected);
    EXPECT_EQ(ledger.counts().host_syncs, c.syncs) << c.max.Repr();
  }
}

TEST(ResolvePrecomputedMaxSeqlen, NoneDerivesFromDeviceCuWithOneSync) {
  ScopedDeviceLedger ledger;
  absl::StatusOr<int64_t> max = ResolvePrecomputedMaxSeqlen(IntTensor({0, 2, 7}), Value::None());
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(*max, 5);
  EXPECT_EQ(ledger.counts().host_syncs, 1);
}

TEST(ResolvePrecomputedMaxSeqlen, PythonIntErrors) {
  const Tensor cu = IntTensor({0, 2, 7});
  ExpectPyError(ResolvePrecomputedMaxSeqlen(cu, Value::Str("auto")).status(),
                PyErrorKind::kValueError, "invalid literal for int() with base 10: 'auto'");
  ExpectPyError(ResolvePrecomputedMaxSeqlen(cu, Value::List({})).status(), PyErrorKind::kTypeError,
                "int() argument must be a string, a bytes-like object or a real number, not "
                "'list'");
  ExpectPyError(ResolvePrecomputedMaxSeqlen(cu, IntValue({1, 2, 3})).status(),
                PyErrorKind::kRuntimeError,
                "a Tensor with 3 elements cannot be converted to Scalar");
}

// CheckTokenOffsets ----------------------------------------------------------

TEST(CheckTokenOffsets, ReturnsTheOffsetsAndSyncsForDeviceTensors) {
  for (Device device : {kCpu, kCuda}) {
    ScopedDeviceLedger ledger;
    absl::StatusOr<std::vector<int64_t>> offsets =
        CheckTokenOffsets(IntTensor({0, 3, 3, 10}, DType::kInt64, device), "cu_seqlens", 10);
    ASSERT_TRUE(offsets.ok()) << offsets.status();
    EXPECT_THAT(*offsets, ElementsAre(0, 3, 3, 10));  // zero-length sequences are fine
    EXPECT_EQ(ledger.counts().host_syncs, device == kCuda ? 1 : 0);
  }
}

TEST(CheckTokenOffsets, SingleZeroIsAnEmptyBatch) {
  absl::StatusOr<std::vector<int64_t>> offsets = CheckTokenOffsets(IntTensor({0}), "cu", 0);
  ASSERT_TRUE(offsets.ok());
  EXPECT_THAT(*offsets, ElementsAre(0));
}

TEST(CheckTokenOffsets, TotalIsOptional) {
  EXPECT_TRUE(CheckTokenOffsets(IntTensor({0, 4, 9}), "cu_seqlens", std::nullopt).ok());
}

TEST(CheckTokenOffsets, RejectsNonIntegerDtype) {
  ExpectPyError(
      CheckTokenOffsets(Tensor::FromDoubles({0, 3}, DType::kFloat32, kCuda), "cu_seqlens", 3)
          .status(),
      PyErrorKind::kTypeError,
      "cu_seqlens has dtype float32: token offsets must be int32 or int64");
  ExpectPyError(CheckTokenOffsets(IntTensor({0, 1}, DType::kBool), "cu_seqlens", 1).status(),
                PyErrorKind::kTypeError,
                "cu_seqlens has dtype bool: token offsets must be int32 or int64");
}

TEST(CheckTokenOffsets, RejectsWrongShape) {
  ExpectPyError(CheckTokenOffsets(Tensor::FromInts({0, 3, 3, 6}, DType::kInt32, kCuda, Shape{2, 2}),
                                  "cu_seqlens", 6)
                    .status(),
                PyErrorKind::kValueError,
                "cu_seqlens has shape [2, 2]: token offsets must be 1-d with B+1 >= 1 entries");
  ExpectPyError(CheckTokenOffsets(IntTensor({}), "cu_seqlens", 0).status(),
                PyErrorKind::kValueError,
                "cu_seqlens has shape [0]: token offsets must be 1-d with B+1 >= 1 entries");
}

TEST(CheckTokenOffsets, RejectsNonZeroStart) {
  ExpectPyError(CheckTokenOffsets(IntTensor({2, 5}), "cu_seqlens", 5).status(),
                PyErrorKind::kValueError, "cu_seqlens[0]=2: token offsets must start at 0");
}

TEST(CheckTokenOffsets, RejectsDecreasingOffsets) {
  ExpectPyError(CheckTokenOffsets(IntTensor({0, 20, 17, 30}), "cu_seqlens", 30).status(),
                PyErrorKind::kValueError,
                "cu_seqlens[2]=17 < cu_seqlens[1]=20: offsets must be non-decreasing");
}

TEST(CheckTokenOffsets, RejectsOffsetsBeyondInt32) {
  ExpectPyError(
      CheckTokenOffsets(IntTensor({0, 5, 2147483648}, DType::kInt64), "cu_seqlens", std::nullopt)
          .status(),
      PyErrorKind::kValueError, "cu_seqlens[2]=2147483648 > 2147483647: offsets must fit in int32");
  EXPECT_TRUE(
      CheckTokenOffsets(IntTensor({0, 2147483647}, DType::kInt64), "cu_seqlens", 2147483647).ok());
}

TEST(CheckTokenOffsets, RejectsALastOffsetOtherThanTheTokenCount) {
  ExpectPyError(CheckTokenOffsets(IntTensor({0, 3, 8, 9}), "cu_seqlens", 10).status(),
                PyErrorKind::kValueError,
                "cu_seqlens[3]=9 != 10 = q.shape[0]: the last offset must equal the number of "
                "packed tokens");
}

TEST(CheckTokenOffsets, NamesTheArgumentItIsGiven) {
  ExpectPyError(CheckTokenOffsets(IntTensor({0, 4, 1}), "forward_metadata.cu_seqlens", 1).status(),
                PyErrorKind::kValueError,
                "forward_metadata.cu_seqlens[2]=1 < forward_metadata.cu_seqlens[1]=4: offsets "
                "must be non-decreasing");
}

// CheckMaxSeqlen -------------------------------------------------------------

TEST(CheckMaxSeqlen, AcceptsIntsAndOneElementIntegerTensorsAtLeastTheLongest) {
  EXPECT_EQ(*CheckMaxSeqlen(Value::Int(5), 5, "seq_lens[1]"), 5);
  EXPECT_EQ(*CheckMaxSeqlen(Value::Int(4096), 5, "seq_lens[1]"), 4096);
  EXPECT_EQ(*CheckMaxSeqlen(Value::Int(0), 0, "seq_lens[0]"), 0);
  for (Device device : {kCpu, kCuda}) {
    ScopedDeviceLedger ledger;
    absl::StatusOr<int64_t> max = CheckMaxSeqlen(IntValue({7}, DType::kInt64, device), 5, "s");
    ASSERT_TRUE(max.ok()) << max.status();
    EXPECT_EQ(*max, 7);
    EXPECT_EQ(ledger.counts().host_syncs, device == kCuda ? 1 : 0);
  }
  absl::StatusOr<int64_t> zero_d = CheckMaxSeqlen(
      Value::FromTensor(Tensor::FromInts({9}, DType::kInt32, kCpu, Shape{})), 5, "s");
  ASSERT_TRUE(zero_d.ok());
  EXPECT_EQ(*zero_d, 9);
}

TEST(CheckMaxSeqlen, RejectsFloatsWithoutTruncating) {
  ExpectPyError(CheckMaxSeqlen(Value::Float(5.9), 5, "seq_lens[1]").status(),
                PyErrorKind::kTypeError,
                "max_seqlen=5.9 is a float: it must be an int, never truncated");
  ExpectPyError(CheckMaxSeqlen(Value::Float(4096.0), 5, "seq_lens[1]").status(),
                PyErrorKind::kTypeError,
                "max_seqlen=4096.0 is a float: it must be an int, never truncated");
}

TEST(CheckMaxSeqlen, RejectsStringsBoolsNoneAndLists) {
  ExpectPyError(CheckMaxSeqlen(Value::Str("4096"), 5, "s").status(), PyErrorKind::kTypeError,
                "max_seqlen='4096' is a str: it must be an int or a one-element integer tensor");
  ExpectPyError(CheckMaxSeqlen(Value::Bool(true), 1, "s").status(), PyErrorKind::kTypeError,
                "max_seqlen=True is a bool: it must be an int or a one-element integer tensor");
  ExpectPyError(CheckMaxSeqlen(Value::None(), 5, "s").status(), PyErrorKind::kTypeError,
                "max_seqlen=None is a NoneType: it must be an int or a one-element integer "
                "tensor");
  ExpectPyError(CheckMaxSeqlen(Value::List({Value::Int(5)}), 5, "s").status(),
                PyErrorKind::kTypeError,
                "max_seqlen=[5] is a list: it must be an int or a one-element integer tensor");
}

TEST(CheckMaxSeqlen, RejectsFloatAndMultiElementTensors) {
  ExpectPyError(
      CheckMaxSeqlen(Value::FromTensor(Tensor::FromDoubles({7.0}, DType::kFloat32, kCpu)), 5, "s")
          .status(),
      PyErrorKind::kTypeError,
      "max_seqlen is a tensor of dtype float32 and shape [1]: it must be an int or a "
      "one-element integer tensor");
  ExpectPyError(CheckMaxSeqlen(IntValue({7, 8}), 5, "s").status(), PyErrorKind::kTypeError,
                "max_seqlen is a tensor of dtype int32 and shape [2]: it must be an int or a "
                "one-element integer tensor");
}

TEST(CheckMaxSeqlen, RejectsNegativeValues) {
  ExpectPyError(CheckMaxSeqlen(Value::Int(-3), 0, "s").status(), PyErrorKind::kValueError,
                "max_seqlen=-3 is negative: it must be at least 0");
  ExpectPyError(CheckMaxSeqlen(IntValue({-1}, DType::kInt64, kCpu), 0, "s").status(),
                PyErrorKind::kValueError, "max_seqlen=-1 is negative: it must be at least 0");
}

TEST(CheckMaxSeqlen, RejectsValuesBelowTheLongestSequence) {
  ExpectPyError(CheckMaxSeqlen(Value::Int(4), 5, "seq_lens[1]").status(), PyErrorKind::kValueError,
                "max_seqlen=4 < 5 = seq_lens[1]: max_seqlen must be at least the longest "
                "sequence");
  ExpectPyError(CheckMaxSeqlen(IntValue({700}), 720, "sequence_lengths[1]").status(),
                PyErrorKind::kValueError,
                "max_seqlen=700 < 720 = sequence_lengths[1]: max_seqlen must be at least the "
                "longest sequence");
}

// CheckSequenceLengths -------------------------------------------------------

TEST(CheckSequenceLengths, FlattensPaddedLengthsAndSyncsForDeviceTensors) {
  for (Device device : {kCpu, kCuda}) {
    ScopedDeviceLedger ledger;
    absl::StatusOr<std::vector<int64_t>> lengths = CheckSequenceLengths(Value::FromTensor(
        Tensor::FromInts({480, 720, 0, 0}, DType::kInt32, device, Shape{4, 1, 1, 1})));
    ASSERT_TRUE(lengths.ok()) << lengths.status();
    EXPECT_THAT(*lengths, ElementsAre(480, 720, 0, 0));
    EXPECT_EQ(ledger.counts().host_syncs, device == kCuda ? 1 : 0);
  }
}

TEST(CheckSequenceLengths, RejectsNonTensors) {
  ExpectPyError(CheckSequenceLengths(Value::List({Value::Int(480), Value::Int(720)})).status(),
                PyErrorKind::kTypeError,
                "sequence_lengths=[480, 720] is a list: it must be an integer tensor");
  ExpectPyError(CheckSequenceLengths(Value::None()).status(), PyErrorKind::kTypeError,
                "sequence_lengths=None is a NoneType: it must be an integer tensor");
}

TEST(CheckSequenceLengths, RejectsNonIntegerDtype) {
  ExpectPyError(
      CheckSequenceLengths(Value::FromTensor(Tensor::FromDoubles({3, 5}, DType::kFloat32, kCuda)))
          .status(),
      PyErrorKind::kTypeError, "sequence_lengths has dtype float32: it must be int32 or int64");
}

TEST(CheckSequenceLengths, RejectsNegativeAndOversizedLengths) {
  ExpectPyError(CheckSequenceLengths(IntValue({3, -2, 5})).status(), PyErrorKind::kValueError,
                "sequence_lengths[1]=-2: lengths must be non-negative");
  ExpectPyError(CheckSequenceLengths(IntValue({2147483648}, DType::kInt64)).status(),
                PyErrorKind::kValueError,
                "sequence_lengths[0]=2147483648 > 2147483647: lengths must fit in int32");
}

// CheckElementOffsetsFitInt32 --------------------------------------------------

TEST(CheckElementOffsetsFitInt32, ExactBoundaries) {
  EXPECT_TRUE(CheckElementOffsetsFitInt32(1864135, "cu_seqlens[-1]", 1152, "elem_per_token").ok());
  ExpectPyError(CheckElementOffsetsFitInt32(1864136, "cu_seqlens[-1]", 1152, "elem_per_token"),
                PyErrorKind::kValueError,
                "cu_seqlens[-1]=1864136 tokens x elem_per_token=1152 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1864135 tokens at this width)");
  EXPECT_TRUE(CheckElementOffsetsFitInt32(1398101, "cu_seqlens[-1]", 1536, "elem_per_token").ok());
  ExpectPyError(CheckElementOffsetsFitInt32(1398102, "cu_seqlens[-1]", 1536, "elem_per_token"),
                PyErrorKind::kValueError,
                "cu_seqlens[-1]=1398102 tokens x elem_per_token=1536 = 2147484672 > 2147483647: "
                "element offsets must fit in int32 (at most 1398101 tokens at this width)");
  EXPECT_TRUE(CheckElementOffsetsFitInt32(2147483647, "cu_seqlens[-1]", 1, "elem_per_token").ok());
  EXPECT_TRUE(CheckElementOffsetsFitInt32(0, "cu_seqlens[-1]", 1152, "elem_per_token").ok());
  EXPECT_TRUE(CheckElementOffsetsFitInt32(1LL << 40, "cu_seqlens[-1]", 0, "elem_per_token")
                  .ok());  // 0: no width to check
}

// FindLongest and OffsetsToLengths ---------------------------------------------

TEST(FindLongest, NamesTheFirstLongestEntry) {
  Longest longest = FindLongest({3, 5, 2, 5}, "seq_lens");
  EXPECT_EQ(longest.value, 5);
  EXPECT_EQ(longest.index, 1);
  EXPECT_EQ(longest.source, "seq_lens[1]");
}

TEST(FindLongest, AllZeroLengths) {
  Longest longest = FindLongest({0, 0}, "sequence_lengths");
  EXPECT_EQ(longest.value, 0);
  EXPECT_EQ(longest.index, 0);
  EXPECT_EQ(longest.source, "sequence_lengths[0]");
}

TEST(FindLongest, EmptyLengths) {
  Longest longest = FindLongest({}, "seq_lens");
  EXPECT_EQ(longest.value, 0);
  EXPECT_EQ(longest.index, -1);
  EXPECT_EQ(longest.source, "0 (seq_lens is empty)");
}

TEST(OffsetsToLengths, DifferencesOfConsecutiveOffsets) {
  EXPECT_THAT(OffsetsToLengths({0, 3, 8, 10}), ElementsAre(3, 5, 2));
  EXPECT_THAT(OffsetsToLengths({0, 4, 4, 9}), ElementsAre(4, 0, 5));
  EXPECT_THAT(OffsetsToLengths({0}), IsEmpty());
  EXPECT_THAT(OffsetsToLengths({}), IsEmpty());
}

}  // namespace
}  // namespace varlen
