// The modelled SGLang versions: names, the behaviour switched per version,
// bit-exact default scales, and what the attention layer hands a backend.

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_util.h"
#include "varlen/contract/engine.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/sglang/version.h"

namespace varlen {
namespace {

using test::IntTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Device kCuda = Device::kCuda;

TEST(SglangVersionTest, NamesRoundTrip) {
  for (EngineVersion version : EngineVersion::Modelled(Engine::kSglang)) {
    absl::StatusOr<SglangVersion> parsed = ParseSglangVersion(SglangVersionName(version.sglang()));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, version.sglang());
  }
  EXPECT_EQ(*ParseSglangVersion("00262495044993539b2740746aaa531e62f377ab"),
            SglangVersion::k0026249);
  EXPECT_EQ(ParseSglangVersion("0.5.22").status().message(),
            "SGLang version \"0.5.22\" is not modelled (modelled: 0026249, 0.5.23)");
  EXPECT_EQ(EngineVersion(kLatestSglangVersion), EngineVersion::Latest(Engine::kSglang));
}

TEST(EngineVersionTest, EachEngineNamesItsVersionsOnce) {
  for (Engine engine : AllEngines()) {
    const EngineModel& model = ModelOf(engine);
    EXPECT_EQ(model.engine, engine);
    EXPECT_EQ(*ParseEngine(model.name), engine);
    const std::vector<EngineVersion> versions = EngineVersion::Modelled(engine);
    ASSERT_EQ(versions.size(), model.versions.size());
    EXPECT_EQ(versions.back(), EngineVersion::Latest(engine));
    for (const EngineVersion& version : versions) {
      EXPECT_EQ(version.engine(), engine);
      EXPECT_EQ(*EngineVersion::Parse(engine, version.name()), version);
      EXPECT_EQ(version.DisplayName(), absl::StrCat(model.title, " ", version.name()));
    }
  }
  EXPECT_EQ(EngineVersion(VllmVersion::k0_33_0).DisplayName(), "vLLM 0.33.0");
  // A version is its engine's: another engine's name is not one of them,
  // and reads as that engine's latest only where it is asked for.
  EXPECT_EQ(EngineVersion::Parse(Engine::kVllm, "0.5.23").status().message(),
            "vLLM version \"0.5.23\" is not modelled (modelled: 0.33.0)");
  EXPECT_EQ(EngineVersion(VllmVersion::k0_33_0).sglang(), kLatestSglangVersion);
  EXPECT_EQ(EngineVersion(SglangVersion::k0026249).vllm(), kLatestVllmVersion);
  EXPECT_EQ(ParseEngine("tgi").status().message(),
            "engine \"tgi\" is not one of sglang, vllm, transformers");
}

TEST(SglangVersionTest, EachDifferenceIsOnlyInTheNewerVersion) {
  const SglangBehavior& old = BehaviorOf(SglangVersion::k0026249);
  const SglangBehavior& now = BehaviorOf(SglangVersion::k0_5_23);
  EXPECT_FALSE(old.triton_moves_derived_seq_lens);
  EXPECT_FALSE(old.layer_passes_strided_qkv);
  EXPECT_FALSE(old.sm103_defaults_to_fa4);
  EXPECT_FALSE(old.xpu_defaults_to_xpu_attn);
  EXPECT_FALSE(old.ascend_unpads_padded_items);
  EXPECT_TRUE(now.triton_moves_derived_seq_lens);
  EXPECT_TRUE(now.layer_passes_strided_qkv);
  EXPECT_TRUE(now.sm103_defaults_to_fa4);
  EXPECT_TRUE(now.xpu_defaults_to_xpu_attn);
  EXPECT_TRUE(now.ascend_unpads_padded_items);
}

// ---------------------------------------------------------------------------
// Default scales, bit for bit. The table holds, for head_dim 1..512, what
// CPython computes for d**-0.5, 1.0/(d**0.5) and 1.0/math.sqrt(d); it was made
// with
//   python3 -c "import math;[print('{%s, %s, %s},' % ((d**-0.5).hex(), (1.0/(d**0.5)).hex(),
//   (1.0/math.sqrt(d)).hex())) for d in range(1,513)]" > tests/contract/default_scales.inc

struct PythonScales {
  double pow_minus_half;      // head_size**-0.5, q.shape[-1] ** (-0.5)
  double one_over_pow_half;   // 1.0 / (Lq**0.5)
  double one_over_math_sqrt;  // 1.0 / math.sqrt(head_size)
};

constexpr PythonScales kPythonScales[] = {
#include "contract/default_scales.inc"
};

uint64_t Bits(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

TEST(DefaultSoftmaxScaleTest, EveryProfileMatchesPythonBitForBitUpTo512) {
  ASSERT_EQ(std::size(kPythonScales), 512u);
  for (int64_t d = 1; d <= 512; ++d) {
    const PythonScales& python = kPythonScales[d - 1];
    EXPECT_EQ(Bits(DefaultSoftmaxScale(Profile::kFlashinferCudnn, d)), Bits(python.pow_minus_half))
        << "head_dim " << d;
    EXPECT_EQ(Bits(DefaultSoftmaxScale(Profile::kFa3, d)), Bits(python.pow_minus_half))
        << "head_dim " << d;
    EXPECT_EQ(Bits(DefaultSoftmaxScale(Profile::kTritonAttn, d)), Bits(python.one_over_pow_half))
        << "head_dim " << d;
    EXPECT_EQ(Bits(DefaultSoftmaxScale(Profile::kSdpa, d)), Bits(python.one_over_math_sqrt))
        << "head_dim " << d;
  }
}

TEST(DefaultSoftmaxScaleTest, TheSpellingsReallyDifferForCommonHeadDims) {
  // Otherwise the table test above could not tell them apart.
  for (int64_t d : {72, 96, 128}) {
    EXPECT_NE(Bits(kPythonScales[d - 1].pow_minus_half),
              Bits(kPythonScales[d - 1].one_over_math_sqrt))
        << "head_dim " << d;
  }
}

AttentionCall SmallCall(int64_t head_dim) {
  AttentionCall call;
  for (Tensor* t : {&call.q, &call.k, &call.v}) {
    *t = Tensor::Zeros(DType::kBFloat16, kCuda, {16, 2, head_dim});
  }
  call.seq_len = 16;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 7, 16}));
  call.kwargs.set("max_seqlen", Value::Int(9));
  call.sdpa.flatten_batch = true;
  return call;
}

double ResolvedScale(const Resolution& r) {
  return std::visit([](const auto& args) { return args.scale; }, r.args->args);
}

TEST(DefaultSoftmaxScaleTest, ResolutionHandsTheKernelItsOwnDefault) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn, Profile::kSdpa}) {
    for (int64_t d : {72, 96, 128}) {
      for (Mode mode : {Mode::kFaithful, Mode::kHardened}) {
        const Resolution r = Resolve(SmallCall(d), profile, mode);
        ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
        EXPECT_EQ(Bits(ResolvedScale(r)), Bits(DefaultSoftmaxScale(profile, d)))
            << ProfileName(profile) << " head_dim " << d;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The layer: strided views of a fused projection.

// q, k and v as column views of one [T, (H + 2 KV) * D] buffer.
AttentionCall FusedCall(int64_t heads, int64_t kv_heads, int64_t dim) {
  constexpr int64_t kTokens = 12;
  const int64_t width = (heads + 2 * kv_heads) * dim;
  const Tensor fused = Tensor::Zeros(DType::kBFloat16, kCuda, {kTokens, width});
  AttentionCall call;
  call.q = fused.AsStrided({kTokens, heads, dim}, {width, dim, 1}, 0);
  call.k = fused.AsStrided({kTokens, kv_heads, dim}, {width, dim, 1}, heads * dim);
  call.v = fused.AsStrided({kTokens, kv_heads, dim}, {width, dim, 1}, (heads + kv_heads) * dim);
  call.seq_len = kTokens;
  call.entry = Entry::kLayer;
  call.cu_seqlens = Value::FromTensor(IntTensor({0, 5, 12}));
  call.kwargs.set("max_seqlen", Value::Int(7));
  call.sdpa.flatten_batch = true;
  return call;
}

TEST(LayerTest, StridedViewsReachTheStridedBackendsSince0523) {
  for (Profile profile : {Profile::kFa3, Profile::kTritonAttn}) {
    AttentionCall call = FusedCall(4, 2, 8);
    call.version = SglangVersion::k0_5_23;
    const Resolution r = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
    EXPECT_TRUE(r.args->q.SharesStorageWith(call.q)) << ProfileName(profile);
    EXPECT_THAT(r.args->v.strides(), ElementsAre(64, 8, 1));
    EXPECT_THAT(r.notes, testing::Contains(HasSubstr("pass_strided_qkv")));

    call.version = SglangVersion::k0026249;
    const Resolution before = Resolve(call, profile, Mode::kFaithful);
    ASSERT_TRUE(before.status.ok()) << FormatPythonError(before.status);
    EXPECT_TRUE(before.args->q.is_contiguous());
    EXPECT_THAT(before.args->v.strides(), ElementsAre(16, 8, 1));
  }
}

TEST(LayerTest, OtherBackendsGetContiguousCopies) {
  for (Profile profile : {Profile::kSdpa, Profile::kFlashinferCudnn}) {
    AttentionCall call = FusedCall(4, 4, 8);
    call.version = SglangVersion::k0_5_23;
    call.cu_seqlens = Value::None();
    if (profile == Profile::kSdpa) call.cu_seqlens = Value::FromTensor(IntTensor({0, 5, 12}));
    call.kwargs.set("sequence_lengths", Value::FromTensor(IntTensor({5, 7, 0, 0, 0, 0, 0, 0})));
    const Resolution r = Resolve(call, profile, Mode::kFaithful);
    EXPECT_TRUE(r.args.has_value() || !r.status.ok());
    if (r.args.has_value()) {
      EXPECT_TRUE(r.args->q.is_contiguous() && r.args->k.is_contiguous() &&
                  r.args->v.is_contiguous())
          << ProfileName(profile);
    }
  }
}

TEST(LayerTest, RotaryRebuildsQAndKButNotV) {
  AttentionCall call = FusedCall(4, 2, 8);
  call.rotary = true;
  call.version = SglangVersion::k0_5_23;
  const Resolution r = Resolve(call, Profile::kTritonAttn, Mode::kFaithful);
  ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
  EXPECT_THAT(r.args->q.strides(), ElementsAre(32, 8, 1));
  EXPECT_THAT(r.args->k.strides(), ElementsAre(16, 8, 1));
  EXPECT_THAT(r.args->v.strides(), ElementsAre(64, 8, 1));
}

TEST(LayerTest, HardenedFollowsTheLatestLayerWhateverTheVersion) {
  for (EngineVersion version : EngineVersion::Modelled(Engine::kSglang)) {
    AttentionCall call = FusedCall(4, 2, 8);
    call.version = version;
    const Resolution r = Resolve(call, Profile::kFa3, Mode::kHardened);
    ASSERT_TRUE(r.status.ok()) << FormatPythonError(r.status);
    EXPECT_THAT(r.args->v.strides(), ElementsAre(64, 8, 1));
  }
}

}  // namespace
}  // namespace varlen
