// The fused_qkv layout: q, k and v as strided column views of one projection
// output. The data, the reference, the kernel models and the bounds check all
// honour the strides, and a backend that ignores one is caught.

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/backend.h"
#include "varlen/backend/params.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/synth.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

using json = nlohmann::ordered_json;
using ::testing::ElementsAre;

// A correct kernel with one deliberate stride bug.
class StrideMutant final : public Backend {
 public:
  enum class Bug {
    kValuesWithQueryStride,  // reads v with q's token stride
    kDenseInputs,            // assumes q, k and v are dense [T, H, D]
  };
  explicit StrideMutant(Bug bug) : bug_(bug) {}
  absl::string_view name() const override { return "stride_mutant"; }
  absl::string_view description() const override { return "a kernel that ignores a stride"; }
  BackendCapabilities capabilities() const override {
    return {.input_dtypes = {DType::kBFloat16, DType::kFloat32},
            .max_head_dim = 256,
            .grouped_query_attention = true,
            .distinct_value_head_dim = true,
            .strided_inputs = true,
            .device = "cpu"};
  }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    VarlenAttentionParams p = params;
    if (bug_ == Bug::kValuesWithQueryStride) {
      p.v_token_stride = p.q_token_stride;
    } else {
      p.q_token_stride = int64_t{p.num_heads_q} * p.head_dim_qk;
      p.k_token_stride = int64_t{p.num_heads_kv} * p.head_dim_qk;
      p.v_token_stride = int64_t{p.num_heads_kv} * p.head_dim_v;
    }
    ReferenceAttention(p, ReferencePrecision::kFloat64);
    return absl::OkStatus();
  }

 private:
  Bug bug_;
};

// 64 tokens in [40, 24], 4 query heads and 2 KV heads of 16.
Case FusedCase(const std::string& profile, bool rotary, const std::string& entry) {
  json j = {{"name", "fused"},
            {"source", "test"},
            {"sglang", "0.5.23"},
            {"mode", "faithful"},
            {"geometry",
             {{"seq_lens", {40, 24}},
              {"num_heads", 4},
              {"num_kv_heads", 2},
              {"head_dim", 16},
              {"dtype", "bfloat16"}}},
            {"data", {{"seed", 7}}},
            {"call",
             {{"profile", profile},
              {"entry", entry},
              {"layout", "fused_qkv"},
              {"rotary", rotary},
              {"cu_seqlens", {{"tensor", {0, 40, 64}}, {"dtype", "int32"}, {"device", "cuda"}}},
              {"kwargs", {{"max_seqlen", 40}}}}}};
  absl::StatusOr<Case> c = ParseCase(j.dump(), "fused.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

const Backend& CpuReference() { return *FindBackend("cpu_reference"); }

TEST(FusedLayoutTest, ViewsOfOneBufferWithThePackedLayoutsValues) {
  Case fused = FusedCase("fa3", false, "direct");
  Case packed = fused;
  packed.call.layout = QLayout::kPacked;
  const QkvTensors views = SynthesizeQkv(fused);
  const QkvTensors dense = SynthesizeQkv(packed);
  EXPECT_THAT(views.q.strides(), ElementsAre(128, 16, 1));
  EXPECT_THAT(views.v.strides(), ElementsAre(128, 16, 1));
  EXPECT_EQ(views.q.extent(), 64 * 128);
  EXPECT_EQ(views.v.extent(), 64 * 128 - 96);  // v starts after q's 64 and k's 32 columns
  for (const auto& [view, copy] : {std::pair{&views.q, &dense.q}, std::pair{&views.k, &dense.k},
                                   std::pair{&views.v, &dense.v}}) {
    for (int64_t t = 0; t < 64; ++t) {
      for (int64_t i = 0; i < copy->size(1) * 16; ++i) {
        ASSERT_EQ(view->DoubleAt(t * 128 + i), copy->DoubleAt(t * copy->size(1) * 16 + i));
      }
    }
  }
}

TEST(FusedLayoutTest, TheOracleOfTheViewsIsTheOracleOfTheDenseTensors) {
  Case fused = FusedCase("fa3", false, "direct");
  Case packed = fused;
  packed.call.layout = QLayout::kPacked;
  const QkvTensors views = SynthesizeQkv(fused);
  const QkvTensors dense = SynthesizeQkv(packed);
  const Reference from_views = ComputeReference(fused.geometry, views.q, views.k, views.v);
  const Reference from_dense = ComputeReference(packed.geometry, dense.q, dense.k, dense.v);
  EXPECT_EQ(from_views.oracle, from_dense.oracle);
  EXPECT_EQ(from_views.emulated, from_dense.emulated);
}

TEST(FusedLayoutTest, StridedBackendsComputeTheReferenceFromViews) {
  for (const char* profile : {"fa3", "triton_attn"}) {
    for (bool rotary : {false, true}) {
      const Outcome o = RunCase(FusedCase(profile, rotary, "layer"), CpuReference());
      EXPECT_EQ(o.observed, Observed::kSuccess) << profile << " rotary " << rotary;
    }
    const Outcome direct = RunCase(FusedCase(profile, false, "direct"), CpuReference());
    EXPECT_EQ(direct.observed, Observed::kSuccess) << profile;
  }
}

TEST(FusedLayoutTest, ABackendReadingValuesWithTheQueryStrideIsCaught) {
  const StrideMutant mutant(StrideMutant::Bug::kValuesWithQueryStride);
  // Rotary embeddings leave q dense and v a view: the strides differ.
  const Outcome rotary = RunCase(FusedCase("triton_attn", true, "layer"), mutant);
  EXPECT_EQ(rotary.observed, Observed::kCorruption);
  EXPECT_EQ(rotary.verdict, Verdict::kFail);
  // With every tensor a view of the same buffer the bug is invisible.
  EXPECT_EQ(RunCase(FusedCase("triton_attn", false, "layer"), mutant).observed, Observed::kSuccess);
}

TEST(FusedLayoutTest, ABackendAssumingDenseInputsIsCaught) {
  const StrideMutant mutant(StrideMutant::Bug::kDenseInputs);
  EXPECT_EQ(RunCase(FusedCase("fa3", false, "direct"), mutant).observed, Observed::kCorruption);
  EXPECT_EQ(RunCase(FusedCase("fa3", false, "layer"), mutant).observed, Observed::kCorruption);
  // 0026249's layer makes copies, so the same bug passes there.
  Case old = FusedCase("fa3", false, "layer");
  old.version = SglangVersion::k0026249;
  EXPECT_EQ(RunCase(old, mutant).observed, Observed::kSuccess);
}

TEST(FusedLayoutTest, FlashinferReadsViewsAsDenseAndCorrupts) {
  Case c = FusedCase("flashinfer_cudnn", false, "direct");
  c.geometry.num_kv_heads = 4;
  c.call.cu_seqlens = ArgLiteral::None();
  c.call.kwargs.clear();
  MetadataSpec m;
  m.builder = MetadataSpec::Builder::kFlashinferCudnn;
  m.cu_seqlens = ArgLiteral::IntTensor({0, 40, 64}, DType::kInt32, Device::kCuda);
  m.elem_per_token = 64;
  c.call.forward_metadata = m;
  EXPECT_EQ(RunCase(c, CpuReference()).observed, Observed::kCorruption);
  c.call.entry = Entry::kLayer;  // the layer makes flashinfer's inputs contiguous
  EXPECT_EQ(RunCase(c, CpuReference()).observed, Observed::kSuccess);
}

}  // namespace
}  // namespace varlen
