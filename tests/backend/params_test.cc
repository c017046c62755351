// Tests the kernel contract's shared offset math: SequenceAt, KvHeadFor and CheckKernelBounds.

#include "varlen/backend/params.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// Per-sequence arrays plus a params object pointing into them. The buffers
// are never dereferenced: only the offset math is under test.
//
// Geometry: 10 tokens, 2 query heads over 1 kv head, head_dim 4, head_dim_v
// 3, contiguous: q [10, 2, 4] = 80, k [10, 1, 4] = 40, v [10, 1, 3] = 30 and
// o [10, 2, 3] = 60 elements. Two sequences, of 4 and 6 tokens.
struct Launch {
  std::vector<int64_t> q_start = {0, 32};
  std::vector<int64_t> k_start = {0, 16};
  std::vector<int64_t> v_start = {0, 12};
  std::vector<int64_t> o_start = {0, 24};
  std::vector<int64_t> seqlen_q = {4, 6};
  std::vector<int64_t> seqlen_k = {4, 6};
  int64_t max_rows_q = kUnlimited;
  int64_t max_keys = kUnlimited;

  VarlenAttentionParams Params() const {
    VarlenAttentionParams p;
    p.q_numel = 80;
    p.k_numel = 40;
    p.v_numel = 30;
    p.o_numel = 60;
    p.q_token_stride = 8;
    p.q_head_stride = 4;
    p.k_token_stride = 4;
    p.k_head_stride = 4;
    p.v_token_stride = 3;
    p.v_head_stride = 3;
    p.o_token_stride = 6;
    p.o_head_stride = 3;
    p.num_heads_q = 2;
    p.num_heads_kv = 1;
    p.head_dim_qk = 4;
    p.head_dim_v = 3;
    p.softmax_scale = 0.5;
    p.batch = static_cast<int>(seqlen_q.size());
    p.q_start = q_start.data();
    p.k_start = k_start.data();
    p.v_start = v_start.data();
    p.o_start = o_start.data();
    p.seqlen_q = seqlen_q.data();
    p.seqlen_k = seqlen_k.data();
    p.max_rows_q = max_rows_q;
    p.max_keys = max_keys;
    return p;
  }
};

std::string OutOfBuffer(int b, const std::string& tensor, int64_t first, int64_t end,
                        int64_t numel) {
  return "sequence " + std::to_string(b) + " touches " + tensor + " elements [" +
         std::to_string(first) + ", " + std::to_string(end) + ") outside the buffer of " +
         std::to_string(numel) +
         " elements: a GPU kernel would read or write foreign memory or fault";
}

// ---------------------------------------------------------------------------
// SequenceAt

TEST(SequenceAtTest, PassesOffsetsThroughAndComputesEveryRowWhenUnlimited) {
  Launch launch;
  const VarlenAttentionParams p = launch.Params();
  const SequenceView s = SequenceAt(p, 1);
  EXPECT_EQ(s.q_offset, 32);
  EXPECT_EQ(s.k_offset, 16);
  EXPECT_EQ(s.v_offset, 12);
  EXPECT_EQ(s.o_offset, 24);
  EXPECT_EQ(s.rows, 6);
  EXPECT_EQ(s.keys, 6);
}

TEST(SequenceAtTest, TruncatesRowsAtMaxRowsAndKeysAtMaxKeys) {
  Launch launch;
  launch.q_start = {0, 0, 0, 0};
  launch.k_start = launch.v_start = launch.o_start = launch.q_start;
  launch.seqlen_q = {100, 128, 300, 0};
  launch.seqlen_k = {100, 300, 129, 0};
  launch.max_rows_q = 128;
  launch.max_keys = 256;
  const VarlenAttentionParams p = launch.Params();
  const int64_t expected_rows[] = {100, 128, 128, 0};
  const int64_t expected_keys[] = {100, 256, 129, 0};
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(SequenceAt(p, b).rows, expected_rows[b]) << "sequence " << b;
    EXPECT_EQ(SequenceAt(p, b).keys, expected_keys[b]) << "sequence " << b;
  }
}

TEST(SequenceAtTest, NegativeLengthsAndLimitsGiveZero) {
  Launch launch;
  launch.seqlen_q = {-3, 5};
  launch.seqlen_k = {-7, 5};
  VarlenAttentionParams p = launch.Params();
  EXPECT_EQ(SequenceAt(p, 0).rows, 0);
  EXPECT_EQ(SequenceAt(p, 0).keys, 0);
  launch.max_rows_q = -1;
  launch.max_keys = 0;
  p = launch.Params();
  EXPECT_EQ(SequenceAt(p, 1).rows, 0);
  EXPECT_EQ(SequenceAt(p, 1).keys, 0);
}

// ---------------------------------------------------------------------------
// KvHeadFor

TEST(KvHeadForTest, GroupsConsecutiveQueryHeads) {
  VarlenAttentionParams p;
  p.num_heads_q = 6;
  p.num_heads_kv = 2;
  std::vector<int> heads;
  for (int h = 0; h < 6; ++h) heads.push_back(KvHeadFor(p, h));
  EXPECT_THAT(heads, ::testing::ElementsAre(0, 0, 0, 1, 1, 1));

  p.num_heads_kv = 3;
  heads.clear();
  for (int h = 0; h < 6; ++h) heads.push_back(KvHeadFor(p, h));
  EXPECT_THAT(heads, ::testing::ElementsAre(0, 0, 1, 1, 2, 2));

  p.num_heads_kv = 6;
  for (int h = 0; h < 6; ++h) EXPECT_EQ(KvHeadFor(p, h), h);

  p.num_heads_kv = 1;
  for (int h = 0; h < 6; ++h) EXPECT_EQ(KvHeadFor(p, h), 0);
}

// ---------------------------------------------------------------------------
// CheckKernelBounds

TEST(CheckKernelBoundsTest, OkWhenTheLastSequenceEndsExactlyAtEveryBufferEnd) {
  // Sequence 1's last q element: 32 + 5*8 + 1*4 + 3 = 79 = q_numel - 1, and
  // likewise 39, 29 and 59 for k, v and o.
  Launch launch;
  EXPECT_TRUE(CheckKernelBounds(launch.Params()).ok());
}

TEST(CheckKernelBoundsTest, OneElementPastEachBufferIsOutOfRange) {
  struct Shifted {
    std::vector<int64_t> Launch::*field;
    std::string tensor;
    int64_t first, end, numel;
  };
  const Shifted cases[] = {
      {&Launch::q_start, "q", 33, 81, 80},
      {&Launch::k_start, "k", 17, 41, 40},
      {&Launch::v_start, "v", 13, 31, 30},
      {&Launch::o_start, "o", 25, 61, 60},
  };
  for (const Shifted& c : cases) {
    SCOPED_TRACE(c.tensor);
    Launch launch;
    (launch.*c.field)[1] += 1;
    const absl::Status status = CheckKernelBounds(launch.Params());
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(status.message(), OutOfBuffer(1, c.tensor, c.first, c.end, c.numel));
  }
}

TEST(CheckKernelBoundsTest, NegativeOffsetIsOutOfRange) {
  Launch launch;
  launch.q_start[0] = -1;
  const absl::Status status = CheckKernelBounds(launch.Params());
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  // Last element: -1 + 3*8 + 1*4 + 3 = 30.
  EXPECT_EQ(status.message(), OutOfBuffer(0, "q", -1, 31, 80));

  Launch v_launch;
  v_launch.v_start[1] = -12;
  const absl::Status v_status = CheckKernelBounds(v_launch.Params());
  EXPECT_EQ(v_status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(v_status.message(), OutOfBuffer(1, "v", -12, 6, 30));
}

TEST(CheckKernelBoundsTest, KeysLongerThanRowsAreCheckedOnTheirOwn) {
  Launch launch;
  launch.seqlen_k[1] = 7;  // k: 16 + 6*4 + 3 = 43 >= 40
  const absl::Status status = CheckKernelBounds(launch.Params());
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(), OutOfBuffer(1, "k", 16, 44, 40));
}

TEST(CheckKernelBoundsTest, OnlyTheRowsAndKeysTheLaunchTouchesCount) {
  // Sequence 1 claims 7 tokens from token 4 (one past the end), but a launch
  // covering 6 rows and 6 keys stays inside.
  Launch launch;
  launch.seqlen_q[1] = 7;
  launch.seqlen_k[1] = 7;
  EXPECT_EQ(CheckKernelBounds(launch.Params()).code(), absl::StatusCode::kOutOfRange);
  launch.max_rows_q = 6;
  launch.max_keys = 6;
  EXPECT_TRUE(CheckKernelBounds(launch.Params()).ok());
}

TEST(CheckKernelBoundsTest, SequenceWithNoRowsTouchesNothing) {
  // No rows: no q or o access and no key reads, whatever the offsets say.
  Launch launch;
  launch.q_start[1] = -1000;
  launch.k_start[1] = 1000;
  launch.v_start[1] = 1000;
  launch.o_start[1] = 1000;
  launch.seqlen_q[1] = 0;
  EXPECT_TRUE(CheckKernelBounds(launch.Params()).ok());
  launch.seqlen_q[1] = 6;
  launch.max_rows_q = 0;
  EXPECT_TRUE(CheckKernelBounds(launch.Params()).ok());
}

TEST(CheckKernelBoundsTest, ReportsTheFirstOffendingSequence) {
  Launch launch;
  launch.o_start[0] = 57;  // 57 + 3*6 + 3 + 2 = 80 >= 60
  launch.q_start[1] = 1000;
  const absl::Status status = CheckKernelBounds(launch.Params());
  EXPECT_EQ(status.message(), OutOfBuffer(0, "o", 57, 81, 60));
}

TEST(CheckKernelBoundsTest, EmptyBatchIsOk) {
  Launch launch;
  launch.q_start = launch.k_start = launch.v_start = launch.o_start = {};
  launch.seqlen_q = launch.seqlen_k = {};
  EXPECT_TRUE(CheckKernelBounds(launch.Params()).ok());
}

}  // namespace
}  // namespace varlen
