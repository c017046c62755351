// Contract rule 23: backend numerics in bfloat16 against SGLang's own bar
// (atol = rtol = 2e-2 against a higher-precision reference, every output
// finite) on the segment sets of SGLang's tests, through each calling
// convention, and against the harness's stricter measured bound.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/executor.h"

namespace varlen {
namespace {

Case Rule23Case(Profile profile, const std::vector<int64_t>& seq_lens, int64_t heads,
                int64_t head_dim) {
  Case c;
  c.name = "rule23";
  c.source = "contract rule 23";
  c.mode = Mode::kHardened;  // derives every argument from cu_seqlens
  c.geometry.seq_lens = seq_lens;
  c.geometry.num_heads = heads;
  c.geometry.num_kv_heads = heads;
  c.geometry.head_dim = head_dim;
  c.geometry.head_dim_v = head_dim;
  c.geometry.dtype = DType::kBFloat16;
  c.data.seed = 23;
  c.call.profile = profile;
  c.call.sdpa.flatten_batch = true;
  std::vector<int64_t> offsets = {0};
  for (int64_t n : seq_lens) offsets.push_back(offsets.back() + n);
  c.call.cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  c.expect = Expectation{};  // success
  return c;
}

void ExpectWithinSglangTolerance(const Case& c) {
  const Backend* backend = FindBackend("cpu_reference");
  ASSERT_NE(backend, nullptr);
  const Outcome outcome = RunCase(c, *backend);
  ASSERT_TRUE(outcome.numerics.has_value()) << ObservedName(outcome.observed);
  const NumericReport& n = *outcome.numerics;
  EXPECT_EQ(n.non_finite, 0);
  EXPECT_EQ(n.unwritten, 0);
  // |out - ref| <= atol + rtol * |ref| holds when the max error is <= atol.
  EXPECT_LE(n.max_abs_error, 2e-2);
  EXPECT_TRUE(n.passed) << SummarizeNumerics(n);
  EXPECT_EQ(outcome.verdict, Verdict::kPass);
}

struct SegmentSet {
  std::vector<int64_t> seq_lens;
  int64_t heads;
  int64_t head_dim;
};

class ContractRule23 : public testing::TestWithParam<Profile> {};

TEST_P(ContractRule23, SglangSegmentSetsWithinTwoPercent) {
  const std::vector<SegmentSet> sets = {
      {{11, 23, 7}, 16, 72},      // Kimi-VL fixture
      {{64, 37}, 8, 64},          // triton window/sink tests
      {{5, 0, 7, 0}, 4, 80},      // zero-length segments are harmless
      {{16, 16, 16, 16}, 4, 72},  // per-frame video segmentation
      {{4, 6, 8}, 4, 64},         // equal total,
      {{5, 5, 8}, 4, 64},         //   different boundaries
  };
  for (const SegmentSet& set : sets) {
    SCOPED_TRACE(testing::PrintToString(set.seq_lens));
    ExpectWithinSglangTolerance(Rule23Case(GetParam(), set.seq_lens, set.heads, set.head_dim));
  }
}

// The large pair of the Kimi-VL fixture, which ran on triton_attn; one head
// keeps it within the CPU budget.
TEST(ContractRule23Large, KimiVlPairOnTriton) {
  ExpectWithinSglangTolerance(Rule23Case(Profile::kTritonAttn, {1024, 1536}, 1, 32));
}

INSTANTIATE_TEST_SUITE_P(AllProfiles, ContractRule23,
                         testing::Values(Profile::kFlashinferCudnn, Profile::kFa3,
                                         Profile::kTritonAttn, Profile::kSdpa),
                         [](const testing::TestParamInfo<Profile>& param) {
                           return std::string(ProfileName(param.param));
                         });

}  // namespace
}  // namespace varlen
