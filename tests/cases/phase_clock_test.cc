// Tests the phase clock: a judged case charges its steps to their phases
// while the clock is on, and nothing while it is off.

#include "varlen/cases/phase_clock.h"

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"

namespace varlen {
namespace {

Case JudgedCase() {
  absl::StatusOr<Case> c = ParseCase(R"({
    "name": "phase-clock", "source": "test", "mode": "hardened",
    "geometry": {"seq_lens": [40, 24], "num_heads": 2, "head_dim": 32, "dtype": "bfloat16"},
    "data": {"seed": 3, "distribution": "normal"},
    "call": {"profile": "fa3",
             "cu_seqlens": {"tensor": [0, 40, 64], "dtype": "int32", "device": "cuda"},
             "kwargs": {"max_seqlen": 40}}
  })",
                                     "phase-clock.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Case{};
}

TEST(PhaseClockTest, ChargesEachStepOfAJudgedCase) {
  EnablePhaseClock(true);
  const Outcome outcome = RunCase(JudgedCase(), *FindBackend("cpu_reference"));
  const PhaseTotals totals = ReadPhaseClock();
  EnablePhaseClock(false);
  ASSERT_EQ(outcome.verdict, Verdict::kPass) << FormatOutcomeText(JudgedCase(), "", outcome);
  EXPECT_EQ(totals.cases_run, 1);
  EXPECT_EQ(totals.cases_judged, 1);
  for (Phase phase : {Phase::kSynthesis, Phase::kResolution, Phase::kBackend, Phase::kOracle,
                      Phase::kEmulation, Phase::kJudge}) {
    EXPECT_GT(totals.seconds[static_cast<int>(phase)], 0) << PhaseName(phase);
  }
}

TEST(PhaseClockTest, CountsNothingWhileOff) {
  EnablePhaseClock(true);
  EnablePhaseClock(false);
  (void)RunCase(JudgedCase(), *FindBackend("cpu_reference"));
  const PhaseTotals totals = ReadPhaseClock();
  EXPECT_EQ(totals.cases_run, 0);
  EXPECT_EQ(totals.cases_judged, 0);
  for (double seconds : totals.seconds) EXPECT_EQ(seconds, 0);
}

TEST(PhaseClockTest, StartsFromZero) {
  EnablePhaseClock(true);
  (void)RunCase(JudgedCase(), *FindBackend("cpu_reference"));
  EnablePhaseClock(true);
  EXPECT_EQ(ReadPhaseClock().cases_run, 0);
  EnablePhaseClock(false);
}

}  // namespace
}  // namespace varlen
