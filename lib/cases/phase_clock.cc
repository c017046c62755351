#include "varlen/cases/phase_clock.h"

#include <atomic>

namespace varlen {
namespace {

struct Clock {
  std::atomic<bool> on{false};
  std::array<std::atomic<int64_t>, kPhaseCount> nanoseconds{};
  std::atomic<int64_t> cases_run{0};
  std::atomic<int64_t> cases_judged{0};
};

Clock& TheClock() {
  static Clock* clock = new Clock;
  return *clock;
}

}  // namespace

absl::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kSynthesis:
      return "synthesis";
    case Phase::kResolution:
      return "resolution";
    case Phase::kBackend:
      return "backend";
    case Phase::kOracle:
      return "oracle";
    case Phase::kEmulation:
      return "emulation";
    case Phase::kJudge:
      return "judge";
  }
  return "?";
}

void EnablePhaseClock(bool on) {
  Clock& clock = TheClock();
  if (on) {
    for (std::atomic<int64_t>& n : clock.nanoseconds) n.store(0);
    clock.cases_run.store(0);
    clock.cases_judged.store(0);
  }
  clock.on.store(on);
}

bool PhaseClockEnabled() { return TheClock().on.load(std::memory_order_relaxed); }

PhaseTotals ReadPhaseClock() {
  Clock& clock = TheClock();
  PhaseTotals totals;
  for (int i = 0; i < kPhaseCount; ++i) totals.seconds[i] = clock.nanoseconds[i].load() * 1e-9;
  totals.cases_run = clock.cases_run.load();
  totals.cases_judged = clock.cases_judged.load();
  return totals;
}

ScopedPhase::ScopedPhase(Phase phase) : phase_(phase), on_(PhaseClockEnabled()) {
  if (on_) start_ = std::chrono::steady_clock::now();
}

ScopedPhase::~ScopedPhase() {
  if (!on_) return;
  const auto elapsed = std::chrono::steady_clock::now() - start_;
  TheClock().nanoseconds[static_cast<int>(phase_)].fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count(),
      std::memory_order_relaxed);
}

void CountCaseRun() {
  if (PhaseClockEnabled()) TheClock().cases_run.fetch_add(1, std::memory_order_relaxed);
}

void CountCaseJudged() {
  if (PhaseClockEnabled()) TheClock().cases_judged.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace varlen
