// Tests the conformance suite itself: its properties hold on the correct
// CPU backends, fail on broken ones with a shrunk case that replays to the
// same failure, and its tiers and RC_PARAMS do what they say.

#include "varlen/conformance/suite.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mutants.h"
#include "rapidcheck/gtest.h"
#include "varlen/backend/fault.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/limits.h"
#include "varlen/conformance/check.h"

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
    // The short cases: the conformance binary runs the long ones on cpu_flash.
    PropertyRunOptions options = Smoke(property);
    options.budget.long_cases = 0;
    const PropertyRunResult result = RunProperty(property, *FindBackend("cpu_flash"), options);
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
  // Shrunk toward few, short non-empty sequences and few heads, a tower's
  // heads gone (a batch drawn at a bucket size keeps its zero-length
  // sequences; where the non-finite values fall depends on the shape, so
  // shrinking may stop at a few heads where fewer would hold none).
  const Geometry& g = result.shrunk->geometry;
  EXPECT_LE(std::count_if(g.seq_lens.begin(), g.seq_lens.end(), [](int64_t n) { return n > 0; }), 2)
      << WriteCase(*result.shrunk);
  EXPECT_LE(g.total_tokens(), 64) << WriteCase(*result.shrunk);
  EXPECT_LE(g.num_heads, 8) << WriteCase(*result.shrunk);

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

// cpu_flash whose every second launch faults, as a worker that died does:
// in the comparison properties, the second launch of each check.
class FaultsOnEverySecondLaunch final : public Backend {
 public:
  absl::string_view name() const override { return "faults_on_every_second_launch"; }
  absl::string_view description() const override {
    return "cpu_flash, every second launch a CRASH";
  }
  BackendCapabilities capabilities() const override { return flash_.capabilities(); }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    if (++launches_ % 2 == 0) return FaultStatus({FaultKind::kCrash, "signal 11 (SIGSEGV)", ""});
    return flash_.Run(params);
  }

 private:
  const Backend& flash_ = *FindBackend("cpu_flash");
  mutable int launches_ = 0;
};

TEST(SuiteTest, AFaultInAPropertysLaterLaunchIsReportedAsThatFault) {
  for (const char* property : {"SequenceAlone", "SplitJoin", "PoisonedNeighbours",
                               "SequencePermutation", "GqaRepeatedKv"}) {
    FaultsOnEverySecondLaunch backend;
    const PropertyRunResult result = RunProperty(property, backend, Smoke(property));
    ASSERT_FALSE(result.passed) << property;
    ASSERT_TRUE(result.fault.has_value()) << property << ": " << result.message;
    EXPECT_EQ(result.fault->kind, FaultKind::kCrash) << property;
    EXPECT_THAT(result.why, HasSubstr("CRASH: signal 11")) << property;
  }
}

TEST(SuiteTest, TheStatisticalCheckSeesABiasInsideTheElementwiseBound) {
  const std::vector<Mutant> mutants = FlashMutants();
  const Backend& truncating = MutantNamed(mutants, "flash_rounds_output_toward_zero");
  // On a pack of many values the elementwise bound (twice the emulation's
  // largest error) holds a one-ulp truncation; on a few values it may not,
  // where the emulation happens to round close to the reference.
  absl::StatusOr<Case> pack = ParseCase(R"({
    "name": "many-values", "source": "suite_test", "mode": "hardened",
    "geometry": {"seq_lens": [96, 33], "num_heads": 4, "num_kv_heads": 4,
                 "head_dim": 64, "dtype": "bfloat16"},
    "data": {"seed": 7, "distribution": "normal"},
    "call": {"profile": "fa3",
             "cu_seqlens": {"tensor": [0, 96, 129], "dtype": "int32", "device": "cuda"}}
  })",
                                        "many-values.json");
  ASSERT_TRUE(pack.ok()) << pack.status();
  EXPECT_EQ(RunCase(*pack, truncating).verdict, Verdict::kPass)
      << "rounding toward zero stays inside the elementwise bound";
  const PropertyRunResult result =
      RunProperty("SystematicError", truncating, Smoke("SystematicError"));
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.why, HasSubstr("more bias (rounding mode?)"));
}

// Each property sees the bug it is there for, with the message naming it,
// within the full tier's cases (a smoke run of ArgumentForms meets
// max_from_first_sequence in about half of its seeds: it needs a flash
// profile, a first sequence shorter than the longest and a derived max; the
// smoke tier's kill of every mutant, by whichever property, is
// mutants.smoke_tier_kills_every_mutant).
TEST(SuiteTest, EachPropertyKillsTheBugItTargets) {
  const std::vector<Mutant> mutants = AllMutants();
  const struct {
    const char* property;
    const char* mutant;
    const char* says;
  } kTargets[] = {
      {"LogitShift", "flash_no_max_subtraction", "shifted by about"},
      {"GqaRepeatedKv", "flash_gqa_head_modulo", "query head h must read KV head h / "},
      {"SplitJoin", "flash_drops_last_sequence", "launched as a batch of their own"},
      {"ArgumentForms", "resolver_int64_offsets_as_int32", "cu_seqlens int64"},
      {"ArgumentForms", "resolver_max_from_first_sequence", "max_seqlen None"},
      {"GraphSafety", "resolver_syncs_on_prepared_metadata", "cannot be captured in a CUDA graph"},
      {"NoSilentCorruption", "resolver_hardened_checks_nothing",
       "hardened mode let a corrupted call through"},
  };
  for (const auto& target : kTargets) {
    PropertyRunOptions options;
    options.budget = BudgetFor(target.property, Tier::kFull);
    options.shrink = false;
    const PropertyRunResult result =
        RunProperty(target.property, MutantNamed(mutants, target.mutant), options);
    EXPECT_FALSE(result.passed) << target.property << " on " << target.mutant;
    EXPECT_THAT(result.why, HasSubstr(target.says)) << target.property << " on " << target.mutant;
  }
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
  // max_success counts the short cases RapidCheck draws (a geometry the
  // kernel refuses is drawn and never run); the long ones keep the tier's
  // count, and the tier's own count of short ones is far above 7.
  const int64_t short_executed = result.executed - result.long_executed;
  EXPECT_GT(short_executed, 0);
  EXPECT_LE(short_executed, 7);
  EXPECT_GT(Smoke("SequencePermutation").budget.cases, 7);
  EXPECT_EQ(result.long_executed, BudgetFor("SequencePermutation", Tier::kSmoke).long_cases);
  EXPECT_THAT(result.params_note, HasSubstr("max_success=7"));
}

// ---------------------------------------------------------------------------
// Long sequences

TEST(SuiteTest, EveryTierRunsLongCasesWithinAShareOfItsTime) {
  for (const std::string& property : PropertyNames()) {
    for (const Tier tier : {Tier::kSmoke, Tier::kFull, Tier::kNightly}) {
      const PropertyBudget budget = BudgetFor(property, tier);
      EXPECT_GT(budget.long_cases, 0) << property << " " << TierName(tier);
      EXPECT_GE(budget.long_limits.min_len, 1000) << property << " " << TierName(tier);
      const double total = budget.time_budget_s + budget.long_time_budget_s;
      EXPECT_DOUBLE_EQ(budget.long_time_budget_s, 0.2 * total) << property << " " << TierName(tier);
    }
    EXPECT_EQ(BudgetFor(property, Tier::kSmoke).long_limits.max_len, 5000);
    EXPECT_EQ(BudgetFor(property, Tier::kFull).long_limits.max_len, 16385);
  }
}

// A case's long sequences stay inside the limits, and the case fits the
// compute budget without shortening them below min_len.
RC_GTEST_PROP(LongCaseProperty, LengthsAreLongAndTheCaseFitsItsBudget, ()) {
  const LongLimits limits = BudgetFor("Numerics", Tier::kSmoke).long_limits;
  const Case c = *GenLongForwardCase(FindBackend("cpu_flash")->capabilities(), limits);
  const Geometry& g = c.geometry;
  RC_ASSERT(g.longest() >= limits.min_len);
  RC_ASSERT(g.longest() <= limits.max_len);
  RC_ASSERT(AttentionMacs(g) <= limits.max_macs);
  RC_ASSERT(g.num_kv_heads == 1);
  RC_ASSERT(ValidateCase(c).ok());
}

TEST(SuiteTest, LongLengthsReachTheEdgesThatChangeKernelPaths) {
  LongLimits limits;
  limits.min_len = 1000;
  limits.max_len = 5000;
  const rc::Gen<std::vector<int64_t>> gen = GenLongSeqLens(limits);
  std::set<int64_t> seen;
  int64_t cases_past_4096 = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::vector<int64_t> lengths = rc::gen::resize(100, gen)(rc::Random(i), 100).value();
    seen.insert(lengths.begin(), lengths.end());
    cases_past_4096 += *std::max_element(lengths.begin(), lengths.end()) > 4096;
  }
  for (int64_t edge : {1023, 1024, 1025, 2047, 2049, 4095, 4096, 4097, 5000}) {
    EXPECT_TRUE(seen.count(edge)) << edge;
  }
  EXPECT_GT(cases_past_4096, 400) << "lengths past the first flashinfer_cudnn bucket";
  EXPECT_TRUE(seen.count(0)) << "empty sequences beside a long one";
}

// Every tier's cases span the heads and head dims real vision towers use,
// in the shares docs/conformance.md states (this test prints them).
TEST(SuiteTest, GeometriesSpanWhatVisionTowersUse) {
  const BackendCapabilities caps = FindBackend("cpu_flash")->capabilities();
  for (const Tier tier : {Tier::kSmoke, Tier::kFull, Tier::kNightly}) {
    const rc::Gen<Case> gen = GenForwardCase(caps, BudgetFor("Numerics", tier).limits);
    constexpr int kCases = 4000;
    std::map<std::string, int> count;
    std::set<int64_t> heads;
    for (int i = 0; i < kCases; ++i) {
      const Geometry g = rc::gen::resize(100, gen)(rc::Random(i), 100).value().geometry;
      heads.insert(g.num_heads);
      count["heads > 16"] += g.num_heads > 16;
      count["heads 25"] += g.num_heads == 25;
      count["heads >= 32"] += g.num_heads >= 32;
      count["odd heads > 1"] += g.num_heads > 1 && g.num_heads % 2 == 1;
      count["head dim 64..128"] += g.head_dim >= 64 && g.head_dim <= 128;
      count["head dim 72 or 80"] += g.head_dim == 72 || g.head_dim == 80;
      count["heads > 16 with >= 16 tokens"] += g.num_heads > 16 && g.total_tokens() >= 16;
    }
    std::string shares = absl::StrCat(TierName(tier), ":");
    for (const auto& [what, n] : count) {
      absl::StrAppend(&shares, " ", what, " ", 100.0 * n / kCases, " %;");
    }
    std::cout << shares << "\n";
    EXPECT_GT(count["heads > 16"], kCases / 20) << shares;
    EXPECT_GT(count["heads 25"], kCases / 100) << shares;
    EXPECT_GT(count["odd heads > 1"], kCases / 20) << shares;
    EXPECT_GT(count["head dim 72 or 80"], kCases / 20) << shares;
    EXPECT_GT(count["heads > 16 with >= 16 tokens"], count["heads > 16"] / 2) << shares;
    EXPECT_TRUE(heads.count(48)) << shares;
  }
}

// The mutants whose bug only shows past a length die on the long cases.
TEST(SuiteTest, LengthMutantsDieOnLongCasesOnly) {
  const std::vector<Mutant> mutants = AllMutants();
  for (const char* name : {"flash_keys_capped_at_1024", "flash_split_kv_merge_without_rescale",
                           "flash_rows_capped_at_4096"}) {
    const Backend& mutant = MutantNamed(mutants, name);
    PropertyRunOptions options = Smoke("Numerics");
    options.shrink = false;
    options.budget.long_cases = 0;
    EXPECT_TRUE(RunProperty("Numerics", mutant, options).passed) << name << " on short cases";
    options = Smoke("Numerics");
    options.shrink = false;
    options.budget.cases = 0;
    options.budget.long_cases = 40;
    options.budget.long_time_budget_s = 0;
    const PropertyRunResult result = RunProperty("Numerics", mutant, options);
    EXPECT_FALSE(result.passed) << name << " on long cases";
    ASSERT_TRUE(result.shrunk.has_value()) << name;
    EXPECT_GT(result.shrunk->geometry.longest(), 1024) << name;
  }
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

// ---------------------------------------------------------------------------
// varlen check

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(CheckTest, ABrokenBackendGetsAFailureReportAPictureAndAShrunkCase) {
  // A mutant registered like any backend an embedder adds.
  for (Mutant& m : FlashMutants()) {
    if (m.name == "flash_drops_last_sequence") {
      ASSERT_TRUE(RegisterBackend(std::move(m.backend)).ok());
    }
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "varlen-check-test";
  std::filesystem::remove_all(dir);
  CheckOptions options;
  options.backends = {"cpu_flash", "flash_drops_last_sequence"};
  options.budget_scale = 0.25;  // the report is under test, not the suite's power
  options.corpus_dir = std::string(std::getenv("VARLEN_SOURCE_DIR")) + "/corpus/regressions";
  options.report_dir = dir.string();
  std::vector<std::string> progress;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  absl::StatusOr<CheckReport> report = RunCheck(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed());
  EXPECT_EQ(progress.size(), 2u + 2u * PropertyNames().size());

  const std::string matrix = ReadFile(dir / "matrix.md");
  int flash_passed = 0, flash_unsupported = 0;
  for (const CheckItem& item : report->items) {
    if (item.backend != "cpu_flash" || item.kind != "corpus") continue;
    flash_passed += item.status == CheckStatus::kPass;
    flash_unsupported += item.status == CheckStatus::kUnsupported;
  }
  EXPECT_GT(flash_passed, 200);
  EXPECT_GT(flash_unsupported, 0);  // the float64 cases
  std::string flash_row =
      absl::StrCat("| cpu_flash | ", flash_passed, " pass, ", flash_unsupported, " unsupported |");
  for (size_t i = 0; i < PropertyNames().size(); ++i) flash_row += " pass |";
  EXPECT_THAT(matrix, HasSubstr(flash_row + "\n"));
  EXPECT_THAT(matrix, HasSubstr("| flash_drops_last_sequence |"));
  EXPECT_THAT(matrix, HasSubstr("**FAIL**"));
  const std::string junit = ReadFile(dir / "junit.xml");
  EXPECT_THAT(junit, HasSubstr("<testsuite name=\"flash_drops_last_sequence\""));
  EXPECT_THAT(junit, HasSubstr("<failure message="));
  EXPECT_THAT(junit, HasSubstr("<skipped message="));  // cpu_flash runs no float64

  bool shrunk = false, picture = false;
  for (const CheckItem& item : report->items) {
    if (item.status != CheckStatus::kFail) continue;
    EXPECT_EQ(item.backend, "flash_drops_last_sequence");
    if (!item.shrunk.empty()) {
      shrunk = true;
      EXPECT_TRUE(LoadCaseFile(item.shrunk).ok()) << item.shrunk;
    }
    if (!item.picture.empty()) {
      picture = true;
      EXPECT_THAT(ReadFile(item.picture), HasSubstr("<svg"));
    }
  }
  EXPECT_TRUE(shrunk);
  EXPECT_TRUE(picture);
}

TEST(CheckTest, AnExpectationsManifestMarksKnownFailuresAndUnexpectedPasses) {
  if (FindBackend("flash_drops_last_sequence") == nullptr) {
    for (Mutant& m : FlashMutants()) {
      if (m.name == "flash_drops_last_sequence") {
        ASSERT_TRUE(RegisterBackend(std::move(m.backend)).ok());
      }
    }
  }
  absl::StatusOr<Expectations> manifest = ParseExpectations(R"({
    "backend": "flash_drops_last_sequence", "strict": true,
    "entries": [
      {"test": "Conformance.Numerics", "expect": "fail", "reason": "drops the last sequence"},
      {"test": "Conformance.SequencePermutation", "expect": "flaky", "reason": "r"},
      {"test": "Conformance.GqaRepeatedKv", "expect": "fail", "reason": "fixed since"},
      {"test": "Conformance.LogitShift", "expect": "skip", "reason": "r"}
    ]})",
                                                            "m.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  CheckOptions options;
  options.backends = {"flash_drops_last_sequence"};
  options.budget_scale = 0.25;
  options.expectations = {std::make_shared<const Expectations>(*manifest)};
  absl::StatusOr<CheckReport> report = RunCheck(options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::map<std::string, const CheckItem*> items;
  for (const CheckItem& item : report->items) items[item.name] = &item;
  EXPECT_EQ(items["Numerics"]->status, CheckStatus::kXFail);
  EXPECT_THAT(items["Numerics"]->message, HasSubstr("expected failure: fail: drops the last"));
  EXPECT_EQ(items["SequencePermutation"]->status, CheckStatus::kXFail);
  EXPECT_THAT(items["SequencePermutation"]->message, HasSubstr("failure tolerated (flaky)"));
  EXPECT_EQ(items["GqaRepeatedKv"]->status, CheckStatus::kFail) << "XPASS in a strict manifest";
  EXPECT_THAT(items["GqaRepeatedKv"]->message,
              HasSubstr("XPASS: passed, but the expectations manifest says fail: fixed since; "
                        "remove the entry"));
  EXPECT_EQ(items["LogitShift"]->status, CheckStatus::kUnsupported);
  EXPECT_THAT(items["LogitShift"]->message, HasSubstr("skipped by the expectations manifest"));
  const std::string matrix = CheckMatrixMarkdown(*report);
  EXPECT_THAT(matrix, HasSubstr(" xfail |"));
  EXPECT_THAT(matrix, HasSubstr(" unsupported |"));

  // Not strict: the unexpected pass is reported, not failed.
  Expectations lenient = *manifest;
  lenient.strict = false;
  options.expectations = {std::make_shared<const Expectations>(lenient)};
  report = RunCheck(options);
  ASSERT_TRUE(report.ok()) << report.status();
  for (const CheckItem& item : report->items) {
    if (item.name == "GqaRepeatedKv") {
      EXPECT_EQ(item.status, CheckStatus::kXPass);
    }
  }
  EXPECT_THAT(CheckMatrixMarkdown(*report), HasSubstr(" xpass |"));
}

TEST(CheckTest, ThePictureMarksBadBlocks) {
  NumericReport n;
  n.heads = 2;
  n.bound = 1e-3;
  n.per_sequence_head_max_error = {0.0, 5e-4, 1e-2, std::numeric_limits<double>::infinity()};
  const std::string svg = ErrorPictureSvg("t & <u>", n);
  EXPECT_THAT(svg, HasSubstr("t &amp; &lt;u&gt;"));
  EXPECT_THAT(svg, HasSubstr("sequence 1 head 1: unwritten or wrong NaN/Inf"));
  EXPECT_THAT(svg, HasSubstr("sequence 1 head 0: 0.01 (10.00 x bound)"));
  EXPECT_THAT(svg, HasSubstr("fill=\"#000000\""));
}

TEST(CheckTest, UnknownBackendIsAnError) {
  CheckOptions options;
  options.backends = {"no_such_backend"};
  EXPECT_EQ(RunCheck(options).status().message(), "no backend named \"no_such_backend\"");
}

}  // namespace
}  // namespace varlen
