// Tests for Tensor: construction, views, element access, host reads, printing.

#include "varlen/core/tensor.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/dtype.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                DType::kInt32,   DType::kInt64,   DType::kBool,     DType::kInt16};

// ---------------------------------------------------------------------------
// Shape helpers

TEST(ShapeTest, Numel) {
  EXPECT_EQ(ShapeNumel({}), 1);
  EXPECT_EQ(ShapeNumel({0}), 0);
  EXPECT_EQ(ShapeNumel({7}), 7);
  EXPECT_EQ(ShapeNumel({2, 3, 4}), 24);
  EXPECT_EQ(ShapeNumel({5, 0, 3}), 0);
  EXPECT_EQ(ShapeNumel({2000000, 16, 72}), int64_t{2304000000});  // beyond int32
}

TEST(ShapeTest, ToString) {
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({5}), "[5]");
  EXPECT_EQ(ShapeToString({2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(ShapeToString({2000000, 16, 72}), "[2000000, 16, 72]");
}

TEST(ShapeTest, ContiguousStrides) {
  EXPECT_THAT(ContiguousStrides({}), IsEmpty());
  EXPECT_THAT(ContiguousStrides({5}), ElementsAre(1));
  EXPECT_THAT(ContiguousStrides({2, 3, 4}), ElementsAre(12, 4, 1));
  EXPECT_THAT(ContiguousStrides({0, 3}), ElementsAre(3, 1));
  EXPECT_THAT(ContiguousStrides({2000000, 16, 72}), ElementsAre(1152, 72, 1));
}

// ---------------------------------------------------------------------------
// Construction

TEST(TensorTest, DefaultIsUndefined) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_FALSE(t.has_storage());
  EXPECT_EQ(t.DebugString(), "<undefined tensor>");
}

// The k and v column views of a fused projection of no tokens start past
// the end of the empty storage: nothing of it is theirs (a negative extent
// once made the cuda backend ask cudaMalloc for 2^64 - 640 bytes).
TEST(TensorTest, AnEmptyViewPastTheEndOfAnEmptyStorageHasExtentZero) {
  const Tensor fused = Tensor::Zeros(DType::kFloat32, Device::kCuda, {0, 4, 80});
  const Tensor k = fused.AsStrided({0, 1, 80}, {320, 80, 1}, 160);
  EXPECT_EQ(k.numel(), 0);
  EXPECT_EQ(k.extent(), 0);
  const Tensor wide = Tensor::Zeros(DType::kFloat32, Device::kCuda, {2, 4, 80});
  EXPECT_EQ(wide.AsStrided({2, 1, 80}, {320, 80, 1}, 160).extent(), 2 * 320 - 160);
}

TEST(TensorTest, ZerosForEveryDType) {
  for (DType dtype : kAllDTypes) {
    const Tensor t = Tensor::Zeros(dtype, Device::kCuda, {2, 3});
    EXPECT_TRUE(t.defined());
    EXPECT_TRUE(t.has_storage());
    EXPECT_EQ(t.dtype(), dtype);
    EXPECT_EQ(t.device(), Device::kCuda);
    EXPECT_THAT(t.shape(), ElementsAre(2, 3));
    EXPECT_THAT(t.strides(), ElementsAre(3, 1));
    EXPECT_EQ(t.dim(), 2);
    EXPECT_EQ(t.numel(), 6);
    EXPECT_TRUE(t.is_contiguous());
    for (int64_t i = 0; i < t.numel(); ++i) {
      EXPECT_EQ(t.DoubleAt(i), 0.0) << DTypeName(dtype);
      EXPECT_FALSE(std::signbit(t.DoubleAt(i))) << DTypeName(dtype);
    }
  }
}

TEST(TensorTest, ZerosWithNoElementsAndZeroDim) {
  const Tensor empty = Tensor::Zeros(DType::kInt32, Device::kCpu, {0});
  EXPECT_TRUE(empty.has_storage());
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.dim(), 1);

  const Tensor scalar = Tensor::Zeros(DType::kFloat64, Device::kCpu, {});
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_THAT(scalar.strides(), IsEmpty());
  EXPECT_EQ(scalar.DoubleAt(0), 0.0);
}

TEST(TensorTest, SizeAcceptsNegativeDims) {
  const Tensor t = Tensor::Zeros(DType::kFloat16, Device::kCpu, {4, 8, 64});
  EXPECT_EQ(t.size(0), 4);
  EXPECT_EQ(t.size(2), 64);
  EXPECT_EQ(t.size(-1), 64);
  EXPECT_EQ(t.size(-3), 4);
}

TEST(TensorTest, ShapeOnlyHasNoStorageButExactShape) {
  const Tensor q = Tensor::ShapeOnly(DType::kBFloat16, Device::kCuda, {2000000, 16, 72});
  EXPECT_TRUE(q.defined());
  EXPECT_FALSE(q.has_storage());
  EXPECT_EQ(q.dtype(), DType::kBFloat16);
  EXPECT_EQ(q.device(), Device::kCuda);
  EXPECT_EQ(q.numel(), int64_t{2304000000});
  EXPECT_EQ(q.size(0), 2000000);
  EXPECT_EQ(q.size(-1), 72);
  EXPECT_THAT(q.strides(), ElementsAre(1152, 72, 1));
  EXPECT_TRUE(q.is_contiguous());
  EXPECT_FALSE(q.SharesStorageWith(q));  // nothing to share
}

TEST(TensorTest, ShapeOnlyReshapeKeepsExactNumel) {
  const Tensor q = Tensor::ShapeOnly(DType::kFloat16, Device::kCuda, {2000000, 16, 72});
  const Tensor flat = q.Reshape({-1});
  EXPECT_FALSE(flat.has_storage());
  EXPECT_THAT(flat.shape(), ElementsAre(int64_t{2304000000}));
  const Tensor per_token = q.Reshape({2000000, -1});
  EXPECT_THAT(per_token.shape(), ElementsAre(2000000, 1152));
}

TEST(TensorTest, FromIntsDefaultsToOneDim) {
  const Tensor t = Tensor::FromInts({0, 480, 1200}, DType::kInt32, Device::kCuda);
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_EQ(t.device(), Device::kCuda);
  EXPECT_THAT(t.shape(), ElementsAre(3));
  EXPECT_EQ(t.IntAt(0), 0);
  EXPECT_EQ(t.IntAt(1), 480);
  EXPECT_EQ(t.IntAt(2), 1200);
}

TEST(TensorTest, FromIntsEmpty) {
  const Tensor t = Tensor::FromInts({}, DType::kInt64, Device::kCpu);
  EXPECT_THAT(t.shape(), ElementsAre(0));
  EXPECT_EQ(t.numel(), 0);
}

TEST(TensorTest, FromIntsZeroDimWhenShapeIsEmpty) {
  const Tensor t = Tensor::FromInts({4096}, DType::kInt64, Device::kCpu, Shape{});
  EXPECT_EQ(t.dim(), 0);
  EXPECT_THAT(t.shape(), IsEmpty());
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.IntAt(0), 4096);
}

TEST(TensorTest, FromIntsWithExplicitShape) {
  const Tensor t = Tensor::FromInts({1, 2, 3, 4, 5, 6}, DType::kInt64, Device::kCpu, Shape{2, 3});
  EXPECT_THAT(t.shape(), ElementsAre(2, 3));
  EXPECT_THAT(t.strides(), ElementsAre(3, 1));
  EXPECT_EQ(t.IntAt(5), 6);
}

TEST(TensorTest, FromIntsInt32KeepsTheLow32Bits) {
  const int64_t two31 = int64_t{1} << 31;
  const Tensor t = Tensor::FromInts(
      {two31, -two31 - 1, int64_t{1} << 32, (int64_t{1} << 32) + 7,
       std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), -1},
      DType::kInt32, Device::kCpu);
  EXPECT_EQ(t.IntAt(0), -two31);
  EXPECT_EQ(t.IntAt(1), two31 - 1);
  EXPECT_EQ(t.IntAt(2), 0);
  EXPECT_EQ(t.IntAt(3), 7);
  EXPECT_EQ(t.IntAt(4), -1);
  EXPECT_EQ(t.IntAt(5), 0);
  EXPECT_EQ(t.IntAt(6), -1);
}

TEST(TensorTest, FromIntsInt64KeepsEveryValue) {
  const Tensor t = Tensor::FromInts(
      {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), int64_t{1} << 31},
      DType::kInt64, Device::kCpu);
  EXPECT_EQ(t.IntAt(0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.IntAt(1), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.IntAt(2), int64_t{1} << 31);
}

TEST(TensorTest, FromIntsBoolStoresTruthiness) {
  const Tensor t = Tensor::FromInts({0, 1, 2, -1, 256}, DType::kBool, Device::kCpu);
  EXPECT_EQ(t.IntAt(0), 0);
  EXPECT_EQ(t.IntAt(1), 1);
  EXPECT_EQ(t.IntAt(2), 1);
  EXPECT_EQ(t.IntAt(3), 1);
  EXPECT_EQ(t.IntAt(4), 1);  // not the low byte
}

TEST(TensorTest, FromIntsIntoFloatDTypesRounds) {
  const Tensor f16 = Tensor::FromInts({2049, 65504, 70000}, DType::kFloat16, Device::kCpu);
  EXPECT_EQ(f16.DoubleAt(0), 2048.0);
  EXPECT_EQ(f16.DoubleAt(1), 65504.0);
  EXPECT_EQ(f16.DoubleAt(2), std::numeric_limits<double>::infinity());
  const Tensor f32 = Tensor::FromInts({16777217}, DType::kFloat32, Device::kCpu);
  EXPECT_EQ(f32.DoubleAt(0), 16777216.0);
}

TEST(TensorTest, FromDoublesRoundsOnceToTheDType) {
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);  // just above a midpoint
  const Tensor f16 = Tensor::FromDoubles({0.1, x, -0.0, 1e6}, DType::kFloat16, Device::kCpu);
  EXPECT_EQ(f16.DoubleAt(0), 0.0999755859375);
  EXPECT_EQ(f16.DoubleAt(1), 1.0 + std::ldexp(1.0, -10));
  EXPECT_TRUE(std::signbit(f16.DoubleAt(2)));
  EXPECT_EQ(f16.DoubleAt(3), std::numeric_limits<double>::infinity());
  EXPECT_EQ(f16.data<uint16_t>()[1], 0x3c01);

  const Tensor bf16 = Tensor::FromDoubles({0.1, 65504.0}, DType::kBFloat16, Device::kCpu);
  EXPECT_EQ(bf16.DoubleAt(0), 0.10009765625);
  EXPECT_EQ(bf16.DoubleAt(1), 65536.0);
  EXPECT_EQ(bf16.data<uint16_t>()[0], 0x3dcd);

  const Tensor f32 = Tensor::FromDoubles({0.1}, DType::kFloat32, Device::kCpu);
  EXPECT_EQ(f32.DoubleAt(0), 0.100000001490116119384765625);
  EXPECT_EQ(f32.data<float>()[0], 0.1f);

  const Tensor f64 = Tensor::FromDoubles({0.1, 1e300}, DType::kFloat64, Device::kCpu);
  EXPECT_EQ(f64.DoubleAt(0), 0.1);
  EXPECT_EQ(f64.DoubleAt(1), 1e300);
}

TEST(TensorTest, FromDoublesKeepsNaNAndInfinity) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    const Tensor t = Tensor::FromDoubles({std::nan(""), inf, -inf}, dtype, Device::kCpu);
    EXPECT_TRUE(std::isnan(t.DoubleAt(0))) << DTypeName(dtype);
    EXPECT_EQ(t.DoubleAt(1), inf) << DTypeName(dtype);
    EXPECT_EQ(t.DoubleAt(2), -inf) << DTypeName(dtype);
  }
}

TEST(TensorTest, FromDoublesWithShape) {
  const Tensor scalar = Tensor::FromDoubles({2.5}, DType::kFloat32, Device::kCuda, Shape{});
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.DoubleAt(0), 2.5);
  const Tensor matrix =
      Tensor::FromDoubles({1, 2, 3, 4}, DType::kFloat64, Device::kCpu, Shape{2, 2});
  EXPECT_THAT(matrix.shape(), ElementsAre(2, 2));
  EXPECT_EQ(matrix.DoubleAt(3), 4.0);
}

// ---------------------------------------------------------------------------
// Views

TEST(TensorTest, ReshapeWithInferredDim) {
  const Tensor t =
      Tensor::FromInts({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, DType::kInt64, Device::kCpu);
  const Tensor a = t.Reshape({3, -1});
  EXPECT_THAT(a.shape(), ElementsAre(3, 4));
  EXPECT_THAT(a.strides(), ElementsAre(4, 1));
  const Tensor b = t.Reshape({-1, 2, 3});
  EXPECT_THAT(b.shape(), ElementsAre(2, 2, 3));
  EXPECT_THAT(b.strides(), ElementsAre(6, 3, 1));
  const Tensor c = a.Reshape({-1});
  EXPECT_THAT(c.shape(), ElementsAre(12));
  const Tensor d = t.Reshape({2, 6});
  EXPECT_THAT(d.shape(), ElementsAre(2, 6));
  EXPECT_EQ(d.IntAt(7), 7);
}

TEST(TensorTest, ReshapeToAndFromZeroDim) {
  const Tensor one = Tensor::FromInts({9}, DType::kInt32, Device::kCpu);
  const Tensor scalar = one.Reshape({});
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.IntAt(0), 9);
  EXPECT_THAT(scalar.Reshape({-1}).shape(), ElementsAre(1));
}

TEST(TensorTest, ReshapeSharesStorage) {
  const Tensor t = Tensor::Zeros(DType::kFloat32, Device::kCpu, {2, 3});
  const Tensor v = t.Reshape({6});
  EXPECT_TRUE(v.SharesStorageWith(t));
  EXPECT_TRUE(t.SharesStorageWith(v));
  v.SetDoubleAt(4, 2.5);
  EXPECT_EQ(t.DoubleAt(4), 2.5);
}

TEST(TensorTest, CopyingATensorSharesStorage) {
  const Tensor t = Tensor::FromInts({1, 2, 3}, DType::kInt32, Device::kCpu);
  const Tensor alias = t;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(alias.SharesStorageWith(t));
  alias.SetIntAt(0, 100);
  EXPECT_EQ(t.IntAt(0), 100);
}

TEST(TensorTest, SeparateTensorsDoNotShareStorage) {
  const Tensor a = Tensor::FromInts({1, 2, 3}, DType::kInt32, Device::kCpu);
  const Tensor b = Tensor::FromInts({1, 2, 3}, DType::kInt32, Device::kCpu);
  EXPECT_FALSE(a.SharesStorageWith(b));
  EXPECT_FALSE(a.SharesStorageWith(Tensor()));
  EXPECT_FALSE(Tensor().SharesStorageWith(Tensor()));
}

TEST(TensorTest, SliceIsAFlatViewSharingStorage) {
  const Tensor t =
      Tensor::FromInts({10, 11, 12, 13, 14, 15}, DType::kInt64, Device::kCuda, Shape{2, 3});
  const Tensor s = t.Slice(2, 5);
  EXPECT_THAT(s.shape(), ElementsAre(3));
  EXPECT_THAT(s.strides(), ElementsAre(1));
  EXPECT_EQ(s.dtype(), DType::kInt64);
  EXPECT_EQ(s.device(), Device::kCuda);
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(s.IntAt(0), 12);
  EXPECT_EQ(s.IntAt(2), 14);
  // A write through the view is seen by the base tensor, and back.
  s.SetIntAt(1, -7);
  EXPECT_EQ(t.IntAt(3), -7);
  t.SetIntAt(4, 99);
  EXPECT_EQ(s.IntAt(2), 99);
}

TEST(TensorTest, SharesStorageWithComparesTheOffset) {
  const Tensor t = Tensor::FromInts({0, 1, 2, 3}, DType::kInt32, Device::kCpu);
  EXPECT_TRUE(t.Slice(0, 4).SharesStorageWith(t));
  EXPECT_TRUE(t.Slice(0, 2).SharesStorageWith(t));
  EXPECT_FALSE(t.Slice(1, 4).SharesStorageWith(t));
  EXPECT_TRUE(t.Slice(1, 4).SharesStorageWith(t.Slice(1, 3)));
}

TEST(TensorTest, SliceOfASliceAndEmptySlice) {
  const Tensor t = Tensor::FromInts({0, 1, 2, 3, 4, 5, 6, 7}, DType::kInt32, Device::kCpu);
  const Tensor inner = t.Slice(2, 7).Slice(1, 3);
  EXPECT_THAT(inner.shape(), ElementsAre(2));
  EXPECT_EQ(inner.IntAt(0), 3);
  EXPECT_EQ(inner.IntAt(1), 4);
  EXPECT_THAT(inner.ToHostInts("x"), ElementsAre(3, 4));
  const Tensor empty = t.Slice(3, 3);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_THAT(empty.ToHostInts("x"), IsEmpty());
  // A reshape of a slice keeps the slice's offset.
  const Tensor grid = t.Slice(2, 8).Reshape({2, 3});
  EXPECT_EQ(grid.IntAt(0), 2);
  EXPECT_EQ(grid.IntAt(5), 7);
}

TEST(TensorTest, IsContiguousFollowsTorchsRule) {
  const Tensor t = Tensor::FromInts({0, 1, 2, 3, 4, 5}, DType::kInt32, Device::kCpu);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.AsStrided({3}, {2}, 0).is_contiguous());
  // A size-1 dimension's stride does not matter, nor do an empty tensor's.
  EXPECT_TRUE(t.AsStrided({1}, {5}, 1).is_contiguous());
  EXPECT_TRUE(t.AsStrided({3, 1}, {1, 7}, 0).is_contiguous());
  EXPECT_TRUE(t.AsStrided({0}, {3}, 0).is_contiguous());
  EXPECT_TRUE(t.AsStrided({2, 0}, {9, 9}, 0).is_contiguous());
  // Columns of a [3, 2] table are not.
  EXPECT_FALSE(t.AsStrided({3}, {2}, 1).is_contiguous());
  EXPECT_FALSE(t.AsStrided({2, 3}, {1, 2}, 0).is_contiguous());  // a transpose
}

TEST(TensorTest, LogicalReadsFollowTheStrides) {
  const Tensor t = Tensor::FromInts({0, 10, 20, 30, 40, 50}, DType::kInt64, Device::kCpu);
  const Tensor every_other = t.AsStrided({3}, {2}, 1);  // t[1::2]
  EXPECT_EQ(every_other.StorageIndex(0), 0);
  EXPECT_EQ(every_other.StorageIndex(2), 4);
  EXPECT_EQ(every_other.IntAtLogical(2), 50);
  EXPECT_EQ(every_other.DoubleAtLogical(1), 30.0);
  EXPECT_THAT(every_other.ToHostInts("x"), ElementsAre(10, 30, 50));
  EXPECT_THAT(every_other.ToHostDoubles("x"), ElementsAre(10.0, 30.0, 50.0));
  const Tensor transposed = t.AsStrided({3, 2}, {1, 3}, 0);  // [[0, 30], [10, 40], [20, 50]]
  EXPECT_EQ(transposed.StorageIndex(1), 3);
  EXPECT_THAT(transposed.ToHostInts("x"), ElementsAre(0, 30, 10, 40, 20, 50));
}

TEST(TensorTest, ContiguousCopiesAStridedViewAndKeepsADenseOne) {
  const Tensor t = Tensor::FromInts({0, 10, 20, 30, 40, 50}, DType::kInt32, Device::kCuda);
  EXPECT_TRUE(t.Contiguous().SharesStorageWith(t));
  const Tensor transposed = t.AsStrided({3, 2}, {1, 3}, 0);
  const Tensor dense = transposed.Contiguous();
  EXPECT_FALSE(dense.SharesStorageWith(t));
  EXPECT_TRUE(dense.is_contiguous());
  EXPECT_EQ(dense.device(), Device::kCuda);
  EXPECT_THAT(dense.shape(), ElementsAre(3, 2));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(dense.IntAt(i), transposed.IntAtLogical(i)) << i;
  // A copy, not a view: writes to the base are not seen.
  t.SetIntAt(0, -1);
  EXPECT_EQ(dense.IntAt(0), 0);
  // Shape-only tensors stay shape-only.
  const Tensor shape_only = Tensor::ShapeOnly(DType::kFloat16, Device::kCuda, {4, 2});
  EXPECT_FALSE(shape_only.AsStrided({2, 4}, {1, 2}, 0).Contiguous().has_storage());
}

TEST(TensorTest, ReshapeOfAStridedViewCopiesAndSliceKeepsTheStride) {
  const Tensor t = Tensor::FromInts({0, 1, 2, 3, 4, 5, 6, 7}, DType::kInt32, Device::kCpu);
  const Tensor evens = t.AsStrided({4}, {2}, 0);
  const Tensor grid = evens.Reshape({2, 2});
  EXPECT_FALSE(grid.SharesStorageWith(evens));
  EXPECT_THAT(grid.ToHostInts("x"), ElementsAre(0, 2, 4, 6));
  const Tensor tail = evens.Slice(1, 3);  // evens[1:3], still every other element
  EXPECT_THAT(tail.strides(), ElementsAre(2));
  EXPECT_FALSE(tail.is_contiguous());
  EXPECT_THAT(tail.ToHostInts("x"), ElementsAre(2, 4));
}

// ---------------------------------------------------------------------------
// Element access

TEST(TensorTest, Int32SetIntAtWraps) {
  const Tensor t = Tensor::Zeros(DType::kInt32, Device::kCpu, {3});
  t.SetIntAt(0, int64_t{1} << 31);
  t.SetIntAt(1, int64_t{2000000} * 1152);
  t.SetIntAt(2, -(int64_t{1} << 31) - 1);
  EXPECT_EQ(t.IntAt(0), -(int64_t{1} << 31));
  EXPECT_EQ(t.IntAt(1), -1990967296);
  EXPECT_EQ(t.IntAt(2), (int64_t{1} << 31) - 1);
  EXPECT_EQ(t.data<int32_t>()[1], -1990967296);
  EXPECT_EQ(t.DoubleAt(1), -1990967296.0);
}

TEST(TensorTest, Int16SetIntAtWraps) {
  const Tensor t = Tensor::FromInts({32767, 32768, -32769, 65536 + 5}, DType::kInt16, Device::kCpu);
  EXPECT_EQ(t.IntAt(0), 32767);
  EXPECT_EQ(t.IntAt(1), -32768);
  EXPECT_EQ(t.IntAt(2), 32767);
  EXPECT_EQ(t.IntAt(3), 5);
  EXPECT_EQ(t.data<int16_t>()[1], -32768);
  EXPECT_EQ(t.DoubleAt(2), 32767.0);
  // Out-of-range floats: torch's CPU cast goes through int32 and keeps the
  // low 16 bits; CUDA's saturates.
  const Tensor cpu = Tensor::Zeros(DType::kInt16, Device::kCpu, {3});
  cpu.SetDoubleAt(0, 40000.0);
  cpu.SetDoubleAt(1, 3e9);
  cpu.SetDoubleAt(2, -7.9);
  EXPECT_EQ(cpu.IntAt(0), -25536);
  EXPECT_EQ(cpu.IntAt(1), 0);
  EXPECT_EQ(cpu.IntAt(2), -7);
  const Tensor cuda = Tensor::Zeros(DType::kInt16, Device::kCuda, {2});
  cuda.SetDoubleAt(0, 40000.0);
  cuda.SetDoubleAt(1, std::nan(""));
  EXPECT_EQ(cuda.IntAt(0), 32767);
  EXPECT_EQ(cuda.IntAt(1), 0);
}

TEST(TensorTest, Int64AndBoolAccess) {
  const Tensor i64 = Tensor::Zeros(DType::kInt64, Device::kCpu, {2});
  i64.SetIntAt(0, int64_t{1} << 40);
  i64.SetDoubleAt(1, -3.9);  // truncates toward zero
  EXPECT_EQ(i64.IntAt(0), int64_t{1} << 40);
  EXPECT_EQ(i64.IntAt(1), -3);
  EXPECT_EQ(i64.DoubleAt(0), std::ldexp(1.0, 40));

  const Tensor b = Tensor::Zeros(DType::kBool, Device::kCpu, {3});
  b.SetIntAt(0, 5);
  b.SetDoubleAt(1, 0.0);
  b.SetDoubleAt(2, 2.0);
  EXPECT_EQ(b.IntAt(0), 1);
  EXPECT_EQ(b.IntAt(1), 0);
  EXPECT_EQ(b.IntAt(2), 1);
  EXPECT_EQ(b.DoubleAt(0), 1.0);
  EXPECT_EQ(b.data<uint8_t>()[0], 1);
}

TEST(TensorTest, Int32SetDoubleAtTruncatesTowardZero) {
  const Tensor t = Tensor::Zeros(DType::kInt32, Device::kCpu, {4});
  t.SetDoubleAt(0, 2.9);
  t.SetDoubleAt(1, -2.9);
  t.SetDoubleAt(2, 0.5);
  t.SetDoubleAt(3, 1e6);
  EXPECT_EQ(t.IntAt(0), 2);
  EXPECT_EQ(t.IntAt(1), -2);
  EXPECT_EQ(t.IntAt(2), 0);
  EXPECT_EQ(t.IntAt(3), 1000000);
}

TEST(TensorTest, FloatDTypesRoundOnWriteAndReadBackExactly) {
  struct Case {
    DType dtype;
    double written;
    double read;
  };
  const Case cases[] = {
      {DType::kFloat32, 0.1, 0.100000001490116119384765625},
      {DType::kFloat16, 0.1, 0.0999755859375},
      {DType::kBFloat16, 0.1, 0.10009765625},
      {DType::kFloat64, 0.1, 0.1},
      {DType::kFloat16, 65520.0, std::numeric_limits<double>::infinity()},
      {DType::kBFloat16, 257.0, 256.0},
  };
  for (const Case& c : cases) {
    const Tensor t = Tensor::Zeros(c.dtype, Device::kCpu, {1});
    t.SetDoubleAt(0, c.written);
    EXPECT_EQ(t.DoubleAt(0), c.read) << DTypeName(c.dtype) << " " << c.written;
  }
}

TEST(TensorTest, FloatDTypesIntAccess) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    const Tensor t = Tensor::Zeros(dtype, Device::kCpu, {3});
    t.SetIntAt(0, 7);
    t.SetDoubleAt(1, 5.75);
    t.SetDoubleAt(2, -5.75);
    EXPECT_EQ(t.DoubleAt(0), 7.0) << DTypeName(dtype);
    EXPECT_EQ(t.IntAt(0), 7) << DTypeName(dtype);
    EXPECT_EQ(t.IntAt(1), 5) << DTypeName(dtype);  // truncates toward zero
    EXPECT_EQ(t.IntAt(2), -5) << DTypeName(dtype);
  }
  const Tensor f16 = Tensor::Zeros(DType::kFloat16, Device::kCpu, {1});
  f16.SetIntAt(0, 2049);  // rounds to the dtype
  EXPECT_EQ(f16.IntAt(0), 2048);
}

TEST(TensorTest, DataPointsAtTheRawElements) {
  const Tensor t = Tensor::FromDoubles({1.0, -2.0}, DType::kFloat16, Device::kCpu);
  EXPECT_EQ(t.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(t.data<uint16_t>()[1], 0xc000);
  t.mutable_data<uint16_t>()[1] = 0x7bff;
  EXPECT_EQ(t.DoubleAt(1), 65504.0);
}

// ---------------------------------------------------------------------------
// Host reads

TEST(TensorTest, ToHostIntsOnCudaRecordsExactlyOneHostSync) {
  const Tensor t = Tensor::FromInts({0, 480, 1200}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  EXPECT_THAT(t.ToHostInts("cu_seqlens.tolist()"), ElementsAre(0, 480, 1200));
  EXPECT_THAT(ledger.events(),
              ElementsAre(DeviceEvent{DeviceEventKind::kHostSync, "cu_seqlens.tolist()"}));
}

TEST(TensorTest, ToHostDoublesOnCudaRecordsExactlyOneHostSync) {
  const Tensor t = Tensor::FromDoubles({0.5, -1.5}, DType::kBFloat16, Device::kCuda);
  ScopedDeviceLedger ledger;
  EXPECT_THAT(t.ToHostDoubles("x.tolist()"), ElementsAre(0.5, -1.5));
  EXPECT_THAT(ledger.events(), ElementsAre(DeviceEvent{DeviceEventKind::kHostSync, "x.tolist()"}));
}

TEST(TensorTest, HostReadsOfACpuTensorRecordNothing) {
  const Tensor t = Tensor::FromInts({3, 4}, DType::kInt64, Device::kCpu);
  ScopedDeviceLedger ledger;
  EXPECT_THAT(t.ToHostInts("a"), ElementsAre(3, 4));
  EXPECT_THAT(t.ToHostDoubles("b"), ElementsAre(3.0, 4.0));
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(TensorTest, EachHostReadIsItsOwnSync) {
  const Tensor t = Tensor::FromInts({1}, DType::kInt64, Device::kCuda);
  ScopedDeviceLedger ledger;
  t.ToHostInts("first");
  t.ToHostDoubles("second");
  t.ToHostInts("third");
  EXPECT_EQ(ledger.counts().host_syncs, 3);
  EXPECT_EQ(ledger.events().size(), 3u);
}

TEST(TensorTest, DeviceSideAccessRecordsNothing) {
  const Tensor t = Tensor::FromInts({1, 2}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  t.IntAt(0);
  t.DoubleAt(1);
  t.SetIntAt(0, 5);
  t.SetDoubleAt(1, 6.0);
  EXPECT_EQ(t.data<int32_t>()[0], 5);
  t.Reshape({2, 1});
  t.Slice(0, 1);
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(TensorTest, ToHostIntsReadsInRowMajorOrderForEveryDType) {
  for (DType dtype : kAllDTypes) {
    const Tensor t = Tensor::FromInts({1, 0, 1, 1}, dtype, Device::kCpu, Shape{2, 2});
    EXPECT_THAT(t.ToHostInts("x"), ElementsAre(1, 0, 1, 1)) << DTypeName(dtype);
    EXPECT_THAT(t.ToHostDoubles("x"), ElementsAre(1.0, 0.0, 1.0, 1.0)) << DTypeName(dtype);
  }
}

// ---------------------------------------------------------------------------
// DebugString

TEST(TensorDebugStringTest, OneDimInts) {
  EXPECT_EQ(Tensor::FromInts({0, 480, 1200}, DType::kInt32, Device::kCuda).DebugString(),
            "tensor([0, 480, 1200], dtype=int32, device=cuda)");
  EXPECT_EQ(Tensor::FromInts({-5}, DType::kInt64, Device::kCpu).DebugString(),
            "tensor([-5], dtype=int64, device=cpu)");
  EXPECT_EQ(Tensor::FromInts({}, DType::kInt32, Device::kCpu).DebugString(),
            "tensor([], dtype=int32, device=cpu)");
  EXPECT_EQ(Tensor::FromInts({1, 0}, DType::kBool, Device::kCpu).DebugString(),
            "tensor([1, 0], dtype=bool, device=cpu)");
}

TEST(TensorDebugStringTest, Floats) {
  EXPECT_EQ(Tensor::FromDoubles({0.5, -2.25}, DType::kFloat32, Device::kCpu).DebugString(),
            "tensor([0.5, -2.25], dtype=float32, device=cpu)");
  EXPECT_EQ(Tensor::FromDoubles({1.0}, DType::kBFloat16, Device::kCuda).DebugString(),
            "tensor([1], dtype=bfloat16, device=cuda)");
}

TEST(TensorDebugStringTest, OtherRanksPrintTheShape) {
  EXPECT_EQ(Tensor::FromInts({7}, DType::kInt64, Device::kCuda, Shape{}).DebugString(),
            "tensor([7], shape=[], dtype=int64, device=cuda)");
  EXPECT_EQ(
      Tensor::FromInts({1, 2, 3, 4, 5, 6}, DType::kInt32, Device::kCpu, Shape{2, 3}).DebugString(),
      "tensor([1, 2, 3, 4, 5, 6], shape=[2, 3], dtype=int32, device=cpu)");
}

TEST(TensorDebugStringTest, ShapeOnlyPrintsTheShape) {
  EXPECT_EQ(Tensor::ShapeOnly(DType::kBFloat16, Device::kCuda, {2000000, 16, 72}).DebugString(),
            "tensor(shape=[2000000, 16, 72], dtype=bfloat16, device=cuda)");
}

TEST(TensorDebugStringTest, TwelveElementsAreAllShown) {
  std::vector<int64_t> values(12);
  for (int i = 0; i < 12; ++i) values[static_cast<size_t>(i)] = i;
  EXPECT_EQ(Tensor::FromInts(values, DType::kInt64, Device::kCpu).DebugString(),
            "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], dtype=int64, device=cpu)");
}

TEST(TensorDebugStringTest, LongTensorsAreElidedInTheMiddle) {
  std::vector<int64_t> values(13);
  for (int i = 0; i < 13; ++i) values[static_cast<size_t>(i)] = i;
  EXPECT_EQ(Tensor::FromInts(values, DType::kInt64, Device::kCpu).DebugString(),
            "tensor([0, 1, 2, 3, 4, 5, ..., 7, 8, 9, 10, 11, 12], dtype=int64, device=cpu)");

  std::vector<int64_t> many(1000);
  for (int i = 0; i < 1000; ++i) many[static_cast<size_t>(i)] = 10 * i;
  EXPECT_EQ(Tensor::FromInts(many, DType::kInt32, Device::kCuda).DebugString(),
            "tensor([0, 10, 20, 30, 40, 50, ..., 9940, 9950, 9960, 9970, 9980, 9990], "
            "dtype=int32, device=cuda)");
}

TEST(TensorDebugStringTest, RecordsNoHostSync) {
  const Tensor t = Tensor::FromInts({1, 2, 3}, DType::kInt32, Device::kCuda);
  ScopedDeviceLedger ledger;
  t.DebugString();
  EXPECT_THAT(ledger.events(), IsEmpty());
}

}  // namespace
}  // namespace varlen
