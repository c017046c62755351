// Tests the expectations manifest: its format and errors, which entry
// applies to a test, and the expired and stale entries it reports.

#include "varlen/conformance/expectations.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;

constexpr absl::CivilDay kToday(2026, 11, 30);

Expectations ParseOrDie(absl::string_view text) {
  absl::StatusOr<Expectations> e = ParseExpectations(text, "m.json");
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : Expectations();
}

TEST(ExpectationsTest, ParsesEveryField) {
  const Expectations e = ParseOrDie(R"({
    "backend": "my_backend", "strict": true,
    "entries": [
      {"test": "Corpus.sdpa_*", "dtype": "float64", "expect": "skip", "reason": "no float64",
       "issue": "https://example.invalid/1", "expires": "2027-03-01"},
      {"test": "Conformance.SystematicError", "expect": "fail", "reason": "truncates"}
    ]})");
  EXPECT_EQ(e.backend, "my_backend");
  EXPECT_TRUE(e.strict);
  ASSERT_EQ(e.entries.size(), 2u);
  EXPECT_EQ(e.entries[0].dtype, DType::kFloat64);
  EXPECT_EQ(e.entries[0].expect, Expect::kSkip);
  EXPECT_EQ(e.entries[0].expires, absl::CivilDay(2027, 3, 1));
  EXPECT_EQ(DescribeEntry(e.entries[0]),
            "skip (float64): no float64 (https://example.invalid/1), until 2027-03-01");
  EXPECT_EQ(DescribeEntry(e.entries[1]), "fail: truncates");
}

TEST(ExpectationsTest, ErrorsNameTheFileThePathAndTheRule) {
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "m.json: $: expected an object"},
      {"{\"entries\": 3}", "m.json: $.entries: an array of entries is required"},
      {R"({"entries": [{"test": "x", "expect": "maybe", "reason": "r"}]})",
       "m.json: $.entries[0].expect: \"maybe\" is not one of fail, skip, flaky"},
      {R"({"entries": [{"test": "x", "expect": "fail"}]})",
       "m.json: $.entries[0].reason: is required"},
      {R"({"entries": [{"test": "x", "expect": "fail", "reason": ""}]})",
       "m.json: $.entries[0].reason: must say why (an entry without a reason is a debt)"},
      {R"({"entries": [{"test": "x", "expect": "fail", "reason": "r", "expires": "soon"}]})",
       "m.json: $.entries[0].expires: \"soon\" is not a date YYYY-MM-DD"},
      {R"({"entries": [{"test": "x", "expect": "fail", "reason": "r", "dtype": "half"}]})",
       "m.json: $.entries[0].dtype: dtype \"half\" is not one of float32, float16, bfloat16, "
       "float64, int16, int32, int64, bool"},
      {R"({"entries": [{"test": "x", "expect": "fail", "reason": "r", "owner": "me"}]})",
       "m.json: $.entries[0].owner: unknown key (known: test, dtype, distribution, expect, "
       "reason, issue, expires)"},
      {R"({"entries": [{"test": "x", "expect": "skip", "reason": "r", "distribution": "nan"}]})",
       "m.json: $.entries[0].distribution: distribution \"nan\" is not one of normal, uniform, "
       "sparse_small_integers, large_logits, dominant_logit, constant_rows, non_finite, "
       "subnormal"},
      {R"({"strict": "yes", "entries": []})",
       "m.json: $.strict: expected true or false, got \"yes\""},
  };
  for (const auto& [text, message] : cases) {
    EXPECT_EQ(ParseExpectations(text, "m.json").status().message(), message) << text;
  }
}

// A distribution narrows an entry like a dtype: a corpus entry to cases of
// that data, a Conformance skip entry to generated cases of that data.
TEST(ExpectationsTest, ADistributionNarrowsAnEntry) {
  const Expectations e = ParseOrDie(R"({"entries": [
      {"test": "Corpus.*", "distribution": "non_finite", "expect": "flaky", "reason": "a"},
      {"test": "Conformance.*", "distribution": "non_finite", "expect": "skip", "reason": "b"},
      {"test": "Conformance.Numerics", "dtype": "float64", "expect": "skip", "reason": "c"}]})");
  EXPECT_EQ(FindExpectation(e, "Corpus.x", DType::kFloat32, kToday, Distribution::kNonFinite),
            &e.entries[0]);
  EXPECT_EQ(FindExpectation(e, "Corpus.x", DType::kFloat32, kToday, Distribution::kNormal),
            nullptr);
  EXPECT_EQ(FindExpectation(e, "Conformance.Numerics", std::nullopt, kToday), nullptr);
  EXPECT_EQ(SkippedDistributions(e, "Conformance.Numerics", kToday),
            std::vector<Distribution>{Distribution::kNonFinite});
  BackendCapabilities caps;
  caps.input_dtypes = {DType::kFloat32, DType::kFloat64};
  EXPECT_EQ(WithoutSkippedDTypes(caps, e, "Conformance.Numerics", kToday).input_dtypes,
            std::vector<DType>{DType::kFloat32});
}

TEST(ExpectationsTest, GlobDtypeAndExpiryDecideWhichEntryApplies) {
  const Expectations e = ParseOrDie(R"({"entries": [
      {"test": "Corpus.sdpa_*", "dtype": "float64", "expect": "skip", "reason": "a"},
      {"test": "Corpus.fa3_?", "expect": "flaky", "reason": "b", "expires": "2026-11-29"},
      {"test": "Conformance.*", "expect": "fail", "reason": "c"}]})");
  EXPECT_EQ(FindExpectation(e, "Corpus.sdpa_mask", DType::kFloat64, kToday), &e.entries[0]);
  EXPECT_EQ(FindExpectation(e, "Corpus.sdpa_mask", DType::kBFloat16, kToday), nullptr);
  EXPECT_EQ(FindExpectation(e, "Corpus.fa3_x", DType::kBFloat16, kToday), nullptr)  // expired
      << "an expired entry no longer applies";
  EXPECT_EQ(FindExpectation(e, "Corpus.fa3_x", DType::kBFloat16, absl::CivilDay(2026, 11, 29)),
            &e.entries[1]);
  EXPECT_EQ(FindExpectation(e, "Conformance.Numerics", std::nullopt, kToday), &e.entries[2]);
}

TEST(ExpectationsTest, ReportsExpiredAndStaleEntries) {
  const Expectations e = ParseOrDie(R"({"entries": [
      {"test": "Corpus.gone", "expect": "fail", "reason": "a"},
      {"test": "Corpus.old", "expect": "fail", "reason": "b", "expires": "2026-01-01"},
      {"test": "Corpus.here", "expect": "fail", "reason": "c"}]})");
  EXPECT_THAT(ManifestProblems(e, {"Corpus.here", "Corpus.old"}, kToday),
              ElementsAre("stale: Corpus.gone matches no test (fail: a)",
                          "expired: Corpus.old (fail: b, until 2026-01-01)"));
}

}  // namespace
}  // namespace varlen
