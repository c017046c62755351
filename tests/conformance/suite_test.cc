// Tests the conformance suite itself: its properties hold on the correct
// CPU backends, fail on broken ones with a shrunk case that replays to the
// same failure, and its tiers and RC_PARAMS do what they say.

#include "varlen/conformance/suite.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mutants.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"

namespace varlen {
namespace {

using ::testing::HasSubstr;

const Backend& MutantNamed(const std::vector<Mutant>& mutants, const std::string& name) {
  for (const Mutant& m : mutants) {
    if (m.name == name) return *m.backend;
  }
  ADD_FAILURE() << "no mutant " << name;
  return *FindBackend("cpu_flash");
}

PropertyRunOptions Smoke(absl::string_view property) {
  PropertyRunOptions options;
  options.budget = BudgetFor(property, Tier::kSmoke);
  return options;
}

TEST(SuiteTest, EveryPropertyHoldsOnCpuFlash) {
  for (const std::string& property : PropertyNames()) {
    const PropertyRunResult result =
        RunProperty(property, *FindBackend("cpu_flash"), Smoke(property));
    EXPECT_TRUE(result.passed) << property << ": " << result.message;
    EXPECT_GT(result.executed, 0) << property;
  }
}

TEST(SuiteTest, AFailureShrinksToACaseThatReplaysTheSameFailure) {
  const std::vector<Mutant> mutants = FlashMutants();
  const Backend& broken = MutantNamed(mutants, "flash_nan_to_zero");
  const PropertyRunResult result = RunProperty("Numerics", broken, Smoke("Numerics"));
  ASSERT_FALSE(result.passed);
  ASSERT_TRUE(result.shrunk.has_value());
  EXPECT_THAT(result.why, HasSubstr("elements not NaN/Inf"));
  // Shrunk toward few, short non-empty sequences and few heads (a batch
  // drawn at a bucket size keeps its zero-length sequences).
  const Geometry& g = result.shrunk->geometry;
  EXPECT_LE(std::count_if(g.seq_lens.begin(), g.seq_lens.end(), [](int64_t n) { return n > 0; }), 2)
      << WriteCase(*result.shrunk);
  EXPECT_LE(g.total_tokens(), 64) << WriteCase(*result.shrunk);
  EXPECT_LE(g.num_heads, 2) << WriteCase(*result.shrunk);

  // Through the file format, as `varlen repro` reads it.
  absl::StatusOr<Case> replayed = ParseCase(WriteCase(*result.shrunk), "shrunk.json");
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  const Outcome on_broken = RunCase(*replayed, broken);
  EXPECT_EQ(on_broken.verdict, Verdict::kFail);
  ASSERT_TRUE(on_broken.numerics.has_value());
  EXPECT_GT(on_broken.numerics->lost_non_finite, 0);
  EXPECT_EQ(RunCase(*replayed, *FindBackend("cpu_flash")).verdict, Verdict::kPass);
}

TEST(SuiteTest, ComparisonPropertiesNameWhatChanged) {
  const std::vector<Mutant> mutants = FlashMutants();
  const PropertyRunResult result =
      RunProperty("PoisonedNeighbours", MutantNamed(mutants, "flash_stale_key_offsets"),
                  Smoke("PoisonedNeighbours"));
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.why, HasSubstr("changed when the other sequences and 16 tokens past the last "
                                    "offset were NaN"));
}

TEST(SuiteTest, TheStatisticalCheckSeesABiasInsideTheElementwiseBound) {
  const std::vector<Mutant> mutants = FlashMutants();
  const Backend& truncating = MutantNamed(mutants, "flash_rounds_output_toward_zero");
  EXPECT_TRUE(RunProperty("Numerics", truncating, Smoke("Numerics")).passed)
      << "rounding toward zero stays inside the elementwise bound";
  const PropertyRunResult result =
      RunProperty("SystematicError", truncating, Smoke("SystematicError"));
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.why, HasSubstr("more bias (rounding mode?)"));
}

TEST(SuiteTest, TiersGrow) {
  for (const std::string& property : PropertyNames()) {
    const PropertyBudget smoke = BudgetFor(property, Tier::kSmoke);
    const PropertyBudget full = BudgetFor(property, Tier::kFull);
    const PropertyBudget nightly = BudgetFor(property, Tier::kNightly);
    EXPECT_LT(smoke.cases, full.cases);
    EXPECT_LT(full.cases, nightly.cases);
    EXPECT_LT(smoke.limits.max_macs, full.limits.max_macs);
    EXPECT_NE(smoke.seed, 0u) << "the smoke tier is reproducible";
    EXPECT_EQ(nightly.seed, 0u) << "the nightly tier draws a fresh seed";
  }
}

TEST(SuiteTest, RcParamsOverrideTheTier) {
  ASSERT_EQ(setenv("RC_PARAMS", "max_success=7 seed=3", 1), 0);
  const PropertyRunResult result =
      RunProperty("SequencePermutation", *FindBackend("cpu_flash"), Smoke("SequencePermutation"));
  unsetenv("RC_PARAMS");
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_EQ(result.executed, 7);
  EXPECT_THAT(result.params_note, HasSubstr("max_success=7"));
}

TEST(SuiteTest, EnvironmentSelectsTheTierAndRejectsUnknownOnes) {
  ASSERT_EQ(setenv("VARLEN_TIER", "full", 1), 0);
  absl::StatusOr<SuiteOptions> options = ApplyEnvironment({});
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->tier, Tier::kFull);
  ASSERT_EQ(setenv("VARLEN_TIER", "weekly", 1), 0);
  options = ApplyEnvironment({});
  unsetenv("VARLEN_TIER");
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().message(),
            "VARLEN_TIER: tier \"weekly\" is not one of smoke, full, nightly");
}

TEST(SuiteTest, UnknownPropertyIsReported) {
  const PropertyRunResult result = RunProperty("Speed", *FindBackend("cpu_flash"), {});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.message, "no property named \"Speed\"");
}

}  // namespace
}  // namespace varlen
