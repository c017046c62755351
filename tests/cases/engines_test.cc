// The engine dimension of the case format (a vLLM case reads, validates and
// round-trips) and the counterpart calls of `varlen repro --engine`.

#include "varlen/cases/engines.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/engine_calls.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"
#include "varlen/contract/resolve.h"

namespace varlen {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json VllmCase() {
  return json::parse(R"({
    "name": "vllm-minimal",
    "source": "unit test",
    "engine": "vllm",
    "vllm": "0.33.0",
    "mode": "faithful",
    "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": 8, "dtype": "bfloat16"},
    "call": {
      "profile": "FLASH_ATTN/fa3",
      "layout": "batched",
      "seq_len": 8,
      "vllm_metadata": {"cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32", "device": "cpu"}}
    }
  })");
}

std::string ErrorFor(const json& j) {
  absl::StatusOr<Case> c = ParseCase(j.dump(), "x.json");
  return c.ok() ? "OK" : std::string(c.status().message());
}

// Each engine is a module: its hooks are all there, and the correct call it
// makes for each of its profiles is a valid case that its own entry resolves.
TEST(EngineModuleTest, EveryEngineAnswersEveryHook) {
  Geometry g;
  g.seq_lens = {5, 3};
  g.num_heads = g.num_kv_heads = 2;
  g.head_dim = g.head_dim_v = 16;
  g.dtype = DType::kBFloat16;
  for (Engine engine : AllEngines()) {
    const EngineModel& model = ModelOf(engine);
    const EngineCalls& calls = CallsOf(engine);
    ASSERT_NE(model.resolve, nullptr) << model.name;
    ASSERT_NE(model.backend_call, nullptr) << model.name;
    ASSERT_NE(model.default_softmax_scale, nullptr) << model.name;
    ASSERT_NE(calls.validate, nullptr) << model.name;
    ASSERT_NE(calls.can_carry, nullptr) << model.name;
    ASSERT_NE(calls.takes_fused_qkv, nullptr) << model.name;
    ASSERT_NE(calls.set_correct_call, nullptr) << model.name;
    for (Profile profile : ProfilesOf(engine)) {
      ASSERT_TRUE(ProfileCanCarry(profile, g)) << ProfileName(profile);
      // The intended scale of the geometry, or another one the call spells.
      Geometry scaled = g;
      scaled.softmax_scale = 0.3;
      for (const bool prepared : {false, true}) {
        for (const Geometry& geometry : {g, scaled}) {
          if (!ProfileCanCarry(profile, geometry)) continue;
          Case c;
          c.name = "hook";
          c.source = "unit test";
          c.geometry = geometry;
          SetCorrectCall(&c, profile, prepared);
          EXPECT_EQ(c.engine(), engine);
          const absl::StatusOr<Case> read = ParseCase(WriteCase(c), "hook.json");
          ASSERT_TRUE(read.ok()) << ProfileName(profile) << ": " << read.status();
          const Outcome outcome = RunCase(*read, *FindBackend("cpu_reference"));
          EXPECT_EQ(outcome.verdict, Verdict::kPass)
              << ProfileName(profile) << (prepared ? " prepared" : "") << "\n"
              << FormatOutcomeText(*read, "hook.json", outcome);
        }
      }
    }
  }
}

TEST(VllmCaseTest, ReadsAndRoundTrips) {
  absl::StatusOr<Case> c = ParseCase(VllmCase().dump(), "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->engine(), Engine::kVllm);
  EXPECT_EQ(c->call.profile, Profile::kVllmFlashAttnFa3);
  ASSERT_TRUE(c->call.vllm_metadata.has_value());
  absl::StatusOr<Case> again = ParseCase(WriteCase(*c), "x.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *c);
}

TEST(VllmCaseTest, RefusesFieldsOfTheOtherEngine) {
  json j = VllmCase();
  j.erase("engine");
  EXPECT_EQ(ErrorFor(j), "x.json: $.vllm: a version of vLLM needs \"engine\": \"vllm\"");
  j = VllmCase();
  j["sglang"] = "0.5.23";
  EXPECT_EQ(ErrorFor(j), "x.json: $.sglang: a version of SGLang needs \"engine\": \"sglang\"");
  j = VllmCase();
  j["call"]["profile"] = "fa3";
  EXPECT_THAT(ErrorFor(j), HasSubstr("(it is sglang's: name the engine)"));
  j = VllmCase();
  j["call"]["entry"] = "layer";
  EXPECT_THAT(ErrorFor(j), HasSubstr("vLLM has one entry"));
  j = VllmCase();
  j["call"]["kwargs"] = {{"max_seqlen", 5}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.kwargs.max_seqlen: vllm_metadata makes this keyword; give one or the "
            "other");
  j = json::parse(R"({"name": "s", "source": "t", "mode": "faithful",
    "geometry": {"seq_lens": [3], "num_heads": 1, "head_dim": 4, "dtype": "float32"},
    "call": {"profile": "fa3", "layout": "batched_fused_qkv", "seq_len": 3}})");
  EXPECT_THAT(ErrorFor(j), HasSubstr("batched_fused_qkv is a vLLM layout"));
}

TEST(CounterpartTest, CarriesTheArgumentValuesOver) {
  absl::StatusOr<Case> c = ParseCase(VllmCase().dump(), "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<CounterpartCall> sglang = CounterpartCase(*c, Engine::kSglang);
  ASSERT_TRUE(sglang.ok()) << sglang.status();
  const Case& t = sglang->counterpart;
  EXPECT_EQ(t.call.profile, Profile::kFa3);
  EXPECT_EQ(t.call.layout, QLayout::kPacked);
  EXPECT_FALSE(t.call.vllm_metadata.has_value());
  // The builders' keywords, spelled out: a 0-d host max_seqlen.
  ASSERT_EQ(t.call.kwargs.size(), 1u);
  EXPECT_EQ(t.call.kwargs[0].first, "max_seqlen");
  EXPECT_EQ(t.call.kwargs[0].second.tensor.shape, Shape{});
  EXPECT_EQ(t.call.kwargs[0].second.tensor.ints, std::vector<int64_t>{5});
  // SGLang resolves it; back in vLLM the packed q is misread.
  EXPECT_EQ(RunCase(t, *FindBackend("cpu_reference")).observed, Observed::kSuccess);
  absl::StatusOr<CounterpartCall> back = CounterpartCase(t, Engine::kVllm);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->counterpart.call.profile, Profile::kVllmFlashAttnFa3);
  const Outcome there = RunCase(back->counterpart, *FindBackend("cpu_reference"));
  EXPECT_EQ(FormatPythonError(there.error),
            "RuntimeError: shape '[8, 2, 2, 8]' is invalid for input of size 128");
}

TEST(CounterpartTest, NamesAProfileWithoutOne) {
  json j = VllmCase();
  j.erase("engine");
  j.erase("vllm");
  j["call"] = {{"profile", "ascend_attn"}};
  absl::StatusOr<Case> c = ParseCase(j.dump(), "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(std::string(CounterpartCase(*c, Engine::kVllm).status().message()),
              HasSubstr("sglang:ascend_attn has no modelled counterpart in vLLM"));
}

TEST(CounterpartTest, ReachesTransformersAndBack) {
  EXPECT_EQ(CounterpartProfile(Profile::kFa3, Engine::kTransformers), Profile::kTfFlashAttention3);
  EXPECT_EQ(CounterpartProfile(Profile::kTfFlashAttention2, Engine::kSglang), Profile::kFa3);
  EXPECT_EQ(CounterpartProfile(Profile::kTfEager, Engine::kVllm), Profile::kVllmTorchSdpa);
  EXPECT_FALSE(CounterpartProfile(Profile::kTritonAttn, Engine::kTransformers).has_value());
  // vLLM's builder keywords -> transformers' layer with cu_seqlens and the
  // tower's max_seqlen; its sequence_lengths is not the layer's.
  absl::StatusOr<Case> c = ParseCase(VllmCase().dump(), "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<CounterpartCall> tf = CounterpartCase(*c, Engine::kTransformers);
  ASSERT_TRUE(tf.ok()) << tf.status();
  const Case& t = tf->counterpart;
  EXPECT_EQ(t.call.profile, Profile::kTfFlashAttention3);
  EXPECT_EQ(t.call.entry, Entry::kLayer);
  EXPECT_EQ(t.call.layout, QLayout::kPacked);
  ASSERT_EQ(t.call.kwargs.size(), 1u);
  EXPECT_EQ(t.call.kwargs[0].first, "max_seqlen");
  EXPECT_EQ(RunCase(t, *FindBackend("cpu_reference")).observed, Observed::kSuccess);
  // transformers' interface keywords -> SGLang's cu_seqlens and max_seqlen.
  Case direct = t;
  direct.call.entry = Entry::kDirect;
  direct.call.kwargs = {{"cu_seq_lens_q", direct.call.cu_seqlens},
                        {"cu_seq_lens_k", direct.call.cu_seqlens},
                        {"max_length_q", ArgLiteral::Int(5)},
                        {"max_length_k", ArgLiteral::Int(5)},
                        {"scaling", ArgLiteral::Float(0.25)}};
  direct.call.cu_seqlens = ArgLiteral::None();
  absl::StatusOr<CounterpartCall> sglang = CounterpartCase(direct, Engine::kSglang);
  ASSERT_TRUE(sglang.ok()) << sglang.status();
  EXPECT_EQ(sglang->counterpart.call.cu_seqlens, t.call.cu_seqlens);
  ASSERT_EQ(sglang->counterpart.call.kwargs.size(), 1u);
  EXPECT_EQ(sglang->counterpart.call.kwargs[0].first, "max_seqlen");
  EXPECT_THAT(sglang->notes.back(), HasSubstr("cu_seq_lens_k, max_length_k, scaling dropped"));
  // Fewer key/value heads have no layer to go through.
  Case gqa = *c;
  gqa.geometry.num_kv_heads = 1;
  EXPECT_THAT(std::string(CounterpartCase(gqa, Engine::kTransformers).status().message()),
              HasSubstr("no counterpart there"));
}

}  // namespace
}  // namespace varlen
