// The sdpa profile as torch 2.15 runs SGLang's VisionSdpaAttention on the
// CPU. Every message here was observed by running the real class under real
// torch (scripts/torch-sdpa-check automates the comparison).

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/resolve.h"

namespace varlen {
namespace {

using test::ExpectPyError;
using test::IntTensor;
using ::testing::ElementsAre;

constexpr Device kCuda = Device::kCuda;

AttentionCall Call(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dim, int64_t dim_v = -1,
                   DType dtype = DType::kBFloat16) {
  AttentionCall call;
  call.q = Tensor::Zeros(dtype, kCuda, {tokens, heads, dim});
  call.k = Tensor::Zeros(dtype, kCuda, {tokens, kv_heads, dim});
  call.v = Tensor::Zeros(dtype, kCuda, {tokens, kv_heads, dim_v < 0 ? dim : dim_v});
  call.seq_len = tokens;
  return call;
}

absl::Status Faithful(const AttentionCall& call) {
  return Resolve(call, Profile::kSdpa, Mode::kFaithful).status;
}

const SdpaArgs& ArgsOf(const Resolution& r) { return std::get<SdpaArgs>(r.args->args); }

TEST(SdpaTorchTest, PaddingMaskBatchAgainstOneItemFailsInPlace) {
  AttentionCall call = Call(40, 4, 4, 64);
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 16, 40}));
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "output with shape [1, 4, 40, 40] doesn't match the broadcast shape "
                "[2, 4, 40, 40]");
}

TEST(SdpaTorchTest, PaddingMaskBatchAgainstOtherItemsDoesNotBroadcast) {
  AttentionCall call = Call(24, 4, 4, 16);
  call.bsz = 3;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 3, 6, 9, 12, 15, 18, 21, 24}));
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "The size of tensor a (3) must match the size of tensor b (8) at non-singleton "
                "dimension 0");
  // The single-precision path adds the mask out of place: the same message.
  call.sdpa.softmax_in_single_precision = true;
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "The size of tensor a (3) must match the size of tensor b (8) at non-singleton "
                "dimension 0");
}

TEST(SdpaTorchTest, SinglePrecisionBroadcastsThenFailsTheOutputReshape) {
  AttentionCall call = Call(34, 4, 4, 16);
  call.sdpa.softmax_in_single_precision = true;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 10, 34}));
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "shape '[34, 4, 16]' is invalid for input of size 4352");
}

TEST(SdpaTorchTest, OneMaskItemBroadcastsToEveryBatchItem) {
  AttentionCall call = Call(36, 4, 4, 16);
  call.bsz = 3;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 5}));
  const Resolution r = Resolve(call, Profile::kSdpa, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_THAT(ArgsOf(r).kept, ElementsAre(5));
}

TEST(SdpaTorchTest, TokensThatDoNotSplitIntoItemsFailTheReshape) {
  AttentionCall call = Call(44, 2, 2, 16);
  call.bsz = 3;
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "shape '[3, 14, 2, 16]' is invalid for input of size 1408");
}

TEST(SdpaTorchTest, ValueHeadDimFailsTheValueReshape) {
  AttentionCall call = Call(34, 4, 4, 16, 8);
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 34}));
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "shape '[1, 34, 4, 16]' is invalid for input of size 1088");
}

TEST(SdpaTorchTest, KeyHeadsBroadcastOnlyWhenThereIsOne) {
  AttentionCall call = Call(34, 4, 2, 16);
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 34}));
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "The size of tensor a (4) must match the size of tensor b (2) at non-singleton "
                "dimension 1");
  EXPECT_TRUE(Faithful(Call(34, 4, 1, 16)).ok());  // one KV head broadcasts
}

TEST(SdpaTorchTest, EmptyItemsReturnBeforeAnyShapeCheck) {
  AttentionCall call = Call(0, 4, 2, 16);
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 0, 0}));
  EXPECT_TRUE(Faithful(call).ok());
  // The single-precision matmul still checks the heads.
  call.sdpa.softmax_in_single_precision = true;
  ExpectPyError(Faithful(call), PyErrorKind::kRuntimeError,
                "The size of tensor a (4) must match the size of tensor b (2) at non-singleton "
                "dimension 1");
}

TEST(SdpaTorchTest, TheMaskIsBuiltFromAOneDimensionalTuple) {
  AttentionCall call = Call(8, 2, 2, 16);
  call.cu_seqlens = Value::FromTensor(Tensor::FromInts({8}, DType::kInt32, kCuda, Shape{}));
  ExpectPyError(Faithful(call), PyErrorKind::kTypeError, "'int' object is not iterable");
  call.cu_seqlens = Value::FromTensor(Tensor::FromInts({0, 8}, DType::kInt32, kCuda, Shape{2, 1}));
  ExpectPyError(Faithful(call), PyErrorKind::kTypeError, "unhashable type: 'list'");
  call.cu_seqlens = Value::List({Value::Int(0), Value::Int(8)});
  ExpectPyError(Faithful(call), PyErrorKind::kAttributeError,
                "'list' object has no attribute 'cpu'");
  call.sdpa.flatten_batch = true;
  call.cu_seqlens = Value::FromTensor(Tensor::FromDoubles({0, 8}, DType::kFloat32, kCuda));
  ExpectPyError(Faithful(call), PyErrorKind::kTypeError,
                "slice indices must be integers or None or have an __index__ method");
}

TEST(SdpaTorchTest, TheConstructionScaleIsUsedAndMustBeANumber) {
  AttentionCall call = Call(8, 2, 2, 16);
  call.sdpa.flatten_batch = true;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 8}));
  call.sdpa.softmax_scale = 0.3;
  call.kwargs.set("softmax_scale", Value::Float(0.9));  // per call: ignored
  Resolution r = Resolve(call, Profile::kSdpa, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_EQ(ArgsOf(r).scale, 0.3);

  // Through the layer, VisionAttention constructs sdpa with its own scale.
  call.sdpa.softmax_scale.reset();
  call.entry = Entry::kLayer;
  call.kwargs.set("softmax_scale", Value::Str("0.5"));
  ExpectPyError(Faithful(call), PyErrorKind::kTypeError,
                "scaled_dot_product_attention(): argument 'scale' must be float, not str");
  call.sdpa.softmax_in_single_precision = true;
  ExpectPyError(Faithful(call), PyErrorKind::kTypeError,
                "only integer tensors of a single element can be converted to an index");
}

}  // namespace
}  // namespace varlen
