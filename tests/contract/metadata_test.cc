// Tests the batch/max bucketing tables and both metadata builders in faithful and hardened mode.

#include "varlen/contract/sglang/metadata.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/call.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen {
namespace {

using ::varlen::test::ExpectPyError;
using ::varlen::test::Ints;

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr Device kCpu = Device::kCpu;
constexpr Device kCuda = Device::kCuda;

Value Cu(const std::vector<int64_t>& offsets, DType dtype = DType::kInt32, Device device = kCuda) {
  return Value::FromTensor(Tensor::FromInts(offsets, dtype, device));
}

void ExpectCounts(const DeviceEventCounts& counts, int syncs, int h2d, int d2h, int casts) {
  EXPECT_EQ(counts.host_syncs, syncs);
  EXPECT_EQ(counts.host_to_device_copies, h2d);
  EXPECT_EQ(counts.device_to_host_copies, d2h);
  EXPECT_EQ(counts.casts, casts);
}

// The packed layout [qk | v | o] with three copies of `third`.
std::vector<int64_t> ThreeTimes(const std::vector<int64_t>& third) {
  std::vector<int64_t> out;
  for (int i = 0; i < 3; ++i) out.insert(out.end(), third.begin(), third.end());
  return out;
}

void ExpectSameContents(const VisionAttentionMetadata& a, const VisionAttentionMetadata& b) {
  EXPECT_EQ(Ints(a.cu_seqlens), Ints(b.cu_seqlens));
  EXPECT_EQ(Ints(a.seq_lens), Ints(b.seq_lens));
  EXPECT_EQ(a.max_seqlen.as_int(), b.max_seqlen.as_int());
  EXPECT_EQ(a.packed_indptrs.is_none(), b.packed_indptrs.is_none());
  if (!a.packed_indptrs.is_none()) {
    EXPECT_EQ(Ints(a.packed_indptrs), Ints(b.packed_indptrs));
    EXPECT_EQ(Ints(a.sequence_lengths), Ints(b.sequence_lengths));
    EXPECT_EQ(a.sequence_lengths.as_tensor().shape(), b.sequence_lengths.as_tensor().shape());
    EXPECT_EQ(a.flashinfer_max_seqlen.as_int(), b.flashinfer_max_seqlen.as_int());
  }
}

// Rules 7 and 8 ------------------------------------------------------------------

TEST(PaddedBatchSize, FirstBucketElseRoundedUpToEight) {
  const std::vector<std::pair<int64_t, int64_t>> table = {
      {0, 8},   {1, 8},   {7, 8},   {8, 8},     {9, 16},    {15, 16},
      {16, 16}, {17, 32}, {32, 32}, {33, 64},   {63, 64},   {64, 64},
      {65, 72}, {72, 72}, {73, 80}, {100, 104}, {128, 128}, {129, 136}};
  for (const auto& [batch, padded] : table) EXPECT_EQ(PaddedBatchSize(batch), padded) << batch;
}

TEST(BucketedMaxSeqlen, FirstBucketElseRoundedUpTo131072) {
  const std::vector<std::pair<int64_t, int64_t>> table = {
      {0, 4096},        {1, 4096},        {4096, 4096},     {4097, 8192},    {8192, 8192},
      {8193, 16384},    {16385, 32768},   {32769, 65536},   {65536, 65536},  {65537, 131072},
      {131072, 131072}, {131073, 262144}, {262144, 262144}, {262145, 393216}};
  for (const auto& [real, bucket] : table) EXPECT_EQ(BucketedMaxSeqlen(real), bucket) << real;
}

// PrepareVisionAttentionMetadata, faithful ----------------------------------------

TEST(PlainBuilderFaithful, CastsMovesAndComputesTheMaxWithOneSync) {
  ScopedDeviceLedger ledger;
  absl::StatusOr<VisionAttentionMetadata> m = PrepareVisionAttentionMetadata(
      Cu({0, 3, 8, 10}, DType::kInt64, kCpu), kCuda, {}, Mode::kFaithful);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cu_seqlens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(m->cu_seqlens.as_tensor().device(), kCuda);
  EXPECT_EQ(m->seq_lens.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(m->seq_lens.as_tensor().device(), kCuda);
  EXPECT_THAT(Ints(m->cu_seqlens), ElementsAre(0, 3, 8, 10));
  EXPECT_THAT(Ints(m->seq_lens), ElementsAre(3, 5, 2));
  EXPECT_EQ(m->max_seqlen.as_int(), 5);
  EXPECT_FALSE(m->stamp.has_value());
  ExpectCounts(ledger.counts(), /*syncs=*/1, /*h2d=*/1, /*d2h=*/0, /*casts=*/1);
}

TEST(PlainBuilderFaithful, PassesOptionalFieldsThroughUnvalidated) {
  PlainMetadataOptions options;
  options.max_seqlen = Value::Int(2);  // below the real 5: kept anyway
  options.packed_indptrs = Value::Str("anything");
  options.sequence_lengths = Value::Int(7);
  options.flashinfer_max_seqlen = Value::Int(123);
  ScopedDeviceLedger ledger;
  absl::StatusOr<VisionAttentionMetadata> m =
      PrepareVisionAttentionMetadata(Cu({0, 3, 8, 10}), kCuda, options, Mode::kFaithful);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_seqlen.as_int(), 2);
  EXPECT_EQ(m->packed_indptrs.as_str(), "anything");
  EXPECT_EQ(m->sequence_lengths.as_int(), 7);
  EXPECT_EQ(m->flashinfer_max_seqlen.as_int(), 123);
  EXPECT_EQ(ledger.counts().host_syncs, 0);
}

TEST(PlainBuilderFaithful, EmptyBatchRaisesAtTheMax) {
  ExpectPyError(PrepareVisionAttentionMetadata(Cu({0}), kCuda, {}, Mode::kFaithful).status(),
                PyErrorKind::kRuntimeError,
                "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
}

TEST(PlainBuilderFaithful, NonTensorCuHasNoTo) {
  ExpectPyError(PrepareVisionAttentionMetadata(Value::None(), kCuda, {}, Mode::kFaithful).status(),
                PyErrorKind::kAttributeError, "'NoneType' object has no attribute 'to'");
  ExpectPyError(PrepareVisionAttentionMetadata(Value::List({Value::Int(0), Value::Int(4)}), kCuda,
                                               {}, Mode::kFaithful)
                    .status(),
                PyErrorKind::kAttributeError, "'list' object has no attribute 'to'");
}

TEST(PlainBuilderFaithful, NonMonotoneCuIsNotChecked) {
  absl::StatusOr<VisionAttentionMetadata> m =
      PrepareVisionAttentionMetadata(Cu({0, 20, 17, 30}), kCuda, {}, Mode::kFaithful);
  ASSERT_TRUE(m.ok());
  EXPECT_THAT(Ints(m->seq_lens), ElementsAre(20, -3, 13));
  EXPECT_EQ(m->max_seqlen.as_int(), 20);
}

// PrepareFlashinferCudnnMetadata, faithful ----------------------------------------

TEST(FlashinferBuilderFaithful, BuildsPaddedPackedMetadataWithTwoSyncs) {
  ScopedDeviceLedger ledger;
  absl::StatusOr<VisionAttentionMetadata> m =
      PrepareFlashinferCudnnMetadata(Cu({0, 3, 8, 10}), kCuda, 6, Mode::kFaithful);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(Ints(m->packed_indptrs),
              ElementsAreArray(ThreeTimes({0, 18, 48, 60, 60, 60, 60, 60, 60})));
  EXPECT_EQ(m->packed_indptrs.as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(m->packed_indptrs.as_tensor().device(), kCuda);
  EXPECT_THAT(Ints(m->sequence_lengths), ElementsAre(3, 5, 2, 0, 0, 0, 0, 0));
  EXPECT_EQ(m->sequence_lengths.as_tensor().shape(), (Shape{8, 1, 1, 1}));
  EXPECT_EQ(m->flashinfer_max_seqlen.as_int(), 4096);
  EXPECT_THAT(Ints(m->cu_seqlens), ElementsAre(0, 3, 8, 10));  // unpadded and real
  EXPECT_THAT(Ints(m->seq_lens), ElementsAre(3, 5, 2));
  EXPECT_EQ(m->max_seqlen.as_int(), 5);
  EXPECT_FALSE(m->stamp.has_value());
  EXPECT_EQ(ledger.counts().host_syncs, 2);
}

// Step 7 passes the already converted cu on, so the inner builder's .to()
// changes nothing: one cast and one copy in all.
TEST(FlashinferBuilderFaithful, HostInt64CuIsCastAndCopiedOnce) {
  ScopedDeviceLedger ledger;
  ASSERT_TRUE(PrepareFlashinferCudnnMetadata(Cu({0, 3, 8, 10}, DType::kInt64, kCpu), kCuda, 6,
                                             Mode::kFaithful)
                  .ok());
  ExpectCounts(ledger.counts(), /*syncs=*/2, /*h2d=*/1, /*d2h=*/0, /*casts=*/1);
}

TEST(FlashinferBuilderFaithful, LargeBatchAndMaxBuckets) {
  std::vector<int64_t> offsets = {0};
  for (int i = 0; i < 65; ++i) offsets.push_back(offsets.back() + (i == 7 ? 70000 : 10));
  absl::StatusOr<VisionAttentionMetadata> m =
      PrepareFlashinferCudnnMetadata(Cu(offsets), kCuda, 4, Mode::kFaithful);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->sequence_lengths.as_tensor().shape(), (Shape{72, 1, 1, 1}));
  EXPECT_EQ(m->packed_indptrs.as_tensor().numel(), 3 * 73);
  EXPECT_EQ(Ints(m->packed_indptrs)[72], offsets.back() * 4);
  EXPECT_EQ(m->flashinfer_max_seqlen.as_int(), 131072);
}

TEST(FlashinferBuilderFaithful, Int32ElementOffsetsWrapSilently) {
  absl::StatusOr<VisionAttentionMetadata> m =
      PrepareFlashinferCudnnMetadata(Cu({0, 2000000}), kCuda, 1152, Mode::kFaithful);
  ASSERT_TRUE(m.ok());
  const std::vector<int64_t> packed = Ints(m->packed_indptrs);
  EXPECT_EQ(packed[0], 0);
  EXPECT_EQ(packed[1], -1990967296);
}

TEST(FlashinferBuilderFaithful, EmptyBatchAndNonTensorCu) {
  ExpectPyError(PrepareFlashinferCudnnMetadata(Cu({0}), kCuda, 8, Mode::kFaithful).status(),
                PyErrorKind::kRuntimeError,
                "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
  // No entries at all: padding reads cu_seqlens[-1] first.
  ExpectPyError(PrepareFlashinferCudnnMetadata(Cu({}), kCuda, 8, Mode::kFaithful).status(),
                PyErrorKind::kIndexError, "index -1 is out of bounds for dimension 0 with size 0");
  ExpectPyError(PrepareFlashinferCudnnMetadata(Value::None(), kCuda, 8, Mode::kFaithful).status(),
                PyErrorKind::kAttributeError, "'NoneType' object has no attribute 'to'");
  ExpectPyError(PrepareFlashinferCudnnMetadata(Value::List({Value::Int(0), Value::Int(4)}), kCuda,
                                               8, Mode::kFaithful)
                    .status(),
                PyErrorKind::kAttributeError, "'list' object has no attribute 'to'");
}

// Hardened builders ---------------------------------------------------------------

TEST(PlainBuilderHardened, StampsWhatItProvedAndBuildsTheSameContents) {
  const Value cu = Cu({0, 3, 8, 10}, DType::kInt64, kCpu);
  absl::StatusOr<VisionAttentionMetadata> hardened =
      PrepareVisionAttentionMetadata(cu, kCuda, {}, Mode::kHardened);
  ASSERT_TRUE(hardened.ok()) << hardened.status();
  ASSERT_TRUE(hardened->stamp.has_value());
  EXPECT_EQ(hardened->stamp->total_tokens, 10);
  EXPECT_EQ(hardened->stamp->batch, 3);
  EXPECT_EQ(hardened->stamp->longest, 5);
  EXPECT_EQ(hardened->stamp->elem_per_token, 0);
  ExpectSameContents(*hardened, *PrepareVisionAttentionMetadata(cu, kCuda, {}, Mode::kFaithful));
}

TEST(PlainBuilderHardened, AcceptsAnExplicitMaxAtLeastTheLongest) {
  PlainMetadataOptions options;
  options.max_seqlen = Value::Int(5);
  ScopedDeviceLedger ledger;
  absl::StatusOr<VisionAttentionMetadata> m = PrepareVisionAttentionMetadata(
      Cu({0, 3, 8, 10}, DType::kInt32, kCpu), kCuda, options, Mode::kHardened);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->max_seqlen.as_int(), 5);
  EXPECT_EQ(ledger.counts().host_syncs, 0);  // host cu, given max
}

TEST(PlainBuilderHardened, RejectsATooSmallExplicitMax) {
  PlainMetadataOptions options;
  options.max_seqlen = Value::Int(3);
  ExpectPyError(
      PrepareVisionAttentionMetadata(Cu({0, 3, 8, 10}), kCuda, options, Mode::kHardened).status(),
      PyErrorKind::kValueError,
      "max_seqlen=3 < 5 = seq_lens[1]: max_seqlen must be at least the longest sequence");
  options.max_seqlen = Value::Float(5.0);
  ExpectPyError(
      PrepareVisionAttentionMetadata(Cu({0, 3, 8, 10}), kCuda, options, Mode::kHardened).status(),
      PyErrorKind::kTypeError, "max_seqlen=5.0 is a float: it must be an int, never truncated");
}

TEST(PlainBuilderHardened, RejectsAnEmptyBatch) {
  ExpectPyError(PrepareVisionAttentionMetadata(Cu({0}), kCuda, {}, Mode::kHardened).status(),
                PyErrorKind::kValueError,
                "cu_seqlens=[0] describes no sequence: the metadata builders need at least one "
                "(B+1 >= 2 entries)");
}

TEST(PlainBuilderHardened, RejectsNonMonotoneCu) {
  ExpectPyError(
      PrepareVisionAttentionMetadata(Cu({0, 20, 17, 30}), kCuda, {}, Mode::kHardened).status(),
      PyErrorKind::kValueError,
      "cu_seqlens[2]=17 < cu_seqlens[1]=20: offsets must be non-decreasing");
}

TEST(PlainBuilderHardened, RejectsNonTensorCu) {
  ExpectPyError(PrepareVisionAttentionMetadata(Value::None(), kCuda, {}, Mode::kHardened).status(),
                PyErrorKind::kTypeError,
                "cu_seqlens=None is a NoneType: the metadata builders need an integer tensor");
  ExpectPyError(PrepareVisionAttentionMetadata(Value::List({Value::Int(0), Value::Int(4)}), kCuda,
                                               {}, Mode::kHardened)
                    .status(),
                PyErrorKind::kTypeError,
                "cu_seqlens=[0, 4] is a list: the metadata builders need an integer tensor");
}

TEST(FlashinferBuilderHardened, StampsWhatItProvedAndBuildsTheSameContents) {
  const Value cu = Cu({0, 480, 1200});
  absl::StatusOr<VisionAttentionMetadata> hardened =
      PrepareFlashinferCudnnMetadata(cu, kCuda, 1536, Mode::kHardened);
  ASSERT_TRUE(hardened.ok()) << hardened.status();
  ASSERT_TRUE(hardened->stamp.has_value());
  EXPECT_EQ(hardened->stamp->total_tokens, 1200);
  EXPECT_EQ(hardened->stamp->batch, 2);
  EXPECT_EQ(hardened->stamp->longest, 720);
  EXPECT_EQ(hardened->stamp->elem_per_token, 1536);
  ExpectSameContents(*hardened, *PrepareFlashinferCudnnMetadata(cu, kCuda, 1536, Mode::kFaithful));
  EXPECT_THAT(Ints(hardened->packed_indptrs),
              ElementsAreArray(ThreeTimes(
                  {0, 737280, 1843200, 1843200, 1843200, 1843200, 1843200, 1843200, 1843200})));
}

TEST(FlashinferBuilderHardened, RejectsElementOffsetsThatWrap) {
  ExpectPyError(
      PrepareFlashinferCudnnMetadata(Cu({0, 2000000}), kCuda, 1152, Mode::kHardened).status(),
      PyErrorKind::kValueError,
      "cu_seqlens[-1]=2000000 tokens x elem_per_token=1152 = 2304000000 > 2147483647: "
      "element offsets must fit in int32 (at most 1864135 tokens at this width)");
  EXPECT_TRUE(PrepareFlashinferCudnnMetadata(Cu({0, 1864135}), kCuda, 1152, Mode::kHardened).ok());
}

TEST(FlashinferBuilderHardened, RejectsEmptyBatchNonMonotoneCuAndBadWidth) {
  ExpectPyError(PrepareFlashinferCudnnMetadata(Cu({0}), kCuda, 8, Mode::kHardened).status(),
                PyErrorKind::kValueError,
                "cu_seqlens=[0] describes no sequence: the metadata builders need at least one "
                "(B+1 >= 2 entries)");
  ExpectPyError(
      PrepareFlashinferCudnnMetadata(Cu({0, 20, 17, 30}), kCuda, 8, Mode::kHardened).status(),
      PyErrorKind::kValueError,
      "cu_seqlens[2]=17 < cu_seqlens[1]=20: offsets must be non-decreasing");
  ExpectPyError(PrepareFlashinferCudnnMetadata(Cu({5, 9}), kCuda, 8, Mode::kHardened).status(),
                PyErrorKind::kValueError, "cu_seqlens[0]=5: token offsets must start at 0");
  ExpectPyError(PrepareFlashinferCudnnMetadata(Cu({0, 9}), kCuda, 0, Mode::kHardened).status(),
                PyErrorKind::kValueError,
                "elem_per_token=0: it must be positive (heads_per_rank * head_dim)");
}

TEST(FlashinferBuilderHardened, RejectsNonTensorCu) {
  ExpectPyError(PrepareFlashinferCudnnMetadata(Value::None(), kCuda, 8, Mode::kHardened).status(),
                PyErrorKind::kTypeError,
                "cu_seqlens=None is a NoneType: the metadata builders need an integer tensor");
}

}  // namespace
}  // namespace varlen
