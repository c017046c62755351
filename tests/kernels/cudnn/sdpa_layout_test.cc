// Tests what the cuDNN graph is built and fed with (kernels/cudnn/
// sdpa_layout.h), without cuDNN: the 4-d views of the packed tensors, and
// the ragged offsets and lengths of a call as SGLang's flashinfer_cudnn path
// makes them, including padded batch entries and sequences longer than the
// bucketed max.

#include "sdpa_layout.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen::cudnn_kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kHeads = 16, kDim = 72, kWidth = kHeads * kDim;  // Qwen3-VL's vision tower

// Three images of 4, 0 and 6 patches padded to a batch of 4, with the
// element offsets SGLang's builder packs (q/k third, v third, o third).
struct Call {
  std::vector<int64_t> qk = {0, 4 * kWidth, 4 * kWidth, 10 * kWidth};
  std::vector<int64_t> v = qk, o = qk;
  std::vector<int64_t> lengths = {4, 0, 6, 0};
  VarlenAttentionParams params() const {
    VarlenAttentionParams p;
    p.input_dtype = p.output_dtype = DType::kBFloat16;
    p.num_heads_q = p.num_heads_kv = kHeads;
    p.head_dim_qk = p.head_dim_v = kDim;
    p.q_numel = p.k_numel = p.v_numel = p.o_numel = 10 * kWidth;
    p.q_token_stride = p.k_token_stride = p.v_token_stride = p.o_token_stride = kWidth;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = kDim;
    p.softmax_scale = 1.0 / 8.48528137423857;
    p.batch = 4;
    p.q_start = p.k_start = qk.data();
    p.v_start = v.data();
    p.o_start = o.data();
    p.seqlen_q = p.seqlen_k = lengths.data();
    p.max_rows_q = p.max_keys = 4096;  // the bucketed max_token_per_sequence
    return p;
  }
};

TEST(SdpaLayoutTest, ViewsArePackedTokensWithANominalBatchStride) {
  Call call;
  SdpaGraphKey key = KeyFor(call.params(), 0);
  key.heads_kv = 4;  // GQA: K and V carry fewer heads
  key.k_token_stride = key.v_token_stride = 4 * kDim;
  const SdpaTensorViews views = ViewsFor(key);
  EXPECT_THAT(views.q.dims, ElementsAre(4, kHeads, 4096, kDim));
  EXPECT_THAT(views.q.strides, ElementsAre(4096 * kWidth, kDim, kWidth, 1));
  EXPECT_THAT(views.k.dims, ElementsAre(4, 4, 4096, kDim));
  EXPECT_THAT(views.k.strides, ElementsAre(4096 * 4 * kDim, kDim, 4 * kDim, 1));
  EXPECT_EQ(views.v.dims, views.k.dims);
  EXPECT_THAT(views.o.dims, ElementsAre(4, kHeads, 4096, kDim));
  EXPECT_EQ(views.o.strides, views.q.strides);
}

TEST(SdpaLayoutTest, RaggedArgumentsFollowThePackedIndptrs) {
  Call call;
  call.v = {0, 4 * kWidth, 4 * kWidth, 10 * kWidth};
  call.o = {0, 4 * kWidth, 4 * kWidth, 10 * kWidth};
  absl::StatusOr<RaggedArguments> args = RaggedArgumentsFor(call.params());
  ASSERT_TRUE(args.ok()) << args.status();
  // Sequences without rows get offset 0 (nothing validated their offset);
  // the last entry is the end of the furthest sequence.
  EXPECT_THAT(args->q_offsets, ElementsAre(0, 0, 4 * kWidth, 0, 10 * kWidth));
  EXPECT_EQ(args->k_offsets, args->q_offsets);
  EXPECT_EQ(args->v_offsets, args->q_offsets);
  EXPECT_EQ(args->o_offsets, args->q_offsets);
  EXPECT_THAT(args->seq_len_q, ElementsAre(4, 0, 6, 0));
  EXPECT_EQ(args->seq_len_kv, args->seq_len_q);
}

TEST(SdpaLayoutTest, KReadsTheQkThirdAndVAndOTheirOwn) {
  Call call;
  call.v = {5 * kWidth, 0, 0, 0};
  call.o = {2 * kWidth, 0, 6 * kWidth, 0};
  VarlenAttentionParams p = call.params();
  absl::StatusOr<RaggedArguments> args = RaggedArgumentsFor(p);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->k_offsets, ElementsAre(0, 0, 4 * kWidth, 0, 10 * kWidth));
  EXPECT_THAT(args->v_offsets, ElementsAre(5 * kWidth, 0, 0, 0, 9 * kWidth));
  EXPECT_THAT(args->o_offsets, ElementsAre(2 * kWidth, 0, 6 * kWidth, 0, 12 * kWidth));
}

TEST(SdpaLayoutTest, ASequenceLongerThanTheGraphsMaxIsGivenTheMax) {
  // The flashinfer_cudnn model truncates at max_token_per_sequence; cuDNN's
  // padding mask needs lengths within S_max.
  Call call;
  VarlenAttentionParams p = call.params();
  p.max_rows_q = p.max_keys = 5;
  absl::StatusOr<RaggedArguments> args = RaggedArgumentsFor(p);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->seq_len_q, ElementsAre(4, 0, 5, 0));
  EXPECT_THAT(args->seq_len_kv, ElementsAre(4, 0, 5, 0));
}

TEST(SdpaLayoutTest, RefusesOffsetsThatAreNot16ByteAligned) {
  // A per-token width that is not a multiple of 8 elements (for instance
  // a wrong elem_per_token of 1150) misaligns cuDNN's tile loads.
  Call call;
  call.qk = {0, 0, 1150 * 3, 0};
  absl::StatusOr<RaggedArguments> args = RaggedArgumentsFor(call.params());
  EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(args.status().message(),
              HasSubstr("sequence 2: q offset 3450 elements (6900 bytes) is not a multiple of 16 "
                        "bytes"));
}

TEST(SdpaLayoutTest, EncodesOffsetsInTheKeysDtype) {
  const std::vector<int64_t> values = {0, 7, int64_t{1} << 33};
  const std::vector<uint8_t> wide = EncodeIntegers(values, DType::kInt64);
  ASSERT_EQ(wide.size(), 24u);
  int64_t last;
  std::memcpy(&last, wide.data() + 16, 8);
  EXPECT_EQ(last, int64_t{1} << 33);
  const std::vector<uint8_t> narrow = EncodeIntegers({0, 7, 1 << 30}, DType::kInt32);
  ASSERT_EQ(narrow.size(), 12u);
  int32_t second;
  std::memcpy(&second, narrow.data() + 4, 4);
  EXPECT_EQ(second, 7);
}

}  // namespace
}  // namespace varlen::cudnn_kernels
