// The judge's verdicts, pinned. Every corpus case on cpu_reference and
// cpu_flash, and fixed-seed cases of the Numerics property's smoke-tier
// generator on cpu_flash and on every kernel mutant, each reduced to one
// line of discrete facts: what was observed, the verdict, whether the
// numbers passed, and the elements left unwritten or wrongly (non-)finite.
// A change meant to make the judge faster (the oracle, the emulations, the
// bound) must leave every line as it is; one that means to change a
// verdict rewrites the file with VARLEN_UPDATE_VERDICTS=1 and says why.
// Under AddressSanitizer the mutants' lines are left out: some mutants read
// past their buffers (that is their bug), which the sanitizer stops.

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "mutants.h"
#include "rapidcheck.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/conformance/generators.h"
#include "varlen/conformance/suite.h"

namespace varlen {
namespace {

constexpr int kGeneratedCases = 80;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRunMutants = false;
#else
constexpr bool kRunMutants = true;
#endif

// A line's backend field names a mutant.
bool IsMutantLine(const std::string& line) {
  const std::vector<std::string> fields = absl::StrSplit(line, '\t');
  return fields.size() > 1 && fields[1] != "cpu_reference" && fields[1] != "cpu_flash";
}

std::string VerdictLine(const std::string& origin, const Outcome& o) {
  std::string numbers = "-";
  if (o.numerics.has_value()) {
    numbers = absl::StrCat(
        o.numerics->passed ? "within" : "outside", " unwritten=", o.numerics->unwritten,
        " non_finite=", o.numerics->non_finite, " lost_non_finite=", o.numerics->lost_non_finite);
  }
  return absl::StrCat(origin, "\t", o.backend, "\t", ObservedName(o.observed), "\t",
                      VerdictName(o.verdict), "\t", numbers);
}

std::vector<std::string> CurrentVerdicts() {
  std::vector<std::string> lines;
  absl::StatusOr<std::vector<std::string>> files = ListCaseFiles({VARLEN_TEST_CORPUS_DIR});
  EXPECT_TRUE(files.ok()) << files.status();
  for (const std::string& file : files.value_or(std::vector<std::string>{})) {
    absl::StatusOr<Case> c = LoadCaseFile(file);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) continue;
    for (const char* backend : {"cpu_reference", "cpu_flash"}) {
      lines.push_back(VerdictLine(c->name, RunCase(*c, *FindBackend(backend))));
    }
  }
  const Backend& flash = *FindBackend("cpu_flash");
  const rc::Gen<Case> gen =
      GenForwardCase(flash.capabilities(), BudgetFor("Numerics", Tier::kSmoke).limits);
  std::vector<Mutant> mutants = FlashMutants();
  for (int seed = 0; seed < kGeneratedCases; ++seed) {
    // Sizes cycle as a property run's do.
    const Case c = gen(rc::Random(seed), seed % (rc::kNominalSize + 1)).value();
    const std::string origin = absl::StrCat("numerics-smoke-seed-", seed);
    lines.push_back(VerdictLine(origin, RunCase(c, flash)));
    if (!kRunMutants) continue;
    for (const Mutant& m : mutants) lines.push_back(VerdictLine(origin, RunCase(c, *m.backend)));
  }
  return lines;
}

TEST(VerdictsTest, TheJudgeGivesThePinnedVerdicts) {
  const std::vector<std::string> now = CurrentVerdicts();
  const std::string path = VARLEN_TEST_VERDICTS_FILE;
  if (const char* update = std::getenv("VARLEN_UPDATE_VERDICTS"); update && *update == '1') {
    if (!kRunMutants) GTEST_SKIP() << "rewrite the file from a build without AddressSanitizer";
    std::ofstream(path) << absl::StrJoin(now, "\n") << "\n";
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing: VARLEN_UPDATE_VERDICTS=1 writes it";
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> pinned;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipEmpty())) {
    if (kRunMutants || !IsMutantLine(std::string(line))) pinned.emplace_back(line);
  }
  ASSERT_EQ(now.size(), pinned.size())
      << "the corpus or the generated cases changed: rewrite the file with "
         "VARLEN_UPDATE_VERDICTS=1 and check the difference";
  int differ = 0;
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] != pinned[i] && ++differ <= 20) {
      ADD_FAILURE() << "pinned: " << pinned[i] << "\n   now: " << now[i];
    }
  }
  EXPECT_EQ(differ, 0) << "verdicts changed (" << path << ")";
}

}  // namespace
}  // namespace varlen
