// Tests the backend registry and the default Backend::Supports capability check.

#include "varlen/backend/registry.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varlen/backend/backend.h"
#include "varlen/backend/params.h"

namespace varlen {
namespace {

// A backend that declares `caps` and never runs.
class DeclaredBackend final : public Backend {
 public:
  DeclaredBackend(std::string name, BackendCapabilities caps)
      : name_(std::move(name)), caps_(std::move(caps)) {}
  absl::string_view name() const override { return name_; }
  absl::string_view description() const override { return "declares capabilities only"; }
  BackendCapabilities capabilities() const override { return caps_; }
  absl::Status Run(const VarlenAttentionParams&) const override {
    return absl::InternalError("not runnable");
  }

 private:
  std::string name_;
  BackendCapabilities caps_;
};

BackendCapabilities Float16Up64() {
  return {.input_dtypes = {DType::kFloat16},
          .max_head_dim = 64,
          .grouped_query_attention = false,
          .distinct_value_head_dim = false,
          .device = "cuda"};
}

// Launch parameters that every capability above admits: float16, 4 heads,
// head_dim 64 for q, k and v.
// `p` with the strides of dense [tokens, heads, head_dim] tensors.
VarlenAttentionParams Dense(VarlenAttentionParams p) {
  p.q_head_stride = p.k_head_stride = p.head_dim_qk;
  p.v_head_stride = p.o_head_stride = p.head_dim_v;
  p.q_token_stride = int64_t{p.num_heads_q} * p.head_dim_qk;
  p.k_token_stride = int64_t{p.num_heads_kv} * p.head_dim_qk;
  p.v_token_stride = int64_t{p.num_heads_kv} * p.head_dim_v;
  p.o_token_stride = int64_t{p.num_heads_q} * p.head_dim_v;
  return p;
}

VarlenAttentionParams Admissible() {
  VarlenAttentionParams p;
  p.input_dtype = DType::kFloat16;
  p.output_dtype = DType::kFloat16;
  p.num_heads_q = 4;
  p.num_heads_kv = 4;
  p.head_dim_qk = 64;
  p.head_dim_v = 64;
  return p;
}

// ---------------------------------------------------------------------------
// Registry

TEST(RegistryTest, CpuReferenceIsRegisteredAndAvailable) {
  const Backend* backend = FindBackend("cpu_reference");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "cpu_reference");
  EXPECT_TRUE(backend->Available().ok());
  const BackendCapabilities caps = backend->capabilities();
  EXPECT_THAT(caps.input_dtypes,
              ::testing::UnorderedElementsAre(DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                                              DType::kFloat64));
  EXPECT_EQ(caps.max_head_dim, 512);
  EXPECT_TRUE(caps.grouped_query_attention);
  EXPECT_TRUE(caps.distinct_value_head_dim);
  EXPECT_EQ(caps.device, "cpu");
  EXPECT_FALSE(backend->description().empty());

  const std::vector<const Backend*> all = AllBackends();
  EXPECT_NE(std::find(all.begin(), all.end(), backend), all.end());
}

TEST(RegistryTest, FindBackendReturnsNullForUnknownNames) {
  EXPECT_EQ(FindBackend("no_such_backend"), nullptr);
  EXPECT_EQ(FindBackend(""), nullptr);
  EXPECT_EQ(FindBackend("CPU_REFERENCE"), nullptr);  // names are exact
}

TEST(RegistryTest, DuplicateNameIsAlreadyExists) {
  const size_t before = AllBackends().size();
  const absl::Status status =
      RegisterBackend(std::make_unique<DeclaredBackend>("cpu_reference", Float16Up64()));
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(status.message(), "a backend named \"cpu_reference\" is already registered");
  EXPECT_EQ(AllBackends().size(), before);
  // The original is still the one found.
  EXPECT_TRUE(FindBackend("cpu_reference")->capabilities().grouped_query_attention);
}

TEST(RegistryTest, RuntimeRegistrationAppearsAfterTheBuiltins) {
  const std::vector<const Backend*> before = AllBackends();
  ASSERT_TRUE(
      RegisterBackend(std::make_unique<DeclaredBackend>("registry_test_backend", Float16Up64()))
          .ok());
  const std::vector<const Backend*> after = AllBackends();
  ASSERT_EQ(after.size(), before.size() + 1);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), after.begin()));
  EXPECT_EQ(after.back()->name(), "registry_test_backend");
  EXPECT_EQ(FindBackend("registry_test_backend"), after.back());
  EXPECT_EQ(FindBackend("registry_test_backend")->capabilities().max_head_dim, 64);

  const absl::Status again =
      RegisterBackend(std::make_unique<DeclaredBackend>("registry_test_backend", Float16Up64()));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "a backend named \"registry_test_backend\" is already registered");
  EXPECT_EQ(AllBackends().size(), after.size());
}

// ---------------------------------------------------------------------------
// Backend::Supports

TEST(SupportsTest, InsideTheCapabilitiesIsOk) {
  DeclaredBackend backend("narrow", Float16Up64());
  EXPECT_TRUE(backend.Supports(Dense(Admissible())).ok());
}

TEST(SupportsTest, UnsupportedDTypeIsUnimplemented) {
  DeclaredBackend backend("narrow", Float16Up64());
  VarlenAttentionParams p = Admissible();
  p.input_dtype = DType::kBFloat16;
  const absl::Status status = backend.Supports(Dense(p));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(), "narrow does not support dtype bfloat16");
}

TEST(SupportsTest, HeadDimAboveTheMaximumIsUnimplemented) {
  DeclaredBackend backend("narrow", Float16Up64());
  VarlenAttentionParams p = Admissible();
  p.head_dim_qk = 65;
  p.head_dim_v = 65;
  absl::Status status = backend.Supports(Dense(p));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(), "narrow supports head_dim up to 64, not 65");

  // The value head dim counts too.
  DeclaredBackend wide_v("narrow", [] {
    BackendCapabilities caps = Float16Up64();
    caps.distinct_value_head_dim = true;
    return caps;
  }());
  p = Admissible();
  p.head_dim_v = 96;
  status = wide_v.Supports(Dense(p));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(), "narrow supports head_dim up to 64, not 96");
}

TEST(SupportsTest, GroupedQueryAttentionNeedsTheCapability) {
  DeclaredBackend backend("narrow", Float16Up64());
  VarlenAttentionParams p = Admissible();
  p.num_heads_q = 6;
  p.num_heads_kv = 2;
  const absl::Status status = backend.Supports(Dense(p));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            "narrow does not support grouped-query attention (6 query heads, 2 key/value heads)");

  BackendCapabilities caps = Float16Up64();
  caps.grouped_query_attention = true;
  EXPECT_TRUE(DeclaredBackend("gqa", caps).Supports(Dense(p)).ok());
}

TEST(SupportsTest, DistinctValueHeadDimNeedsTheCapability) {
  DeclaredBackend backend("narrow", Float16Up64());
  VarlenAttentionParams p = Admissible();
  p.head_dim_v = 32;
  const absl::Status status = backend.Supports(Dense(p));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(), "narrow needs head_dim_v == head_dim (32 != 64)");

  BackendCapabilities caps = Float16Up64();
  caps.distinct_value_head_dim = true;
  EXPECT_TRUE(DeclaredBackend("distinct", caps).Supports(Dense(p)).ok());
}

TEST(SupportsTest, CpuReferenceRunsEverythingUpTo512) {
  const Backend* reference = FindBackend("cpu_reference");
  ASSERT_NE(reference, nullptr);
  VarlenAttentionParams p = Admissible();
  p.input_dtype = DType::kFloat64;
  p.num_heads_q = 6;
  p.num_heads_kv = 3;
  p.head_dim_qk = 512;
  p.head_dim_v = 7;
  EXPECT_TRUE(reference->Supports(p).ok());
  p.head_dim_qk = 513;
  EXPECT_EQ(reference->Supports(p).message(), "cpu_reference supports head_dim up to 512, not 513");
  p.head_dim_qk = 64;
  p.input_dtype = DType::kInt32;
  EXPECT_EQ(reference->Supports(p).message(), "cpu_reference does not support dtype int32");
}

TEST(SupportsTest, StridedInputsNeedTheCapability) {
  VarlenAttentionParams p = Dense(Admissible());
  p.q_token_stride = 3 * p.q_token_stride;  // q a column slice of a fused projection
  const absl::Status status = DeclaredBackend("narrow", Float16Up64()).Supports(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            "narrow needs dense q, k and v (token stride heads x head_dim, head stride "
            "head_dim); got token strides 768/256/256");
  BackendCapabilities caps = Float16Up64();
  caps.strided_inputs = true;
  EXPECT_TRUE(DeclaredBackend("strided", caps).Supports(p).ok());
}

TEST(SupportsTest, TokenAndSequenceLimits) {
  BackendCapabilities caps = Float16Up64();
  caps.max_tokens = 100;
  caps.max_sequences = 4;
  const DeclaredBackend backend("limited", caps);
  VarlenAttentionParams p = Dense(Admissible());
  p.q_numel = 100 * p.q_token_stride;
  p.batch = 4;
  EXPECT_TRUE(backend.Supports(p).ok());
  p.q_numel = 101 * p.q_token_stride;
  EXPECT_EQ(backend.Supports(p).message(), "limited supports up to 100 tokens, not 101");
  p.q_numel = 100 * p.q_token_stride;
  p.batch = 5;
  EXPECT_EQ(backend.Supports(p).message(), "limited supports up to 4 sequences, not 5");
}

TEST(SupportsTest, ProfilesItConsumes) {
  EXPECT_TRUE(SupportsProfile(DeclaredBackend("any", Float16Up64()), Profile::kSdpa).ok());
  BackendCapabilities caps = Float16Up64();
  caps.profiles = {Profile::kFa3, Profile::kTritonAttn};
  const DeclaredBackend backend("varlen_only", caps);
  EXPECT_TRUE(SupportsProfile(backend, Profile::kTritonAttn).ok());
  const absl::Status status = SupportsProfile(backend, Profile::kSdpa);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            "varlen_only consumes the kernel arguments of fa3, triton_attn, not sdpa");
}

}  // namespace
}  // namespace varlen
