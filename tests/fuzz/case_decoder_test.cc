// The fuzz targets' byte decoder: every input decodes to a valid case that
// survives the case file format, and random inputs reach every argument
// form and special value the contract distinguishes.

#include "case_decoder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidcheck/gtest.h"
#include "varlen/cases/case_json.h"

namespace varlen {
namespace {

using ::testing::HasSubstr;

RC_GTEST_PROP(CaseDecoderTest, EveryInputDecodesToACaseFileThatLoadsBack,
              (const std::vector<uint8_t>& bytes)) {
  absl::StatusOr<Case> c = DecodeCase(bytes);
  RC_ASSERT(c.ok());
  absl::StatusOr<Case> loaded = ParseCase(WriteCase(*c), "decoded.json");
  RC_ASSERT(loaded.ok());
  RC_ASSERT(*loaded == *c);
}

// The structure-aware mutator relies on it: each choice owns the bytes just
// before the previous choice's, from the end of the input.
RC_GTEST_PROP(CaseDecoderTest, ChoicesTileTheInputFromItsEnd, (const std::vector<uint8_t>& bytes)) {
  size_t end = bytes.size();
  for (const ChoiceSpan& choice : DecodeChoiceSpans(bytes)) {
    RC_ASSERT(choice.end == end);
    RC_ASSERT(choice.begin < choice.end);
    end = choice.begin;
  }
}

TEST(CaseDecoderTest, RewritingOneChoiceChangesTheCase) {
  std::vector<uint8_t> bytes(200, 0x5a);
  const Case before = *DecodeCase(bytes);
  const std::vector<ChoiceSpan> spans = DecodeChoiceSpans(bytes);
  ASSERT_GT(spans.size(), 10u);
  // The first choice is the mode.
  for (size_t i = spans[0].begin; i < spans[0].end; ++i) bytes[i] ^= 1;
  const Case after = *DecodeCase(bytes);
  EXPECT_NE(after.mode, before.mode);
  EXPECT_EQ(after.version, before.version);
}

TEST(CaseDecoderTest, NoBytesDecodeToTheSimplestCall) {
  absl::StatusOr<Case> c = DecodeCase({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mode, Mode::kFaithful);
  EXPECT_EQ(c->call.profile, AllProfiles().front());
  EXPECT_EQ(c->geometry.seq_lens, std::vector<int64_t>{0});
}

// Walks every argument a decoded call holds.
void Collect(const ArgLiteral& a, std::set<ArgLiteral::Kind>* kinds, std::set<DType>* dtypes,
             bool* nan, bool* unicode_digits, bool* strided) {
  kinds->insert(a.kind);
  if (a.kind == ArgLiteral::Kind::kTensor) {
    dtypes->insert(a.tensor.dtype);
    *strided |= a.tensor.step > 1;
  }
  if (a.kind == ArgLiteral::Kind::kFloat && std::isnan(a.f)) *nan = true;
  // A digit of the Arabic-Indic, Devanagari or fullwidth scripts.
  for (const char* zero : {"\u0660", "\u0966", "\uff10"}) {
    for (char digit = 0; a.kind == ArgLiteral::Kind::kStr && digit < 10; ++digit) {
      std::string encoded = zero;
      encoded.back() = static_cast<char>(encoded.back() + digit);
      if (a.s.find(encoded) != std::string::npos) *unicode_digits = true;
    }
  }
  for (const ArgLiteral& item : a.list) Collect(item, kinds, dtypes, nan, unicode_digits, strided);
}

TEST(CaseDecoderTest, RandomInputsReachEveryFormTheContractDistinguishes) {
  std::mt19937 random(20261130);
  std::map<Engine, int> calls_of;
  std::set<Profile> profiles;
  std::set<QLayout> vllm_layouts;
  bool vllm_metadata = false, vllm_batch_of_images = false, vllm_given_sglang_keywords = false,
       vllm_merged_heads = false, vllm_value_head_size = false, unread_keyword = false;
  std::set<ArgLiteral::Kind> kinds;
  std::set<DType> dtypes;
  std::set<MetadataSpec::Builder> builders;
  bool nan = false, unicode_digits = false, strided = false, graph = false, layer = false,
       hardened = false;
  for (int i = 0; i < 8000; ++i) {
    std::vector<uint8_t> bytes(64 + i % 128);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
    absl::StatusOr<Case> c = DecodeCase(bytes);
    ASSERT_TRUE(c.ok()) << c.status();
    profiles.insert(c->call.profile);
    ++calls_of[c->engine()];
    if (c->engine() == Engine::kVllm) {
      vllm_layouts.insert(c->call.layout);
      vllm_metadata |= c->call.vllm_metadata.has_value();
      vllm_batch_of_images |= c->call.bsz.value_or(1) > 1;
      vllm_merged_heads |= c->call.merged_heads;
      vllm_value_head_size |= c->geometry.head_dim_v != c->geometry.head_dim;
      vllm_given_sglang_keywords |= c->call.forward_metadata.has_value();
      for (const auto& [key, value] : c->call.kwargs) {
        vllm_given_sglang_keywords |= key == "output_ws" || key == "softmax_scale";
      }
    }
    graph |= c->call.graph_mode;
    layer |= c->call.entry == Entry::kLayer;
    hardened |= c->mode == Mode::kHardened;
    Collect(c->call.cu_seqlens, &kinds, &dtypes, &nan, &unicode_digits, &strided);
    for (const auto& [key, value] : c->call.kwargs) {
      Collect(value, &kinds, &dtypes, &nan, &unicode_digits, &strided);
      unread_keyword |= key == "max_seq_len" || key == "window_size" || key == "s_aux";
    }
    if (c->call.forward_metadata.has_value()) builders.insert(c->call.forward_metadata->builder);
  }
  EXPECT_EQ(profiles.size(), AllProfiles().size());
  // Each engine gets about an even share, whatever its number of profiles.
  for (const Engine engine : AllEngines()) {
    EXPECT_GT(calls_of[engine], 8000 / static_cast<int>(AllEngines().size()) * 4 / 5)
        << EngineName(engine);
  }
  EXPECT_EQ(vllm_layouts.size(), 4u) << "packed, batched, fused_qkv, batched_fused_qkv";
  EXPECT_TRUE(vllm_metadata && vllm_batch_of_images && vllm_given_sglang_keywords &&
              vllm_merged_heads && vllm_value_head_size);
  EXPECT_TRUE(unread_keyword) << "a keyword most backends never read";
  EXPECT_EQ(kinds.size(), 9u) << "None, bool, int, float, str, tensor, list, cache, empty_like";
  EXPECT_EQ(dtypes.size(), 5u) << "int16, int32, int64, float32, bool tensors";
  EXPECT_TRUE(strided) << "a non-contiguous tensor (step 2)";
  EXPECT_EQ(builders.size(), 3u);
  EXPECT_TRUE(nan);
  EXPECT_TRUE(unicode_digits);
  EXPECT_TRUE(graph && layer && hardened);
}

// cpu_flash streams keys in tiles of 64: the differential target's long,
// thin share reaches the second and third tile, inside its MAC budget.
TEST(CaseDecoderTest, DifferentialInputsReachPastAKeyTile) {
  const DecodeLimits limits = *DecodeLimitsFor("differential");
  std::mt19937 random(20261203);
  int long_inputs = 0, past_two_tiles = 0;
  constexpr int kInputs = 4000;
  for (int i = 0; i < kInputs; ++i) {
    std::vector<uint8_t> bytes(64 + i % 128);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
    absl::StatusOr<Case> c = DecodeCase(bytes, limits);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::vector<int64_t>& lengths = c->geometry.seq_lens;
    const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    if (longest > limits.max_len) {
      ++long_inputs;
      EXPECT_LE(lengths.size(), 2u);
      EXPECT_EQ(c->geometry.num_kv_heads, 1);
      EXPECT_LE(c->geometry.head_dim, 16);
    }
    past_two_tiles += longest > 128;
  }
  EXPECT_GT(long_inputs, kInputs / 6);
  EXPECT_LT(long_inputs, kInputs / 3);
  EXPECT_GT(past_two_tiles, kInputs / 40) << long_inputs << " long";
}

TEST(CaseDecoderTest, TargetsNameTheirLimits) {
  EXPECT_TRUE(DecodeLimitsFor("contract").ok());
  EXPECT_THAT(std::string(DecodeLimitsFor("speed").status().message()),
              HasSubstr("\"speed\" is not one of contract"));
}

}  // namespace
}  // namespace varlen
