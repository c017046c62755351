// File: varlen/cases/phase_clock.h
// -----------------------------------------------------------------------------
//
// Where the time of a judged case goes. The executor charges each step of a
// case to a phase of one process-wide clock: synthesis of q, k and v,
// resolution of the call, the backend, the float64 oracle, the
// same-precision emulations, and the judge (the bound and the comparison).
// `varlen check --timings` turns the clock on and prints the split beside
// the cases judged per second; off (the default), a step costs one relaxed
// atomic load.
//
// The clock counts the steps of the calling thread only (a backend's or the
// oracle's own threads are inside their step), in this process only (a
// supervised run's workers keep their own clocks: time it in-process).

#ifndef VARLEN_CASES_PHASE_CLOCK_H_
#define VARLEN_CASES_PHASE_CLOCK_H_

#include <array>
#include <chrono>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace varlen {

enum class Phase { kSynthesis, kResolution, kBackend, kOracle, kEmulation, kJudge };
inline constexpr int kPhaseCount = 6;

absl::string_view PhaseName(Phase phase);  // "synthesis", "resolution", ...

struct PhaseTotals {
  std::array<double, kPhaseCount> seconds{};  // by Phase
  int64_t cases_run = 0;                      // CaseRunner::Run calls (each warmup counts)
  int64_t cases_judged = 0;                   // outputs compared with the oracle
};

// Starts (from zero) or stops the clock.
void EnablePhaseClock(bool on);
bool PhaseClockEnabled();
PhaseTotals ReadPhaseClock();

// Charges the time from construction to destruction to `phase`, when the
// clock is on. Nested scopes charge both phases.
class ScopedPhase {
 public:
  explicit ScopedPhase(Phase phase);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  Phase phase_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

// Counts one CaseRunner::Run, or one output judged, when the clock is on.
void CountCaseRun();
void CountCaseJudged();

}  // namespace varlen

#endif  // VARLEN_CASES_PHASE_CLOCK_H_
