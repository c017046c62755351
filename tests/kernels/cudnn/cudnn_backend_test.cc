// Tests the cudnn backend. Without a usable device it must say why it is
// unavailable, still answer Supports() from a deviceless validation, and
// every test that needs the device skips with the reason. With a device:
// SGLang's flashinfer_cudnn calls against the float64 oracle, the silent
// corruptions of that path as the vendor kernel shows them, and the graph
// cache's counters.

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/kernel_cases.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"

namespace varlen {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

const Backend& Cudnn() { return *FindBackend("cudnn"); }

#define SKIP_WITHOUT_DEVICE()                                          \
  if (absl::Status available = Cudnn().Available(); !available.ok()) { \
    GTEST_SKIP() << "needs a CUDA device: " << available.message();    \
  }

// SGLang's correct flashinfer_cudnn call: metadata from the packed builder.
Case VisionCase(std::vector<int64_t> lengths, int64_t heads, int64_t dim, DType dtype,
                uint64_t seed) {
  Case c = test::KernelCase(std::move(lengths), heads, heads, dim, dim, dtype, seed);
  SetCorrectCall(&c, Profile::kFlashinferCudnn, /*prepared=*/true);
  return c;
}

int64_t Counter(const std::string& name) {
  for (const BackendCounter& c : Cudnn().counters()) {
    if (c.name == name) return c.value;
  }
  ADD_FAILURE() << "no counter " << name;
  return -1;
}

// Dense [T, 16, 72] bfloat16 params of three sequences.
struct Params {
  std::vector<int64_t> starts = {0, 4 * 16 * 72, 10 * 16 * 72};
  std::vector<int64_t> lengths = {4, 6, 0};
  VarlenAttentionParams get(int dim = 72) {
    VarlenAttentionParams p;
    p.input_dtype = p.output_dtype = DType::kBFloat16;
    p.num_heads_q = p.num_heads_kv = 16;
    p.head_dim_qk = p.head_dim_v = dim;
    p.q_numel = p.k_numel = p.v_numel = p.o_numel = 10 * 16 * dim;
    p.q_token_stride = p.k_token_stride = p.v_token_stride = p.o_token_stride = 16 * dim;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = dim;
    p.softmax_scale = 0.125;
    p.batch = 3;
    p.q_start = p.k_start = p.v_start = p.o_start = starts.data();
    p.seqlen_q = p.seqlen_k = lengths.data();
    p.max_rows_q = p.max_keys = 4096;
    return p;
  }
};

TEST(CudnnBackendTest, IsRegisteredAndSaysWhyItIsUnavailable) {
  ASSERT_NE(FindBackend("cudnn"), nullptr);
  EXPECT_EQ(Cudnn().capabilities().device, "cuda");
  EXPECT_TRUE(SupportsProfile(Cudnn(), Profile::kFlashinferCudnn).ok());
  EXPECT_EQ(SupportsProfile(Cudnn(), Profile::kFa3).code(), absl::StatusCode::kUnimplemented);
  const absl::Status available = Cudnn().Available();
  if (!available.ok()) {
    EXPECT_EQ(available.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(available.message(), AnyOf(HasSubstr("no CUDA device"), HasSubstr("cudnnCreate"),
                                           HasSubstr("compute capability")));
    const Outcome o = RunCase(VisionCase({48, 72}, 16, 72, DType::kBFloat16, 1), Cudnn());
    EXPECT_EQ(o.observed, Observed::kUnsupported);
    EXPECT_EQ(o.unsupported.message(), available.message());
  }
}

TEST(CudnnBackendTest, SupportsAnswersWhatCudnnAccepts) {
  Params params;
  EXPECT_TRUE(Cudnn().Supports(params.get()).ok()) << Cudnn().Supports(params.get());

  const absl::Status odd = Cudnn().Supports(params.get(/*dim=*/68));
  EXPECT_EQ(odd.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(odd.message(), HasSubstr("multiple of 8"));

  // A per-token width that misaligns a sequence start.
  params.starts[1] = 3 * 1150;
  const absl::Status misaligned = Cudnn().Supports(params.get());
  EXPECT_EQ(misaligned.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(misaligned.message(), HasSubstr("16-byte aligned"));

  Params fp32;
  VarlenAttentionParams p = fp32.get();
  p.input_dtype = p.output_dtype = DType::kFloat32;
  EXPECT_EQ(Cudnn().Supports(p).code(), absl::StatusCode::kUnimplemented);
}

TEST(CudnnBackendTest, MatchesTheOracleOnVisionBatches) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<std::vector<int64_t>> batches = {
      {1}, {64}, {65, 127, 128}, {0, 5, 0, 200, 0}, {1024, 1024, 1024}, {49, 196, 784}};
  uint64_t seed = 1;
  for (int64_t dim : {64, 72, 80, 128}) {
    for (const auto& lengths : batches) {
      for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
        const Outcome o = RunCase(VisionCase(lengths, 16, dim, dtype, seed++), Cudnn());
        EXPECT_EQ(o.observed, Observed::kSuccess)
            << DTypeName(dtype) << " head_dim " << dim << " " << testing::PrintToString(lengths)
            << ": "
            << (o.numerics.has_value() ? SummarizeNumerics(*o.numerics)
                                       : std::string(o.unsupported.message()));
      }
    }
  }
}

TEST(CudnnBackendTest, AWrongElementsPerTokenIsTheCorruptionItIs) {
  SKIP_WITHOUT_DEVICE();
  // elem_per_token of 8 heads for a 16-head tensor: offsets land inside the
  // first sequence, the bounds check passes, the outputs are wrong.
  Case c = VisionCase({96, 160}, 16, 72, DType::kBFloat16, 7);
  c.call.forward_metadata->elem_per_token = 8 * 72;
  c.expect.reset();
  const Outcome o = RunCase(c, Cudnn());
  EXPECT_EQ(o.observed, Observed::kCorruption) << FormatOutcomeText(c, "test", o);
}

TEST(CudnnBackendTest, CachesGraphsByEveryFieldThatChangesThem) {
  SKIP_WITHOUT_DEVICE();
  Case c = VisionCase({33, 70}, 4, 64, DType::kBFloat16, 3);
  const int64_t builds = Counter("graph_builds"), hits = Counter("graph_hits");
  ASSERT_EQ(RunCase(c, Cudnn()).observed, Observed::kSuccess);
  ASSERT_EQ(RunCase(c, Cudnn()).observed, Observed::kSuccess);
  EXPECT_EQ(Counter("graph_builds"), builds + 1);
  EXPECT_GE(Counter("graph_hits"), hits + 1);
  // The same shapes in float16: another graph (FlashInfer #4270), correct.
  c.geometry.dtype = DType::kFloat16;
  EXPECT_EQ(RunCase(c, Cudnn()).observed, Observed::kSuccess);
  EXPECT_EQ(Counter("graph_builds"), builds + 2);
}

}  // namespace
}  // namespace varlen
