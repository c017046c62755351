// Tests strict case loading (errors name origin and JSON path), defaults, writing and round trips.

#include "varlen/cases/case_json.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "varlen/cases/case.h"
#include "varlen/core/tensor.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using json = nlohmann::json;

// The smallest valid case: only required fields.
json Minimal() {
  return json::parse(R"({
    "name": "minimal",
    "source": "unit test",
    "mode": "faithful",
    "geometry": {"seq_lens": [3, 5], "num_heads": 2, "head_dim": 4, "dtype": "float32"},
    "call": {"profile": "fa3"}
  })");
}

// The message ParseCase gives for `j`, or "OK".
std::string ErrorFor(const json& j) {
  absl::StatusOr<Case> c = ParseCase(j.dump(), "x.json");
  if (c.ok()) return "OK";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

Case ParseOrDie(const std::string& text) {
  absl::StatusOr<Case> c = ParseCase(text, "x.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Case{};
}

json IntTensorJson(std::vector<int64_t> values, const char* dtype = "int32") {
  return {{"tensor", values}, {"dtype", dtype}, {"device", "cuda"}};
}

// ---------------------------------------------------------------------------
// Syntax and unknown fields

TEST(ParseCaseTest, MinimalCaseParses) { EXPECT_EQ(ErrorFor(Minimal()), "OK"); }

TEST(ParseCaseTest, TruncatedJsonIsInvalidJson) {
  const std::string text = Minimal().dump();
  absl::StatusOr<Case> c = ParseCase(text.substr(0, text.size() / 2), "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), StartsWith("x.json: invalid JSON: "));

  absl::StatusOr<Case> empty = ParseCase("", "empty.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), StartsWith("empty.json: invalid JSON: "));
}

TEST(ParseCaseTest, DefaultOriginIsNamed) {
  absl::StatusOr<Case> c = ParseCase("[]");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "<case>: $: expected an object, got array []");
}

TEST(ParseCaseTest, UnknownTopLevelField) {
  json j = Minimal();
  j["expected"] = "success";
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.expected: unknown field (expected one of: name, source, description, "
            "engine, sglang, vllm, transformers, platform, mode, geometry, data, call, warmup, "
            "expect)");
}

TEST(ParseCaseTest, UnknownNestedFields) {
  json j = Minimal();
  j["geometry"]["heads"] = 2;
  EXPECT_EQ(
      ErrorFor(j),
      "x.json: $.geometry.heads: unknown field (expected one of: seq_lens, num_heads, "
      "num_kv_heads, head_dim, head_dim_v, dtype, softmax_scale, causal, window, sinks, padding)");

  j = Minimal();
  j["call"]["max_seqlen"] = 5;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.max_seqlen: unknown field (expected one of: profile, entry, "
            "graph_mode, layout, merged_heads, rotary, windows, qkv_device, bsz, seq_len, "
            "cu_seqlens, "
            "forward_metadata, vllm_metadata, kwargs, sdpa)");

  j = Minimal();
  j["data"] = {{"sead", 1}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.data.sead: unknown field (expected one of: seed, distribution, files)");

  j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 3, 8});
  j["call"]["cu_seqlens"]["values"] = json::array();
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens.values: unknown field (expected one of: tensor, dtype, "
            "device, shape, step, float, singleton_cache, empty_like)");

  // A key of another value form is unknown once the form is known.
  j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 3, 8});
  j["call"]["cu_seqlens"]["float"] = 1.5;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens.float: unknown field (expected one of: tensor, dtype, "
            "device, shape, step)");

  j = Minimal();
  j["call"]["kwargs"] = {{"max_seqlen", {{"float", 5.0}, {"dtype", "float32"}}}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.kwargs.max_seqlen.dtype: unknown field (expected one of: float)");

  j = Minimal();
  j["call"]["forward_metadata"] = {{"builder", "flashinfer_cudnn"},
                                   {"cu_seqlens", IntTensorJson({0, 3, 8})},
                                   {"elem_per_token", 8},
                                   {"max_seqlen", 5}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.forward_metadata.max_seqlen: unknown field (expected one of: builder, "
            "device, cu_seqlens, elem_per_token)");

  j = Minimal();
  j["expect"] = {{"outcome", "success"}, {"syncs", 0}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.expect.syncs: unknown field (expected one of: outcome, error, message, "
            "host_syncs, resolved, unread_keywords)");

  j = Minimal();
  j["call"]["sdpa"] = {{"flatten", true}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.sdpa.flatten: unknown field (expected one of: flatten_batch, "
            "softmax_in_single_precision, softmax_scale)");
}

TEST(ParseCaseTest, MissingRequiredField) {
  json j = Minimal();
  j.erase("source");
  EXPECT_EQ(ErrorFor(j), "x.json: $.source: required field is missing");
  j = Minimal();
  j["geometry"].erase("dtype");
  EXPECT_EQ(ErrorFor(j), "x.json: $.geometry.dtype: required field is missing");
  j = Minimal();
  j["call"].erase("profile");
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.profile: required field is missing");
}

// ---------------------------------------------------------------------------
// Wrong types

TEST(ParseCaseTest, WrongTypesNameThePathAndWhatWasFound) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"geometry": {"num_heads": "16"}})",
       "x.json: $.geometry.num_heads: expected an integer, got string \"16\""},
      {R"({"geometry": {"head_dim": 64.0}})",
       "x.json: $.geometry.head_dim: expected an integer, got number 64.0"},
      {R"({"geometry": {"seq_lens": 5}})",
       "x.json: $.geometry.seq_lens: expected an array of token counts, got number 5"},
      {R"({"geometry": {"seq_lens": [3, "5"]}})",
       "x.json: $.geometry.seq_lens[1]: expected an integer, got string \"5\""},
      {R"({"call": {"graph_mode": "yes"}})",
       "x.json: $.call.graph_mode: expected true or false, got string \"yes\""},
      {R"({"call": {"profile": 3}})", "x.json: $.call.profile: expected a string, got number 3"},
      {R"({"call": {"profile": "flash"}})",
       "x.json: $.call.profile: profile \"flash\" is not one of sglang's flashinfer_cudnn, fa3, "
       "triton_attn, sdpa, fa4, aiter_attn, ascend_attn, amx_attn, xpu_attn"},
      {R"({"mode": "fast"})", "x.json: $.mode: mode \"fast\" is not one of faithful, hardened"},
      {R"({"geometry": {"dtype": "int8"}})",
       "x.json: $.geometry.dtype: dtype \"int8\" is not one of float32, float16, bfloat16, "
       "float64, int16, int32, int64, bool"},
      {R"({"call": {"kwargs": []}})", "x.json: $.call.kwargs: expected an object, got array []"},
      {R"({"data": {"seed": -1}})",
       "x.json: $.data.seed: expected an integer in [0, 2^64), got number -1"},
      {R"({"data": {"distribution": "gaussian"}})",
       "x.json: $.data.distribution: distribution \"gaussian\" is not one of normal, uniform, "
       "sparse_small_integers, large_logits, dominant_logit, constant_rows, non_finite, "
       "subnormal"},
      {R"({"call": {"kwargs": {"max_seqlen": {"dtype": "int32"}}}})",
       "x.json: $.call.kwargs.max_seqlen: an object value must have one of the keys tensor, "
       "float, singleton_cache, empty_like"},
      {R"({"call": {"kwargs": {"max_seqlen": {}}}})",
       "x.json: $.call.kwargs.max_seqlen: an object value must have one of the keys tensor, "
       "float, singleton_cache, empty_like"},
      {R"({"call": {"kwargs": {"output_ws": {"empty_like": "k"}}}})",
       "x.json: $.call.kwargs.output_ws.empty_like: expected \"q\", got string \"k\""},
      {R"({"call": {"cu_seqlens": {"tensor": [0, 1.5], "dtype": "int32", "device": "cuda"}}})",
       "x.json: $.call.cu_seqlens.tensor[1]: expected an integer, got number 1.5"},
      {R"({"call": {"cu_seqlens": {"tensor": [0, 3], "dtype": "int32", "device": "gpu"}}})",
       "x.json: $.call.cu_seqlens.device: device \"gpu\" is not one of cpu, cuda"},
      {R"({"call": {"kwargs": {"max_seqlen": {"float": "infinity"}}}})",
       "x.json: $.call.kwargs.max_seqlen.float: expected a number or one of \"nan\", \"inf\", "
       "\"-inf\", got string \"infinity\""},
      {R"({"geometry": [3, 5]})", "x.json: $.geometry: expected an object, got array [3,5]"},
      {R"({"expect": {"outcome": "success", "resolved": 3}})",
       "x.json: $.expect.resolved: expected an object, got number 3"},
  };
  for (const auto& [patch, expected] : cases) {
    SCOPED_TRACE(patch);
    json j = Minimal();
    j.merge_patch(json::parse(patch));
    EXPECT_EQ(ErrorFor(j), expected);
  }
}

TEST(ParseCaseTest, IntegerBeyondInt64IsRefused) {
  json j = Minimal();
  j["call"]["kwargs"] = {{"max_seqlen", std::numeric_limits<uint64_t>::max()}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.kwargs.max_seqlen: 18446744073709551615 does not fit in a 64-bit "
            "signed integer");
}

// ---------------------------------------------------------------------------
// Impossible values

TEST(ParseCaseTest, NegativeSequenceLength) {
  json j = Minimal();
  j["geometry"]["seq_lens"] = {3, 5, -5};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.seq_lens[2]: -5 is negative: sequence lengths must be >= 0");
}

TEST(ParseCaseTest, HugeDimensions) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"geometry": {"head_dim": 100000}})",
       "x.json: $.geometry.head_dim: 100000 is outside [1, 512]: head dimension"},
      {R"({"geometry": {"head_dim": 0}})",
       "x.json: $.geometry.head_dim: 0 is outside [1, 512]: head dimension"},
      {R"({"geometry": {"head_dim_v": 513}})",
       "x.json: $.geometry.head_dim_v: 513 is outside [1, 512]: value head dimension"},
      {R"({"geometry": {"num_heads": 5000}})",
       "x.json: $.geometry.num_heads: 5000 is outside [1, 1024]: heads per rank"},
      {R"({"geometry": {"seq_lens": [2147483647, 1]}})",
       "x.json: $.geometry.seq_lens: the sequences hold more than 2147483647 tokens, the limit "
       "of int32 token offsets"},
      {R"({"geometry": {"seq_lens": [1, 3000000000]}})",
       "x.json: $.geometry.seq_lens[1]: 3000000000 is outside [0, 2147483647]: a sequence "
       "length must fit in int32"},
  };
  for (const auto& [patch, expected] : cases) {
    SCOPED_TRACE(patch);
    json j = Minimal();
    j.merge_patch(json::parse(patch));
    EXPECT_EQ(ErrorFor(j), expected);
  }
  // The largest total that fits is accepted (and runs resolution only).
  json j = Minimal();
  j["geometry"]["seq_lens"] = {2147483646, 1};
  EXPECT_EQ(ErrorFor(j), "OK");
}

TEST(ParseCaseTest, KvHeadsMustDivideHeads) {
  json j = Minimal();
  j["geometry"]["num_heads"] = 6;
  j["geometry"]["num_kv_heads"] = 4;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.num_kv_heads: 4 does not divide num_heads=6: grouped-query "
            "attention needs whole groups");
  j["geometry"]["num_kv_heads"] = 8;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.num_kv_heads: 8 is outside [1, 6]: key/value heads cannot "
            "outnumber query heads");
  j["geometry"]["num_kv_heads"] = 3;
  EXPECT_EQ(ErrorFor(j), "OK");
}

TEST(ParseCaseTest, GeometryDTypeMustBeFloating) {
  json j = Minimal();
  j["geometry"]["dtype"] = "int32";
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.dtype: int32 is not a floating dtype: q, k and v hold activations");
}

TEST(ParseCaseTest, NameMustBeSpelledSafely) {
  json j = Minimal();
  j["name"] = "bad name";
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.name: \"bad name\" must be non-empty and use only letters, digits, '-', "
            "'_' and '.'");
}

TEST(ParseCaseTest, Int32TensorLiteralOutOfRange) {
  json j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 2147483648});
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.cu_seqlens.tensor[1]: 2147483648 does not fit in int32");

  j["call"]["cu_seqlens"] = IntTensorJson({0, 2147483648}, "int64");
  EXPECT_EQ(ErrorFor(j), "OK");

  j = Minimal();
  j["call"]["kwargs"] = {{"sequence_lengths", IntTensorJson({-2147483649})}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.kwargs.sequence_lengths.tensor[0]: -2147483649 does not fit in int32");

  j = Minimal();
  j["call"]["cu_seqlens"] = {IntTensorJson({0, 3, 4294967296}), 5};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens[0].tensor[2]: 4294967296 does not fit in int32");

  j = Minimal();
  j["call"]["cu_seqlens"] = {{"singleton_cache", IntTensorJson({0, 2147483648})}};
  EXPECT_EQ(
      ErrorFor(j),
      "x.json: $.call.cu_seqlens.singleton_cache.tensor[1]: 2147483648 does not fit in int32");

  j = Minimal();
  j["call"]["forward_metadata"] = {{"builder", "plain"},
                                   {"cu_seqlens", IntTensorJson({0, 3, 2147483648})}};
  EXPECT_EQ(
      ErrorFor(j),
      "x.json: $.call.forward_metadata.cu_seqlens.tensor[2]: 2147483648 does not fit in int32");
}

TEST(ParseCaseTest, Int16TensorLiteralOutOfRange) {
  json j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 8, 32767}, "int16");
  EXPECT_EQ(ErrorFor(j), "OK");
  j["call"]["cu_seqlens"] = IntTensorJson({0, 8, 32768}, "int16");
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.cu_seqlens.tensor[2]: 32768 does not fit in int16");
  j["call"]["cu_seqlens"] = IntTensorJson({-32769}, "int16");
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.cu_seqlens.tensor[0]: -32769 does not fit in int16");
}

TEST(ParseCaseTest, StepMakesAStridedViewOfAZeroFilledBase) {
  json j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 3, 8});
  j["call"]["cu_seqlens"]["step"] = 2;
  const Case c = ParseOrDie(j.dump());
  const TensorLiteral& literal = c.call.cu_seqlens.tensor;
  EXPECT_EQ(literal.step, 2);
  const Tensor t = MakeTensor(literal);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_THAT(t.shape(), ElementsAre(3));
  EXPECT_THAT(t.strides(), ElementsAre(2));
  EXPECT_THAT(t.ToHostInts("cu_seqlens"), ElementsAre(0, 3, 8));
  // The rows between are the base's zeros.
  EXPECT_THAT(t.AsStrided({6}, {1}, 0).ToHostInts("base"), ElementsAre(0, 0, 3, 0, 8, 0));
  // A 2-d literal steps over whole rows.
  j["call"]["cu_seqlens"] = IntTensorJson({1, 2, 3, 4});
  j["call"]["cu_seqlens"]["shape"] = {2, 2};
  j["call"]["cu_seqlens"]["step"] = 3;
  const Tensor table = MakeTensor(ParseOrDie(j.dump()).call.cu_seqlens.tensor);
  EXPECT_THAT(table.strides(), ElementsAre(6, 1));
  EXPECT_THAT(table.ToHostInts("x"), ElementsAre(1, 2, 3, 4));
  // And the literal a view is written back as says the same.
  EXPECT_TRUE(LiteralOfTensor(table) == ParseOrDie(j.dump()).call.cu_seqlens.tensor);
}

TEST(ParseCaseTest, StepErrorsNameTheRule) {
  json j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 3, 8});
  j["call"]["cu_seqlens"]["step"] = 0;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens.step: 0 is outside [1, 1000000]: a view takes every "
            "step-th row of its base");
  j["call"]["cu_seqlens"]["step"] = "2";
  EXPECT_THAT(ErrorFor(j), StartsWith("x.json: $.call.cu_seqlens.step: expected an integer"));
  j["call"]["cu_seqlens"] = IntTensorJson({7});
  j["call"]["cu_seqlens"]["shape"] = json::array();
  j["call"]["cu_seqlens"]["step"] = 2;
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.cu_seqlens.step: a 0-d tensor has no rows to step over");
  j["call"]["cu_seqlens"] = IntTensorJson({0, 3, 8});
  j["call"]["cu_seqlens"]["step"] = 400000;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens.step: a base of 3 x 400000 elements exceeds the limit of "
            "1000000 per literal tensor");
}

TEST(ParseCaseTest, ShapeMustHoldTheGivenValues) {
  json j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 1, 2});
  j["call"]["cu_seqlens"]["shape"] = {2, 2};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens.shape: shape [2, 2] holds 4 values but 3 are given");

  j["call"]["cu_seqlens"]["shape"] = json::array();
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.cu_seqlens.shape: shape [] holds 1 values but 3 are given");

  j["call"]["cu_seqlens"]["shape"] = {3, 1, 1, 1};
  EXPECT_EQ(ErrorFor(j), "OK");

  j["call"]["cu_seqlens"]["shape"] = {3, -1};
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.cu_seqlens.shape[1]: -1 is not a size in [0, 1000000]");
}

TEST(ParseCaseTest, ErrorAndMessageOnlyWithErrorOutcome) {
  json j = Minimal();
  j["expect"] = {{"outcome", "success"}, {"message", "boom"}};
  EXPECT_EQ(ErrorFor(j), "x.json: $.expect.message: only allowed when outcome is \"error\"");

  j["expect"] = {{"outcome", "silent_corruption"}, {"error", "RuntimeError"}};
  EXPECT_EQ(ErrorFor(j), "x.json: $.expect.error: only allowed when outcome is \"error\"");

  j["expect"] = {{"outcome", "error"}, {"error", "RuntimeError"}};
  EXPECT_EQ(ErrorFor(j), "x.json: $.expect.message: required when outcome is \"error\"");

  j["expect"] = {{"outcome", "error"}, {"message", "boom"}};
  EXPECT_EQ(ErrorFor(j), "x.json: $.expect.error: required when outcome is \"error\"");

  j["expect"] = {{"outcome", "error"}, {"error", "LookupError"}, {"message", "boom"}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.expect.error: \"LookupError\" is not a Python error kind this harness "
            "models (RuntimeError, TypeError, ValueError, AssertionError, AttributeError, "
            "OverflowError, IndexError, ZeroDivisionError, NotImplementedError, Exception, "
            "KeyError, DSLRuntimeError)");

  j["expect"] = {{"outcome", "failure"}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.expect.outcome: outcome \"failure\" is not one of error, success, "
            "silent_corruption");

  j["expect"] = {{"outcome", "success"}, {"host_syncs", -1}};
  EXPECT_EQ(ErrorFor(j), "x.json: $.expect.host_syncs: -1 is outside [0, 1000]");
}

TEST(ParseCaseTest, SilentCorruptionNeedsAForwardRun) {
  json j = Minimal();
  j["geometry"] = {
      {"seq_lens", {100000}}, {"num_heads", 16}, {"head_dim", 64}, {"dtype", "bfloat16"}};
  j["expect"] = {{"outcome", "silent_corruption"}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.expect.outcome: silent_corruption can only be observed by a forward run, "
            "and this geometry exceeds the CPU budget (run resolution only)");
  j["expect"] = {{"outcome", "success"}};
  EXPECT_EQ(ErrorFor(j), "OK");
  j = Minimal();
  j["expect"] = {{"outcome", "silent_corruption"}};
  EXPECT_EQ(ErrorFor(j), "OK");
}

TEST(ParseCaseTest, LayerEntryNeedsTokens) {
  json j = Minimal();
  j["geometry"]["seq_lens"] = {0, 0};
  j["call"]["entry"] = "layer";
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.entry: the attention layer fails before any backend on an empty "
            "batch; use entry \"direct\" for zero tokens");
  j["geometry"]["seq_lens"] = json::array();
  EXPECT_THAT(ErrorFor(j), HasSubstr("$.call.entry: the attention layer fails"));
  j["call"]["entry"] = "direct";
  EXPECT_EQ(ErrorFor(j), "OK");
}

TEST(ParseCaseTest, BatchedLayoutOnlyForFlashinferCudnn) {
  json j = Minimal();
  j["call"]["layout"] = "batched";
  j["call"]["bsz"] = 2;
  j["call"]["seq_len"] = 4;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.layout: batched [b, s, h, d] q is only accepted by flashinfer_cudnn "
            "(and vLLM)");
  j["call"]["profile"] = "flashinfer_cudnn";
  EXPECT_EQ(ErrorFor(j), "OK");
  j["call"]["seq_len"] = 3;
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.layout: bsz=2 x seq_len=3: the batched layout needs bsz * seq_len "
            "== 8 (the total of geometry.seq_lens)");
}

TEST(ParseCaseTest, MergedHeadsOnlyForVllmBatchedLayouts) {
  json j = Minimal();
  j["call"]["merged_heads"] = true;
  const std::string rule =
      "x.json: $.call.merged_heads: [bsz, seq_len, H * D] is vLLM's form of a batched layout: "
      "use an engine \"vllm\" profile with layout \"batched\" or \"batched_fused_qkv\"";
  EXPECT_EQ(ErrorFor(j), rule);
  j["engine"] = "vllm";
  j["call"]["profile"] = "FLASH_ATTN/fa2";
  EXPECT_EQ(ErrorFor(j),  // packed
            "x.json: $.call.merged_heads: [bsz, seq_len, H * D] is vLLM's form of a batched "
            "layout: use layout \"batched\" or \"batched_fused_qkv\"");
  j["call"]["layout"] = "batched";
  j["call"]["seq_len"] = 8;
  EXPECT_EQ(ErrorFor(j), "OK");
  const Case c = ParseOrDie(j.dump());
  EXPECT_TRUE(c.call.merged_heads);
  EXPECT_THAT(WriteCase(c), HasSubstr("\"merged_heads\": true"));
  j["call"]["merged_heads"] = 1;
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.merged_heads: expected true or false, got number 1");
}

TEST(ParseCaseTest, QkvDeviceDefaultsToTheProfilesPlatform) {
  json j = Minimal();
  Case c = ParseOrDie(j.dump());
  EXPECT_FALSE(c.call.qkv_device.has_value());
  EXPECT_EQ(c.QkvDevice(), Device::kCuda);  // fa3 runs on a GPU
  j["call"]["profile"] = "amx_attn";
  c = ParseOrDie(j.dump());
  EXPECT_EQ(c.QkvDevice(), Device::kCpu);  // VisionAMXAttention constructs on a CPU only
  EXPECT_THAT(WriteCase(c), Not(HasSubstr("qkv_device")));
  j["call"]["qkv_device"] = "cuda";
  c = ParseOrDie(j.dump());
  EXPECT_EQ(c.QkvDevice(), Device::kCuda);
  EXPECT_THAT(WriteCase(c), HasSubstr("\"qkv_device\": \"cuda\""));
  EXPECT_TRUE(ParseOrDie(WriteCase(c)) == c);
  j["call"]["qkv_device"] = "npu";
  EXPECT_EQ(ErrorFor(j), "x.json: $.call.qkv_device: device \"npu\" is not one of cpu, cuda");
}

TEST(ParseCaseTest, TowerWindowsDefaultToQwen25VlsConfig) {
  json j = Minimal();
  j["engine"] = "transformers";
  j["call"] = json::parse(R"({"profile": "flash_attention_2", "entry": "tower", "windows": {},
    "kwargs": {"grid_thw": {"tensor": [1, 2, 4], "dtype": "int64", "device": "cuda",
                            "shape": [1, 3]}}})");
  Case c = ParseOrDie(j.dump());
  ASSERT_TRUE(c.call.windows.has_value());
  EXPECT_EQ(*c.call.windows,
            (TowerWindows{.window_size = 112, .patch_size = 14, .spatial_merge_size = 2}));
  EXPECT_TRUE(ParseOrDie(WriteCase(c)) == c);
  j["call"]["windows"] = {{"window_size", 10}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.windows: window_size // spatial_merge_size // patch_size is 10 // 2 "
            "// 14 = 0: a window must hold a merged cell");
  j["call"]["windows"] = {{"patch_size", 0}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.windows.patch_size: 0 is below 1: a config size is positive");
  j["call"]["windows"] = json::object();
  j["call"]["entry"] = "layer";
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.call.windows: windows are a vision tower's: use entry \"tower\"");
}

TEST(ParseCaseTest, AttentionVariantsInTheGeometry) {
  json j = Minimal();
  j["geometry"]["causal"] = true;
  Case c = ParseOrDie(j.dump());
  EXPECT_TRUE(c.geometry.variant.causal());
  EXPECT_TRUE(ParseOrDie(WriteCase(c)) == c);
  j["geometry"]["window"] = {128, 0};
  j["geometry"]["sinks"] = json::array();
  for (int64_t h = 0; h < c.geometry.num_heads; ++h)
    j["geometry"]["sinks"].push_back(h == 0 ? json("-inf") : json(0.5));
  c = ParseOrDie(j.dump());
  EXPECT_EQ(c.geometry.variant.window_left, 128);
  EXPECT_EQ(c.geometry.variant.window_right, 0);
  EXPECT_EQ(c.geometry.variant.Describe(), "window (128, 0) + sinks");
  EXPECT_TRUE(ParseOrDie(WriteCase(c)) == c);
  j["geometry"]["window"] = {128, 4};
  EXPECT_EQ(
      ErrorFor(j),
      "x.json: $.geometry.causal: causal attention is a right bound of 0, and window[1] is 4");
  j["geometry"].erase("causal");
  j["geometry"]["window"] = {-2, 4};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.window[0]: -2 is outside [-1, 2147483647]: -1 (no bound) or a "
            "count of tokens");
  j["geometry"]["window"] = {3, 4};
  j["geometry"]["sinks"] = {1.0};
  EXPECT_THAT(ErrorFor(j), testing::HasSubstr("$.geometry.sinks: 1 sinks for num_heads="));
  j["geometry"]["sinks"] = json::array();
  for (int64_t h = 0; h < c.geometry.num_heads; ++h) j["geometry"]["sinks"].push_back("nan");
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.sinks[0]: nan: a sink is a float32 logit, or \"-inf\" for none");
}

TEST(ParseCaseTest, PaddingRowsInTheGeometry) {
  json j = Minimal();  // seq_lens [3, 5]
  j["geometry"]["padding"] = 4;
  Case c = ParseOrDie(j.dump());
  EXPECT_THAT(c.geometry.padding, ElementsAre(0, 0, 4));
  EXPECT_EQ(c.geometry.total_tokens(), 12);
  EXPECT_THAT(c.geometry.SequenceStarts(), ElementsAre(0, 3));
  EXPECT_EQ(CaseToJson(c)["geometry"]["padding"], json(4));
  EXPECT_TRUE(ParseOrDie(WriteCase(c)) == c);
  j["geometry"]["padding"] = {2, 1, 0};
  c = ParseOrDie(j.dump());
  EXPECT_EQ(c.geometry.total_tokens(), 11);
  EXPECT_THAT(c.geometry.SequenceStarts(), ElementsAre(2, 6));
  EXPECT_TRUE(ParseOrDie(WriteCase(c)) == c);
  j["geometry"]["padding"] = {0, 0, 0};  // none, as no key
  EXPECT_TRUE(ParseOrDie(j.dump()).geometry.padding.empty());
  j["geometry"]["padding"] = {1, 2};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.padding: 2 counts for 2 sequences: one per gap, before the first "
            "sequence and after each (or one integer: rows after the last)");
  j["geometry"]["padding"] = {0, -1, 0};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.padding[1]: -1 is outside [0, 2147483647]: rows in no sequence");
  j["geometry"]["padding"] = "tail";
  EXPECT_THAT(ErrorFor(j), testing::HasSubstr("$.geometry.padding: expected rows after the last "
                                              "sequence, or [before the first, after each]"));
}

// ---------------------------------------------------------------------------
// Defaults

TEST(ParseCaseTest, Defaults) {
  const Case c = ParseOrDie(Minimal().dump());
  EXPECT_EQ(c.name, "minimal");
  EXPECT_EQ(c.source, "unit test");
  EXPECT_EQ(c.description, "");
  EXPECT_EQ(c.mode, Mode::kFaithful);
  EXPECT_THAT(c.geometry.seq_lens, ElementsAre(3, 5));
  EXPECT_EQ(c.geometry.num_heads, 2);
  EXPECT_EQ(c.geometry.num_kv_heads, 2);
  EXPECT_EQ(c.geometry.head_dim, 4);
  EXPECT_EQ(c.geometry.head_dim_v, 4);
  EXPECT_EQ(c.geometry.dtype, DType::kFloat32);
  EXPECT_FALSE(c.geometry.softmax_scale.has_value());
  EXPECT_EQ(c.geometry.scale(), 0.5);
  EXPECT_EQ(c.data.seed, 0u);
  EXPECT_EQ(c.data.distribution, Distribution::kNormal);
  EXPECT_EQ(c.call.profile, Profile::kFa3);
  EXPECT_EQ(c.call.entry, Entry::kDirect);
  EXPECT_FALSE(c.call.graph_mode);
  EXPECT_EQ(c.call.layout, QLayout::kPacked);
  EXPECT_FALSE(c.call.bsz.has_value());
  EXPECT_FALSE(c.call.seq_len.has_value());
  EXPECT_EQ(c.call.cu_seqlens.kind, ArgLiteral::Kind::kNone);
  EXPECT_FALSE(c.call.forward_metadata.has_value());
  EXPECT_TRUE(c.call.kwargs.empty());
  EXPECT_FALSE(c.call.sdpa.flatten_batch);  // SGLang's construction default
  EXPECT_FALSE(c.call.sdpa.softmax_in_single_precision);
  EXPECT_FALSE(c.expect.has_value());
}

TEST(ParseCaseTest, ExplicitNullMetadataIsNone) {
  json j = Minimal();
  j["call"]["forward_metadata"] = nullptr;
  EXPECT_FALSE(ParseOrDie(j.dump()).call.forward_metadata.has_value());
}

TEST(ParseCaseTest, ValuesAreReadAsTheirPythonKinds) {
  json j = Minimal();
  j["call"]["kwargs"] = json::parse(R"({
    "a": 720, "b": 720.0, "c": "720", "d": null, "e": true, "f": {"float": "-inf"},
    "g": [1, [2]], "h": {"empty_like": "q"}, "i": {"singleton_cache": null}
  })");
  const Case c = ParseOrDie(j.dump());
  ASSERT_EQ(c.call.kwargs.size(), 9u);
  const ArgLiteral::Kind expected[] = {
      ArgLiteral::Kind::kInt,  ArgLiteral::Kind::kFloat,      ArgLiteral::Kind::kStr,
      ArgLiteral::Kind::kNone, ArgLiteral::Kind::kBool,       ArgLiteral::Kind::kFloat,
      ArgLiteral::Kind::kList, ArgLiteral::Kind::kEmptyLikeQ, ArgLiteral::Kind::kSingletonCache};
  for (size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(c.call.kwargs[i].second.kind, expected[i]) << c.call.kwargs[i].first;
  }
  EXPECT_EQ(c.call.kwargs[0].second.i, 720);
  EXPECT_EQ(c.call.kwargs[1].second.f, 720.0);
  EXPECT_EQ(c.call.kwargs[2].second.s, "720");
  EXPECT_EQ(c.call.kwargs[5].second.f, -std::numeric_limits<double>::infinity());
  EXPECT_FALSE(c.call.kwargs[8].second.cache_has_data);
}

// ---------------------------------------------------------------------------
// Writing and round trips

TensorLiteral Literal(DType dtype, Device device, std::vector<int64_t> ints,
                      std::optional<Shape> shape = std::nullopt) {
  TensorLiteral t;
  t.dtype = dtype;
  t.device = device;
  t.ints = std::move(ints);
  t.shape = std::move(shape);
  return t;
}

ArgLiteral List(std::vector<ArgLiteral> items) {
  ArgLiteral a;
  a.kind = ArgLiteral::Kind::kList;
  a.list = std::move(items);
  return a;
}

ArgLiteral Bool(bool b) {
  ArgLiteral a;
  a.kind = ArgLiteral::Kind::kBool;
  a.b = b;
  return a;
}

ArgLiteral Cache(std::optional<TensorLiteral> data) {
  ArgLiteral a;
  a.kind = ArgLiteral::Kind::kSingletonCache;
  a.cache_has_data = data.has_value();
  if (data.has_value()) a.tensor = *data;
  return a;
}

ArgLiteral EmptyLikeQ() {
  ArgLiteral a;
  a.kind = ArgLiteral::Kind::kEmptyLikeQ;
  return a;
}

// A case that uses every kind of value. Kwargs are listed in sorted order.
Case EverythingCase() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Case c;
  c.name = "round-trip_all.kinds";
  c.source = "unit test: \"quoted\", back\\slash, new\nline, tab\t, ü, 中文, 🚀";
  c.description = "control \x01 character and a trailing space ";
  c.mode = Mode::kHardened;
  c.geometry.seq_lens = {0, 7, 1};
  c.geometry.num_heads = 6;
  c.geometry.num_kv_heads = 2;
  c.geometry.head_dim = 72;
  c.geometry.head_dim_v = 80;
  c.geometry.dtype = DType::kFloat16;
  c.geometry.softmax_scale = 0.1;
  c.data.seed = std::numeric_limits<uint64_t>::max();
  c.data.distribution = Distribution::kLargeLogits;
  c.call.profile = Profile::kTritonAttn;
  c.call.entry = Entry::kLayer;
  c.call.graph_mode = true;
  c.call.bsz = 1;
  c.call.seq_len = 8;
  c.call.cu_seqlens =
      List({ArgLiteral::IntTensor({0, 0, 7, 8}, DType::kInt32, Device::kCuda),
            ArgLiteral::IntTensor({0, 7, 1}, DType::kInt64, Device::kCpu), ArgLiteral::Int(7)});
  TensorLiteral floats;
  floats.dtype = DType::kFloat32;
  floats.device = Device::kCpu;
  floats.shape = Shape{2, 3};
  floats.floats = {nan, inf, -inf, -0.0, 0.1, 1e-40};
  c.call.kwargs = {
      {"a_nan", ArgLiteral::Float(nan)},
      {"b_inf", ArgLiteral::Float(inf)},
      {"c_neg_inf", ArgLiteral::Float(-inf)},
      {"d_neg_zero", ArgLiteral::Float(-0.0)},
      {"e_integral_float", ArgLiteral::Float(720.0)},
      {"f_denormal", ArgLiteral::Float(5e-324)},
      {"g_largest", ArgLiteral::Float(std::numeric_limits<double>::max())},
      {"h_int_min", ArgLiteral::Int(std::numeric_limits<int64_t>::min())},
      {"i_int_max", ArgLiteral::Int(std::numeric_limits<int64_t>::max())},
      {"j_str", ArgLiteral::Str("4096")},
      {"k_str_nan", ArgLiteral::Str("nan")},
      {"l_str_escapes", ArgLiteral::Str("tab\t \"q\" \\ \n é 😀")},
      {"m_true", Bool(true)},
      {"n_none", ArgLiteral::None()},
      {"o_cache_empty", Cache(std::nullopt)},
      {"p_cache_full", Cache(Literal(DType::kInt64, Device::kCuda, {0, 7, 8}))},
      {"q_workspace", EmptyLikeQ()},
      {"r_float_tensor", ArgLiteral::Tensor(floats)},
      {"s_bool_tensor", ArgLiteral::Tensor(Literal(DType::kBool, Device::kCuda, {1, 0, 1}))},
      {"t_zero_d", ArgLiteral::Tensor(Literal(DType::kInt32, Device::kCuda, {5}, Shape{}))},
      {"u_nested",
       List({List({ArgLiteral::Int(1), List({ArgLiteral::Float(2.5), ArgLiteral::None()})}),
             ArgLiteral::Str("x"), List({})})},
      {"v_unicode_ключ", ArgLiteral::Str("значение")},
  };
  MetadataSpec m;
  m.builder = MetadataSpec::Builder::kManual;
  m.device = Device::kCpu;
  m.cu_seqlens = ArgLiteral::IntTensor({0, 0, 7, 8}, DType::kInt32, Device::kCuda);
  m.seq_lens = ArgLiteral::IntTensor({0, 7, 1}, DType::kInt32, Device::kCuda);
  m.max_seqlen = ArgLiteral::Float(5.9);
  m.sequence_lengths = ArgLiteral::Str("not a tensor");
  m.flashinfer_max_seqlen = ArgLiteral::Int(4096);
  c.call.forward_metadata = m;
  c.call.sdpa.flatten_batch = false;
  c.call.sdpa.softmax_in_single_precision = true;
  Expectation e;
  e.outcome = Expectation::Outcome::kError;
  e.error_kind = PyErrorKind::kValueError;
  e.message = "cu_seqlens[1]=7 != 8: «exact» text\twith \"quotes\"";
  e.host_syncs = 3;
  e.resolved = json::parse(R"({"max_seqlen": 7, "cu_seqlens": {"tensor": [0, 7]}})");
  c.expect = e;
  return c;
}

TEST(WriteCaseTest, EverythingRoundTripsExactly) {
  const Case c = EverythingCase();
  ASSERT_TRUE(ValidateCase(c).ok()) << ValidateCase(c);
  const std::string text = WriteCase(c);
  absl::StatusOr<Case> parsed = ParseCase(text, "written.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_TRUE(*parsed == c) << text;
  // Field by field, for a readable failure.
  EXPECT_EQ(parsed->source, c.source);
  EXPECT_EQ(parsed->description, c.description);
  EXPECT_EQ(parsed->geometry, c.geometry);
  EXPECT_EQ(parsed->data, c.data);
  ASSERT_EQ(parsed->call.kwargs.size(), c.call.kwargs.size());
  for (size_t i = 0; i < c.call.kwargs.size(); ++i) {
    EXPECT_EQ(parsed->call.kwargs[i].first, c.call.kwargs[i].first);
    EXPECT_TRUE(parsed->call.kwargs[i].second == c.call.kwargs[i].second) << c.call.kwargs[i].first;
  }
  EXPECT_TRUE(parsed->call.cu_seqlens == c.call.cu_seqlens);
  EXPECT_TRUE(parsed->call.forward_metadata == c.call.forward_metadata);
  EXPECT_EQ(parsed->call.sdpa, c.call.sdpa);
  EXPECT_TRUE(parsed->expect == c.expect);
  // -0.0 keeps its sign.
  EXPECT_TRUE(std::signbit(parsed->call.kwargs[3].second.f));
  EXPECT_TRUE(std::signbit(parsed->call.kwargs[17].second.tensor.floats[3]));
}

TEST(WriteCaseTest, RoundTripDistinguishesWhatMatters) {
  // The equality the round trip relies on is not vacuous.
  Case c = EverythingCase();
  Case other = c;
  other.call.kwargs[3].second.f = 0.0;  // -0.0 -> 0.0
  EXPECT_FALSE(other == c);
  other = c;
  other.call.kwargs[0].second.f = 1.0;  // NaN -> 1.0
  EXPECT_FALSE(other == c);
  other = c;
  other.call.kwargs[14] = {"o_cache_empty", Cache(Literal(DType::kInt64, Device::kCuda, {}))};
  EXPECT_FALSE(other == c);
}

TEST(WriteCaseTest, KwargsInCallerOrderRoundTrip) {
  // ParseCase(WriteCase(c)) == c holds for every valid case, whatever order
  // the caller's keyword arguments come in.
  Case c = ParseOrDie(Minimal().dump());
  c.call.kwargs = {{"sequence_lengths", ArgLiteral::None()}, {"max_seqlen", ArgLiteral::Int(5)}};
  absl::StatusOr<Case> parsed = ParseCase(WriteCase(c), "written.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == c) << WriteCase(*parsed);
}

TEST(WriteCaseTest, MinimalRoundTripsAndWritesDefaultsExplicitly) {
  const Case c = ParseOrDie(Minimal().dump());
  const std::string text = WriteCase(c);
  EXPECT_TRUE(ParseOrDie(text) == c);
  EXPECT_THAT(text, HasSubstr("\"num_kv_heads\": 2"));
  EXPECT_THAT(text, HasSubstr("\"head_dim_v\": 4"));
  EXPECT_THAT(text, HasSubstr("\"entry\": \"direct\""));
  EXPECT_THAT(text, HasSubstr("\"cu_seqlens\": null"));
  EXPECT_THAT(text, HasSubstr("\"kwargs\": {}"));
  EXPECT_THAT(text, Not(HasSubstr("\"expect\"")));
  EXPECT_THAT(text, Not(HasSubstr("\"sdpa\"")));  // defaults, not an sdpa profile
  EXPECT_EQ(text.back(), '\n');
}

TEST(WriteCaseTest, OutputIsStable) {
  for (const Case& c : {EverythingCase(), ParseOrDie(Minimal().dump())}) {
    const std::string once = WriteCase(c);
    const std::string twice = WriteCase(ParseOrDie(once));
    EXPECT_EQ(twice, once);
  }
}

TEST(WriteCaseTest, ArraysOfNumbersStayOnOneLine) {
  Case c = ParseOrDie(Minimal().dump());
  c.call.cu_seqlens = ArgLiteral::IntTensor({0, 3, 8}, DType::kInt32, Device::kCuda);
  const std::string text = WriteCase(c);
  const size_t at = text.find("\"seq_lens\": ");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string line = text.substr(at, text.find('\n', at) - at);
  EXPECT_THAT(line, StartsWith("\"seq_lens\": [3"));
  EXPECT_THAT(line, HasSubstr("5]"));
  const size_t tensor = text.find("\"tensor\": [0");
  ASSERT_NE(tensor, std::string::npos) << text;
  EXPECT_LT(text.find("8]", tensor), text.find('\n', tensor));
}

// ---------------------------------------------------------------------------
// Warmup calls

// Minimal() with one warmup patch per argument.
json WithWarmup(std::vector<json> patches) {
  json j = Minimal();
  j["warmup"] = patches;
  return j;
}

TEST(WarmupTest, EachPatchMakesAValidCaseWithoutWarmupOrExpectation) {
  json j =
      WithWarmup({json::parse(R"({"geometry": {"dtype": "bfloat16"}})"),
                  json::parse(R"({"data": {"seed": 7}, "call": {"kwargs": {"max_seqlen": 5}}})")});
  j["expect"] = {{"outcome", "success"}};
  const Case c = ParseOrDie(j.dump());
  ASSERT_EQ(c.warmup.size(), 2u);
  EXPECT_EQ(c.warmup[0].patch,
            nlohmann::ordered_json::parse(R"({"geometry": {"dtype": "bfloat16"}})"));
  const Case& first = c.warmup[0].patched;
  EXPECT_EQ(first.geometry.dtype, DType::kBFloat16);
  EXPECT_EQ(first.geometry.seq_lens, c.geometry.seq_lens);
  EXPECT_EQ(first.name, c.name);
  EXPECT_FALSE(first.expect.has_value());
  EXPECT_TRUE(first.warmup.empty());
  const Case& second = c.warmup[1].patched;
  EXPECT_EQ(second.geometry.dtype, DType::kFloat32);
  EXPECT_EQ(second.data.seed, 7u);
  ASSERT_EQ(second.call.kwargs.size(), 1u);
  EXPECT_EQ(second.call.kwargs[0].first, "max_seqlen");
  EXPECT_TRUE(second.call.kwargs[0].second == ArgLiteral::Int(5));
  EXPECT_TRUE(c.call.kwargs.empty()) << "the case's own call is not patched";
}

TEST(WarmupTest, PatchesApplyToTheCanonicalCase) {
  // Every default is spelled out before the patch applies: num_kv_heads
  // stays 2 when a patch changes num_heads alone.
  const Case c = ParseOrDie(WithWarmup({{{"geometry", {{"num_heads", 4}}}}}).dump());
  ASSERT_EQ(c.warmup.size(), 1u);
  EXPECT_EQ(c.warmup[0].patched.geometry.num_heads, 4);
  EXPECT_EQ(c.warmup[0].patched.geometry.num_kv_heads, 2);
  // null removes a field (RFC 7386): here the optional cu_seqlens.
  json j = Minimal();
  j["call"]["cu_seqlens"] = IntTensorJson({0, 3, 8});
  j["warmup"] = json::array({json::parse(R"({"call": {"cu_seqlens": null}})")});
  const Case removed = ParseOrDie(j.dump());
  EXPECT_TRUE(removed.warmup[0].patched.call.cu_seqlens == ArgLiteral::None());
}

TEST(WarmupTest, RoundTripsExactlyAndKeepsThePatches) {
  Case c = EverythingCase();
  for (
      const char* patch :
      {R"({"geometry": {"dtype": "float16", "softmax_scale": 0.5}, "call": {"kwargs": {"z_new": 1}}})",
       R"({"description": "second", "data": {"distribution": "uniform"}})"}) {
    absl::StatusOr<Case::Warmup> warmup = MakeWarmup(c, nlohmann::ordered_json::parse(patch));
    ASSERT_TRUE(warmup.ok()) << warmup.status();
    c.warmup.push_back(*std::move(warmup));
  }
  ASSERT_TRUE(ValidateCase(c).ok()) << ValidateCase(c);
  EXPECT_EQ(c.warmup[0].patched.call.kwargs.back().first, "z_new");
  const std::string text = WriteCase(c);
  EXPECT_THAT(text, HasSubstr("\"warmup\": [\n"));
  absl::StatusOr<Case> parsed = ParseCase(text, "written.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_TRUE(*parsed == c) << text;
  ASSERT_EQ(parsed->warmup.size(), 2u);
  EXPECT_EQ(parsed->warmup[0].patch, c.warmup[0].patch);
  EXPECT_TRUE(parsed->warmup[1].patched == c.warmup[1].patched);
  EXPECT_EQ(WriteCase(*parsed), text);

  // The equality sees the warmup calls.
  Case other = c;
  other.warmup.pop_back();
  EXPECT_FALSE(other == c);
  other = c;
  other.warmup[1].patch["description"] = "third";
  EXPECT_FALSE(other == c);
  other = c;
  other.warmup[0].patched.data.seed += 1;
  EXPECT_FALSE(other == c);
}

TEST(WarmupTest, ErrorsNameThePatchAndThePathInIt) {
  json j = Minimal();
  j["warmup"] = {{"geometry", {{"dtype", "bfloat16"}}}};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.warmup: expected an array of JSON merge patches of this case, got object "
            "{\"geometry\":{\"dtype\":\"bfloat16\"}}");
  EXPECT_EQ(ErrorFor(WithWarmup({json::array({1})})),
            "x.json: $.warmup[0]: expected an object (a JSON merge patch of this case), got array "
            "[1]");
  EXPECT_EQ(ErrorFor(WithWarmup({json::object(), {{"geometry", {{"dtype", "int32"}}}}})),
            "x.json: $.warmup[1].geometry.dtype: int32 is not a floating dtype: q, k and v hold "
            "activations");
  EXPECT_EQ(ErrorFor(WithWarmup({{{"geometry", {{"num_heads", "two"}}}}})),
            "x.json: $.warmup[0].geometry.num_heads: expected an integer, got string \"two\"");
  EXPECT_EQ(ErrorFor(WithWarmup({{{"geometry", {{"heads", 2}}}}})),
            "x.json: $.warmup[0].geometry.heads: unknown field (expected one of: seq_lens, "
            "num_heads, num_kv_heads, head_dim, head_dim_v, dtype, softmax_scale, causal, window, "
            "sinks, padding)");
  EXPECT_EQ(ErrorFor(WithWarmup({{{"geometry", nullptr}}})),
            "x.json: $.warmup[0].geometry: required field is missing");
  EXPECT_EQ(ErrorFor(WithWarmup({{{"warmup", json::array({json::object()})}}})),
            "x.json: $.warmup[0].warmup: a warmup call cannot have warmup calls of its own");
  EXPECT_EQ(ErrorFor(WithWarmup({{{"expect", {{"outcome", "success"}}}}})),
            "x.json: $.warmup[0].expect: a warmup call's outcome is not judged: expect belongs to "
            "the case itself");
  EXPECT_EQ(ErrorFor(WithWarmup(std::vector<json>(8, json::object()))), "OK");
  EXPECT_EQ(ErrorFor(WithWarmup(std::vector<json>(9, json::object()))),
            "x.json: $.warmup: 9 warmup calls exceed the limit of 8 per case");
  EXPECT_EQ(ErrorFor(WithWarmup({})), "OK");

  // The case itself is checked first.
  j = WithWarmup({{{"geometry", {{"dtype", "int32"}}}}});
  j["geometry"]["seq_lens"] = {3, -5};
  EXPECT_EQ(ErrorFor(j),
            "x.json: $.geometry.seq_lens[1]: -5 is negative: sequence lengths must be >= 0");
}

TEST(WarmupTest, ValidateCaseChecksWarmupCallsToo) {
  Case c = ParseOrDie(WithWarmup({json::object()}).dump());
  ASSERT_TRUE(ValidateCase(c).ok());
  Case nested = c;
  nested.warmup[0].patched.warmup.push_back(c.warmup[0]);
  EXPECT_EQ(ValidateCase(nested).message(),
            "$.warmup[0].warmup: a warmup call cannot have warmup calls of its own");
  Case invalid = c;
  invalid.warmup[0].patched.geometry.num_heads = 0;
  EXPECT_EQ(ValidateCase(invalid).message(),
            "$.warmup[0].geometry.num_heads: 0 is outside [1, 1024]: heads per rank");
  Case too_many = c;
  too_many.warmup.assign(9, c.warmup[0]);
  EXPECT_EQ(ValidateCase(too_many).message(),
            "$.warmup: 9 warmup calls exceed the limit of 8 per case");
}

// ---------------------------------------------------------------------------
// Files

class CaseFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("varlen_case_files_" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "sub" / "deeper");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = root_ / relative;
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path root_;
};

TEST_F(CaseFilesTest, ListsJsonFilesRecursivelyInSortedOrder) {
  const std::string b = Write("b.json", "{}");
  const std::string a = Write("a.json", "{}");
  const std::string c = Write("sub/c.json", "{}");
  const std::string d = Write("sub/deeper/d.json", "{}");
  Write("notes.txt", "not a case");
  Write("sub/e.json.bak", "{}");
  absl::StatusOr<std::vector<std::string>> files = ListCaseFiles({root_.string()});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(a, b, c, d));
}

TEST_F(CaseFilesTest, FilesAreTakenAsGivenAndArgumentsKeepTheirOrder) {
  const std::string txt = Write("notes.txt", "x");
  const std::string a = Write("sub/a.json", "{}");
  absl::StatusOr<std::vector<std::string>> files =
      ListCaseFiles({txt, (root_ / "sub").string(), a});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(txt, a, a));
}

TEST_F(CaseFilesTest, MissingPathIsNotFound) {
  const std::string missing = (root_ / "missing").string();
  absl::StatusOr<std::vector<std::string>> files = ListCaseFiles({root_.string(), missing});
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(files.status().message(), missing + ": no such file or directory");
}

TEST_F(CaseFilesTest, LoadCaseFileNamesTheFile) {
  const std::string good = Write("good.json", Minimal().dump());
  absl::StatusOr<Case> c = LoadCaseFile(good);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "minimal");

  json j = Minimal();
  j["geometry"]["seq_lens"] = {3, 5, -5};
  const std::string bad = Write("bad.json", j.dump());
  EXPECT_EQ(LoadCaseFile(bad).status().message(),
            bad + ": $.geometry.seq_lens[2]: -5 is negative: sequence lengths must be >= 0");

  const std::string missing = (root_ / "missing.json").string();
  EXPECT_EQ(LoadCaseFile(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadCaseFile(missing).status().message(), missing + ": cannot open the file");
}

// ---------------------------------------------------------------------------
// The regression corpus

// The source tree: $VARLEN_SOURCE_DIR (set by ctest), else the first
// directory above the test binary that holds corpus/README.md.
std::filesystem::path SourceDir() {
  if (const char* env = std::getenv("VARLEN_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  while (!ec && !dir.empty()) {
    if (std::filesystem::exists(dir / "corpus" / "README.md")) return dir;
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return {};
}

TEST(RegressionCorpusTest, EveryFileLoadsAndRoundTripsExactly) {
  const std::filesystem::path source = SourceDir();
  ASSERT_TRUE(std::filesystem::exists(source / "corpus" / "README.md"))
      << "cannot find the source tree (set VARLEN_SOURCE_DIR)";
  const std::filesystem::path regressions = source / "corpus" / "regressions";
  if (!std::filesystem::exists(regressions)) return;  // no regression cases yet
  absl::StatusOr<std::vector<std::string>> files = ListCaseFiles({regressions.string()});
  ASSERT_TRUE(files.ok()) << files.status();
  for (const std::string& file : *files) {
    SCOPED_TRACE(file);
    absl::StatusOr<Case> c = LoadCaseFile(file);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string written = WriteCase(*c);
    absl::StatusOr<Case> again = ParseCase(written, file);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(*again == *c) << written;
    EXPECT_EQ(WriteCase(*again), written);
  }
}

}  // namespace
}  // namespace varlen
