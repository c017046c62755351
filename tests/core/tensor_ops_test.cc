// Tests for the internal torch-like tensor operations and their device effects.

#include "core/tensor_ops.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"
#include "varlen/core/tensor.h"
#include "varlen/core/value.h"

namespace varlen::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::varlen::test::ExpectPyError;

constexpr int64_t kTwo31 = int64_t{1} << 31;

DeviceEvent Event(DeviceEventKind kind, const char* what) { return {kind, what}; }

// ---------------------------------------------------------------------------
// To

TEST(ToTest, NoChangeReturnsTheSameTensorAndRecordsNothing) {
  const Tensor t = Tensor::FromInts({0, 4, 9}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor same = To(t, Device::kCuda, DType::kInt32, "cu_seqlens.to(q.device)");
  EXPECT_TRUE(same.SharesStorageWith(t));
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(ToTest, CastRecordsOneCastAndMakesANewTensor) {
  const Tensor t = Tensor::FromInts({0, 4, 9}, DType::kInt64, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor cast = To(t, Device::kCuda, DType::kInt32, "cu_seqlens.to(torch.int32)");
  EXPECT_FALSE(cast.SharesStorageWith(t));
  EXPECT_EQ(cast.dtype(), DType::kInt32);
  EXPECT_EQ(cast.device(), Device::kCuda);
  EXPECT_THAT(cast.shape(), ElementsAre(3));
  EXPECT_EQ(cast.IntAt(2), 9);
  EXPECT_THAT(ledger.events(),
              ElementsAre(Event(DeviceEventKind::kCast, "cu_seqlens.to(torch.int32)")));
}

TEST(ToTest, Int64ToInt32Wraps) {
  const Tensor t = Tensor::FromInts({kTwo31, kTwo31 + 5, -kTwo31 - 1, int64_t{1} << 32},
                                    DType::kInt64, Device::kCpu);
  const Tensor cast = To(t, Device::kCpu, DType::kInt32, "x");
  EXPECT_EQ(cast.IntAt(0), -kTwo31);
  EXPECT_EQ(cast.IntAt(1), -kTwo31 + 5);
  EXPECT_EQ(cast.IntAt(2), kTwo31 - 1);
  EXPECT_EQ(cast.IntAt(3), 0);
}

TEST(ToTest, CpuToCudaRecordsOnlyAHostToDeviceCopy) {
  const Tensor t = Tensor::FromInts({0, 4, 9}, DType::kInt32, Device::kCpu);
  ScopedDeviceLedger ledger;
  const Tensor moved = To(t, Device::kCuda, DType::kInt32, "cu_seqlens.cuda()");
  EXPECT_EQ(moved.device(), Device::kCuda);
  EXPECT_EQ(moved.dtype(), DType::kInt32);
  EXPECT_FALSE(moved.SharesStorageWith(t));
  EXPECT_THAT(ledger.events(),
              ElementsAre(Event(DeviceEventKind::kHostToDeviceCopy, "cu_seqlens.cuda()")));
  EXPECT_EQ(moved.IntAt(2), 9);
}

TEST(ToTest, CudaToCpuRecordsADeviceToHostCopyAndAHostSync) {
  const Tensor t = Tensor::FromInts({0, 4, 9}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor moved = To(t, Device::kCpu, DType::kInt32, "cu_seqlens.cpu()");
  EXPECT_EQ(moved.device(), Device::kCpu);
  EXPECT_THAT(moved.ToHostInts("check"), ElementsAre(0, 4, 9));  // cpu: no event
  EXPECT_THAT(ledger.events(),
              ElementsAre(Event(DeviceEventKind::kDeviceToHostCopy, "cu_seqlens.cpu()"),
                          Event(DeviceEventKind::kHostSync, "cu_seqlens.cpu()")));
  DeviceEventCounts expected;
  expected.host_syncs = 1;
  expected.device_to_host_copies = 1;
  EXPECT_EQ(ledger.counts(), expected);
}

TEST(ToTest, CastAndMoveRecordBoth) {
  const Tensor t = Tensor::FromInts({0, 7}, DType::kInt64, Device::kCpu);
  ScopedDeviceLedger ledger;
  const Tensor moved = To(t, Device::kCuda, DType::kInt32, "to(cuda, int32)");
  EXPECT_EQ(moved.device(), Device::kCuda);
  EXPECT_EQ(moved.dtype(), DType::kInt32);
  DeviceEventCounts expected;
  expected.casts = 1;
  expected.host_to_device_copies = 1;
  EXPECT_EQ(ledger.counts(), expected);
}

TEST(ToTest, FloatConversions) {
  const Tensor f = Tensor::FromDoubles({5.9, -5.9, 0.1}, DType::kFloat64, Device::kCpu);
  const Tensor as_int = To(f, Device::kCpu, DType::kInt64, "x");
  EXPECT_THAT(as_int.ToHostInts("x"), ElementsAre(5, -5, 0));  // truncation toward zero
  const Tensor as_half = To(f, Device::kCpu, DType::kFloat16, "x");
  EXPECT_EQ(as_half.DoubleAt(2), 0.0999755859375);
  const Tensor i = Tensor::FromInts({2049, -3}, DType::kInt32, Device::kCpu);
  const Tensor as_float = To(i, Device::kCpu, DType::kFloat32, "x");
  EXPECT_THAT(as_float.ToHostDoubles("x"), ElementsAre(2049.0, -3.0));
  const Tensor as_bf16 = To(i, Device::kCpu, DType::kBFloat16, "x");
  EXPECT_EQ(as_bf16.DoubleAt(0), 2048.0);
}

TEST(ToTest, KeepsTheShape) {
  const Tensor t = Tensor::FromInts({1, 2, 3, 4, 5, 6}, DType::kInt64, Device::kCpu, Shape{2, 3});
  const Tensor cast = To(t, Device::kCuda, DType::kInt32, "x");
  EXPECT_THAT(cast.shape(), ElementsAre(2, 3));
  EXPECT_EQ(cast.IntAt(5), 6);
  const Tensor scalar = Tensor::FromInts({8}, DType::kInt64, Device::kCpu, Shape{});
  EXPECT_EQ(To(scalar, Device::kCpu, DType::kInt32, "x").dim(), 0);
}

TEST(ToTest, ShapeOnlyTensorsStayShapeOnlyAndStillRecord) {
  const Tensor q = Tensor::ShapeOnly(DType::kFloat16, Device::kCpu, {2000000, 16, 72});
  ScopedDeviceLedger ledger;
  const Tensor moved = To(q, Device::kCuda, DType::kBFloat16, "q.to(cuda, bfloat16)");
  EXPECT_FALSE(moved.has_storage());
  EXPECT_EQ(moved.numel(), int64_t{2304000000});
  EXPECT_EQ(moved.dtype(), DType::kBFloat16);
  EXPECT_EQ(moved.device(), Device::kCuda);
  EXPECT_EQ(ledger.counts().casts, 1);
  EXPECT_EQ(ledger.counts().host_to_device_copies, 1);
}

// ---------------------------------------------------------------------------
// Diff

TEST(DiffTest, DifferencesInTheSameDTypeAndDevice) {
  const Tensor cu = Tensor::FromInts({0, 480, 1200, 1200, 1500}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor d = Diff(cu);
  EXPECT_EQ(d.dtype(), DType::kInt32);
  EXPECT_EQ(d.device(), Device::kCuda);
  EXPECT_THAT(d.shape(), ElementsAre(4));
  EXPECT_THAT(ledger.events(), IsEmpty());
  EXPECT_THAT(d.ToHostInts("x"), ElementsAre(480, 720, 0, 300));
}

TEST(DiffTest, NegativeDifferencesAreKept) {
  const Tensor t = Tensor::FromInts({10, 4, 4}, DType::kInt64, Device::kCpu);
  EXPECT_THAT(Diff(t).ToHostInts("x"), ElementsAre(-6, 0));
}

TEST(DiffTest, Int32Wraps) {
  const Tensor t = Tensor::FromInts({-kTwo31, kTwo31 - 1, -kTwo31}, DType::kInt32, Device::kCpu);
  // (2^31 - 1) - (-2^31) = 2^32 - 1 wraps to -1; the reverse wraps to 1.
  EXPECT_THAT(Diff(t).ToHostInts("x"), ElementsAre(-1, 1));
}

TEST(DiffTest, Int64WrapsWithoutUndefinedBehaviour) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  const Tensor t = Tensor::FromInts({min, max}, DType::kInt64, Device::kCpu);
  EXPECT_THAT(Diff(t).ToHostInts("x"), ElementsAre(-1));
}

TEST(DiffTest, ShortInputs) {
  EXPECT_EQ(Diff(Tensor::FromInts({5}, DType::kInt32, Device::kCpu)).numel(), 0);
  const Tensor empty = Diff(Tensor::FromInts({}, DType::kInt64, Device::kCuda));
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_THAT(empty.shape(), ElementsAre(0));
  EXPECT_EQ(empty.dtype(), DType::kInt64);
}

TEST(DiffTest, Floats) {
  const Tensor t = Tensor::FromDoubles({0.5, 2.0, 1.25}, DType::kFloat32, Device::kCpu);
  EXPECT_THAT(Diff(t).ToHostDoubles("x"), ElementsAre(1.5, -0.75));
}

// SubtractShifted and WithoutLastRow: the engines' cu[1:] - cu[:-1] and cu[:-1]

TEST(SubtractShiftedTest, IsDiffForNumbers) {
  const Tensor t = Tensor::FromInts({0, 3, 3, 7}, DType::kInt64, Device::kCuda);
  absl::StatusOr<Tensor> d = SubtractShifted(t);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->ToHostInts("x"), ElementsAre(3, 0, 4));
}

TEST(SubtractShiftedTest, TorchRefusesBoolAndZeroDim) {
  // torch 2.15: NotImplementedError from sub_check, even with nothing to subtract.
  for (const std::vector<int64_t>& values :
       {std::vector<int64_t>{0, 1, 1}, std::vector<int64_t>{}}) {
    ExpectPyError(SubtractShifted(Tensor::FromInts(values, DType::kBool, Device::kCuda)).status(),
                  PyErrorKind::kNotImplementedError,
                  "Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                  "`^` or `logical_xor()` operator instead.");
  }
  const Tensor zero_dim = Tensor::FromInts({4}, DType::kInt32, Device::kCpu).Reshape({});
  ExpectPyError(SubtractShifted(zero_dim).status(), PyErrorKind::kIndexError,
                "slice() cannot be applied to a 0-dim tensor.");
  ExpectPyError(WithoutLastRow(zero_dim).status(), PyErrorKind::kIndexError,
                "slice() cannot be applied to a 0-dim tensor.");
}

TEST(WithoutLastRowTest, KeepsTrailingDimensionsAndDType) {
  const Tensor t = Tensor::FromInts({0, 1, 1}, DType::kBool, Device::kCuda).Reshape({3, 1});
  absl::StatusOr<Tensor> rows = WithoutLastRow(t);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->shape(), ElementsAre(2, 1));
  EXPECT_EQ(rows->dtype(), DType::kBool);
  EXPECT_TRUE(rows->SharesStorageWith(t));
  absl::StatusOr<Tensor> none = WithoutLastRow(Tensor::FromInts({}, DType::kInt32, Device::kCpu));
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->shape(), ElementsAre(0));
}

// ---------------------------------------------------------------------------
// Max

TEST(MaxTest, ZeroDimResultOnTheSameDeviceWithoutSync) {
  const Tensor t = Tensor::FromInts({480, 1200, 0, 300}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  absl::StatusOr<Tensor> max = Max(t);
  ASSERT_TRUE(max.ok()) << FormatPythonError(max.status());
  EXPECT_THAT(ledger.events(), IsEmpty());
  EXPECT_EQ(max->dim(), 0);
  EXPECT_EQ(max->dtype(), DType::kInt32);
  EXPECT_EQ(max->device(), Device::kCuda);
  EXPECT_EQ(max->IntAt(0), 1200);
}

TEST(MaxTest, NegativeAndLargeValues) {
  absl::StatusOr<Tensor> max = Max(Tensor::FromInts({-5, -2, -9}, DType::kInt64, Device::kCpu));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->IntAt(0), -2);
  max = Max(Tensor::FromInts({int64_t{1} << 40, 3}, DType::kInt64, Device::kCpu));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->IntAt(0), int64_t{1} << 40);
  max = Max(Tensor::FromInts({7}, DType::kInt32, Device::kCpu, Shape{}));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->IntAt(0), 7);
}

TEST(MaxTest, Floats) {
  absl::StatusOr<Tensor> max =
      Max(Tensor::FromDoubles({0.5, 2.75, -1.0}, DType::kBFloat16, Device::kCuda));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->dtype(), DType::kBFloat16);
  EXPECT_EQ(max->DoubleAt(0), 2.75);
}

TEST(MaxTest, PropagatesNaNLikeTorch) {
  // torch.tensor([1., nan, 2.]).max() is nan, wherever the NaN sits.
  for (size_t nan_at = 0; nan_at < 3; ++nan_at) {
    std::vector<double> values = {1.0, 2.0, 0.5};
    values[nan_at] = std::nan("");
    absl::StatusOr<Tensor> max = Max(Tensor::FromDoubles(values, DType::kFloat32, Device::kCpu));
    ASSERT_TRUE(max.ok());
    EXPECT_TRUE(std::isnan(max->DoubleAt(0)))
        << "NaN at " << nan_at << ", got " << max->DoubleAt(0);
  }
}

TEST(MaxTest, EmptyInputRaisesTorchsRuntimeError) {
  ScopedDeviceLedger ledger;
  for (DType dtype : {DType::kInt32, DType::kInt64, DType::kFloat32}) {
    ExpectPyError(Max(Tensor::Zeros(dtype, Device::kCuda, {0})), PyErrorKind::kRuntimeError,
                  "max(): Expected reduction dim to be specified for input.numel() == 0. "
                  "Specify the reduction dim with the 'dim' argument.");
  }
  EXPECT_THAT(ledger.events(), IsEmpty());
}

// ---------------------------------------------------------------------------
// Item

TEST(ItemTest, IntTensorGivesAnIntWithOneSyncOnCuda) {
  const Tensor t = Tensor::FromInts({1200}, DType::kInt32, Device::kCuda, Shape{});
  ScopedDeviceLedger ledger;
  absl::StatusOr<Value> v = Item(t, "max_seqlen.item()");
  ASSERT_TRUE(v.ok()) << FormatPythonError(v.status());
  EXPECT_EQ(v->kind(), Value::Kind::kInt);
  EXPECT_EQ(v->as_int(), 1200);
  EXPECT_THAT(ledger.events(), ElementsAre(Event(DeviceEventKind::kHostSync, "max_seqlen.item()")));
}

TEST(ItemTest, CpuTensorNeedsNoSync) {
  ScopedDeviceLedger ledger;
  absl::StatusOr<Value> v = Item(Tensor::FromInts({-7}, DType::kInt64, Device::kCpu), "x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->kind(), Value::Kind::kInt);
  EXPECT_EQ(v->as_int(), -7);
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(ItemTest, FloatTensorGivesAFloat) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    absl::StatusOr<Value> v =
        Item(Tensor::FromDoubles({2.5}, dtype, Device::kCpu, Shape{1, 1}), "x");
    ASSERT_TRUE(v.ok()) << DTypeName(dtype);
    EXPECT_EQ(v->kind(), Value::Kind::kFloat) << DTypeName(dtype);
    EXPECT_EQ(v->as_float(), 2.5) << DTypeName(dtype);
  }
  absl::StatusOr<Value> rounded =
      Item(Tensor::FromDoubles({0.1}, DType::kFloat16, Device::kCpu), "x");
  ASSERT_TRUE(rounded.ok());
  EXPECT_EQ(rounded->as_float(), 0.0999755859375);
}

TEST(ItemTest, BoolTensorGivesABool) {
  absl::StatusOr<Value> t = Item(Tensor::FromInts({1}, DType::kBool, Device::kCuda), "x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind(), Value::Kind::kBool);
  EXPECT_TRUE(t->as_bool());
  absl::StatusOr<Value> f = Item(Tensor::FromInts({0}, DType::kBool, Device::kCpu), "x");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind(), Value::Kind::kBool);
  EXPECT_FALSE(f->as_bool());
}

TEST(ItemTest, WrongElementCountRaisesRuntimeErrorWithoutSync) {
  ScopedDeviceLedger ledger;
  ExpectPyError(Item(Tensor::FromInts({1, 2}, DType::kInt32, Device::kCuda), "x"),
                PyErrorKind::kRuntimeError,
                "a Tensor with 2 elements cannot be converted to Scalar");
  ExpectPyError(Item(Tensor::FromInts({}, DType::kInt64, Device::kCuda), "x"),
                PyErrorKind::kRuntimeError,
                "a Tensor with 0 elements cannot be converted to Scalar");
  ExpectPyError(Item(Tensor::Zeros(DType::kFloat32, Device::kCuda, {3, 4}), "x"),
                PyErrorKind::kRuntimeError,
                "a Tensor with 12 elements cannot be converted to Scalar");
  EXPECT_THAT(ledger.events(), IsEmpty());
}

// ---------------------------------------------------------------------------
// Cat

TEST(CatTest, ConcatenatesInOrderWithoutSync) {
  const Tensor a = Tensor::FromInts({0, 4}, DType::kInt32, Device::kCuda);
  const Tensor b = Tensor::FromInts({}, DType::kInt32, Device::kCuda);
  const Tensor c = Tensor::FromInts({9, 12, 20}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor out = Cat({a, b, c});
  EXPECT_THAT(ledger.events(), IsEmpty());
  EXPECT_EQ(out.dtype(), DType::kInt32);
  EXPECT_EQ(out.device(), Device::kCuda);
  EXPECT_THAT(out.shape(), ElementsAre(5));
  EXPECT_FALSE(out.SharesStorageWith(a));
  EXPECT_THAT(out.ToHostInts("x"), ElementsAre(0, 4, 9, 12, 20));
}

TEST(CatTest, SinglePartIsACopy) {
  const Tensor a = Tensor::FromInts({int64_t{1} << 40, -1}, DType::kInt64, Device::kCpu);
  const Tensor out = Cat({a});
  EXPECT_FALSE(out.SharesStorageWith(a));
  EXPECT_THAT(out.ToHostInts("x"), ElementsAre(int64_t{1} << 40, -1));
}

TEST(CatTest, OfSlices) {
  const Tensor t = Tensor::FromInts({0, 1, 2, 3, 4, 5}, DType::kInt64, Device::kCpu);
  EXPECT_THAT(Cat({t.Slice(4, 6), t.Slice(0, 2)}).ToHostInts("x"), ElementsAre(4, 5, 0, 1));
}

TEST(CatTest, KeepsFloatValues) {
  const Tensor a = Tensor::FromDoubles({1.5, -0.25}, DType::kFloat32, Device::kCpu);
  const Tensor b = Tensor::FromDoubles({2.75}, DType::kFloat32, Device::kCpu);
  const Tensor out = Cat({a, b});
  EXPECT_EQ(out.dtype(), DType::kFloat32);
  EXPECT_THAT(out.ToHostDoubles("x"), ElementsAre(1.5, -0.25, 2.75));
}

// ---------------------------------------------------------------------------
// MulScalar

TEST(MulScalarTest, Int32ProductWraps) {
  const Tensor t = Tensor::FromInts({2000000, 1, -3}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor out = MulScalar(t, 1152);
  EXPECT_THAT(ledger.events(), IsEmpty());
  EXPECT_EQ(out.dtype(), DType::kInt32);
  EXPECT_EQ(out.device(), Device::kCuda);
  EXPECT_THAT(out.ToHostInts("x"), ElementsAre(-1990967296, 1152, -3456));
}

TEST(MulScalarTest, Int64DoesNotWrapAtInt32) {
  const Tensor t = Tensor::FromInts({2000000, -2000000}, DType::kInt64, Device::kCpu);
  EXPECT_THAT(MulScalar(t, 1152).ToHostInts("x"),
              ElementsAre(int64_t{2304000000}, int64_t{-2304000000}));
}

TEST(MulScalarTest, Int64WrapsWithoutUndefinedBehaviour) {
  const Tensor t = Tensor::FromInts({int64_t{1} << 62}, DType::kInt64, Device::kCpu);
  EXPECT_THAT(MulScalar(t, 4).ToHostInts("x"), ElementsAre(0));
  EXPECT_THAT(MulScalar(t, 2).ToHostInts("x"), ElementsAre(std::numeric_limits<int64_t>::min()));
}

TEST(MulScalarTest, KeepsTheShape) {
  const Tensor t = Tensor::FromInts({1, 2, 3, 4}, DType::kInt32, Device::kCpu, Shape{2, 2});
  const Tensor out = MulScalar(t, -2);
  EXPECT_THAT(out.shape(), ElementsAre(2, 2));
  EXPECT_THAT(out.ToHostInts("x"), ElementsAre(-2, -4, -6, -8));
  EXPECT_FALSE(out.SharesStorageWith(t));
  EXPECT_EQ(MulScalar(t, 0).IntAt(3), 0);
}

TEST(MulScalarTest, FloatTensorsMultiplyInTheirDType) {
  const Tensor t = Tensor::FromDoubles({1.5, -0.25}, DType::kFloat32, Device::kCpu);
  const Tensor out = MulScalar(t, 2);
  EXPECT_EQ(out.dtype(), DType::kFloat32);
  EXPECT_THAT(out.ToHostDoubles("x"), ElementsAre(3.0, -0.5));
}

// ---------------------------------------------------------------------------
// Arange

TEST(ArangeTest, Ascending) {
  absl::StatusOr<Tensor> t = Arange(0, 10, 3, DType::kInt32, Device::kCuda);
  ASSERT_TRUE(t.ok()) << FormatPythonError(t.status());
  EXPECT_EQ(t->dtype(), DType::kInt32);
  EXPECT_EQ(t->device(), Device::kCuda);
  EXPECT_THAT(t->ToHostInts("x"), ElementsAre(0, 3, 6, 9));
  t = Arange(0, 9, 3, DType::kInt64, Device::kCpu);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->ToHostInts("x"), ElementsAre(0, 3, 6));  // end is exclusive
}

TEST(ArangeTest, Descending) {
  absl::StatusOr<Tensor> t = Arange(5, 0, -2, DType::kInt64, Device::kCpu);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->ToHostInts("x"), ElementsAre(5, 3, 1));
}

TEST(ArangeTest, EmptyRange) {
  absl::StatusOr<Tensor> t = Arange(5, 5, 1, DType::kInt32, Device::kCpu);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->shape(), ElementsAre(0));
}

TEST(ArangeTest, LargeStepInInt32Wraps) {
  // The values are computed in int64 and stored as int32 stores them.
  absl::StatusOr<Tensor> t = Arange(0, 3 * kTwo31, kTwo31, DType::kInt32, Device::kCpu);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->ToHostInts("x"), ElementsAre(0, -kTwo31, 0));
}

TEST(ArangeTest, ZeroStepRaisesRuntimeError) {
  ExpectPyError(Arange(0, 10, 0, DType::kInt32, Device::kCuda), PyErrorKind::kRuntimeError,
                "step must be nonzero");
  ExpectPyError(Arange(0, 0, 0, DType::kInt64, Device::kCpu), PyErrorKind::kRuntimeError,
                "step must be nonzero");
}

TEST(ArangeTest, RecordsNothing) {
  ScopedDeviceLedger ledger;
  ASSERT_TRUE(Arange(0, 4, 1, DType::kInt32, Device::kCuda).ok());
  EXPECT_THAT(ledger.events(), IsEmpty());
}

// ---------------------------------------------------------------------------
// PadTo

TEST(PadToTest, RepeatsTheFill) {
  const Tensor t = Tensor::FromInts({0, 4, 9}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  const Tensor out = PadTo(t, 6, 9);
  EXPECT_THAT(ledger.events(), IsEmpty());
  EXPECT_EQ(out.dtype(), DType::kInt32);
  EXPECT_EQ(out.device(), Device::kCuda);
  EXPECT_THAT(out.shape(), ElementsAre(6));
  EXPECT_THAT(out.ToHostInts("x"), ElementsAre(0, 4, 9, 9, 9, 9));
}

TEST(PadToTest, SameLengthIsACopy) {
  const Tensor t = Tensor::FromInts({1, 2}, DType::kInt64, Device::kCpu);
  const Tensor out = PadTo(t, 2, 0);
  EXPECT_FALSE(out.SharesStorageWith(t));
  EXPECT_THAT(out.ToHostInts("x"), ElementsAre(1, 2));
  out.SetIntAt(0, 100);
  EXPECT_EQ(t.IntAt(0), 1);
}

TEST(PadToTest, EmptyInputAndInt32FillWraps) {
  const Tensor empty = Tensor::FromInts({}, DType::kInt32, Device::kCpu);
  EXPECT_THAT(PadTo(empty, 3, -1).ToHostInts("x"), ElementsAre(-1, -1, -1));
  EXPECT_THAT(PadTo(empty, 2, kTwo31).ToHostInts("x"), ElementsAre(-kTwo31, -kTwo31));
  EXPECT_THAT(PadTo(empty, 0, 5).shape(), ElementsAre(0));
}

TEST(PadToTest, KeepsFloatValues) {
  const Tensor t = Tensor::FromDoubles({0.5, 1.25}, DType::kFloat32, Device::kCpu);
  const Tensor out = PadTo(t, 3, 2);
  EXPECT_THAT(out.ToHostDoubles("x"), ElementsAre(0.5, 1.25, 2.0));
}

}  // namespace
}  // namespace varlen::internal
