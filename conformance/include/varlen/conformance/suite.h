// File: varlen/conformance/suite.h
// -----------------------------------------------------------------------------
//
// The whole conformance suite for a backend, registered with one line: the
// regression corpus replayed (Corpus.<case>/<backend>) and the generated
// properties (Conformance.<property>/<backend>):
//
//   Numerics          correct calls of every profile, mode and version, on
//                     geometries weighted toward tile and bucket edges and
//                     every data distribution, judged elementwise against
//                     float64 (NaN/Inf exactly where the reference has them,
//                     every element written)
//   SystematicError   a bias or an error growth that stays inside the
//                     elementwise bound (rounding toward zero, low-precision
//                     accumulation): signed error and RMS error in units of
//                     the output dtype's ulp, against a same-precision kernel
//   ArgumentForms     liveness and equivalence: every well-formed spelling
//                     of one call (max_seqlen as int, host or device tensor
//                     or None; cu_seqlens int32 or int64, host or device;
//                     prepared metadata or keywords; direct or through the
//                     layer) passes in both modes, with the same kernel
//                     arguments and the same output bits
//   GraphSafety       resolution from prepared metadata makes no host sync
//                     and no host-to-device copy (CUDA-graph capture)
//   NoSilentCorruption a correct call with one corrupted argument, in
//                     hardened mode, raises or still matches float64
//   PoisonedNeighbours a sequence's output does not change by a bit when its
//                     neighbours and the tail beyond the last offset are NaN
//   SequencePermutation each sequence's output does not change by a bit when
//                     the sequences are packed in another order
//   SequenceAlone     a sequence launched alone gives the bits of its slice
//                     of the packed batch
//   SplitJoin         the batch split in two launches gives the bits of the
//                     joined launch
//   LogitShift        every logit of a row moved by up to +-1e4 changes the
//                     output by no more than rounding
//   GqaRepeatedKv     grouped-query attention gives the bits of the same
//                     attention with each KV head repeated
//
// The call properties run the backend's own argument handling
// (Backend::ResolveCall); fidelity to SGLang is the corpus replay's.
//
// In a backend's own test binary (link varlen::conformance):
//
//   #include "varlen/conformance/suite.h"
//   VARLEN_CONFORMANCE_MAIN(MyBackend)
//
// The binary honours VARLEN_TIER (smoke, full, nightly), VARLEN_BUDGET_SCALE
// (multiplies the tier's case counts and time budgets), VARLEN_FAILURES_DIR
// (default ./varlen-failures), VARLEN_CORPUS_DIR, VARLEN_EXPECTATIONS (a
// manifest of known gaps, expectations.h) and RC_PARAMS, and
// `--repro=FILE` replays one case file on the backend. Each failing property
// writes its shrunk case there as a corpus-ready JSON file and prints the
// line that replays it. The backend runs in worker processes (the binary
// started again, varlen/run/isolation.h): a crash, hang, memory blow-up or
// write outside its buffers fails the case that caused it and the run goes
// on; `--in-process` runs it in the binary's own process (for a debugger).
// VARLEN_DEADLINE_S (default 60) is the least time a call gets before its
// worker is killed, VARLEN_WORKER_MEMORY_MB a worker's memory limit.

#ifndef VARLEN_CONFORMANCE_SUITE_H_
#define VARLEN_CONFORMANCE_SUITE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/backend/backend.h"
#include "varlen/backend/fault.h"
#include "varlen/conformance/expectations.h"
#include "varlen/conformance/generators.h"
#include "varlen/run/isolation.h"

namespace varlen {

enum class Tier {
  kSmoke,    // seconds: every property, small cases (CI, every commit)
  kFull,     // minutes: more and larger cases
  kNightly,  // hours: many more, a fresh seed each run
};

absl::string_view TierName(Tier tier);  // "smoke", "full", "nightly"
absl::StatusOr<Tier> ParseTier(absl::string_view name);

// How one property runs at a tier: its cases (GenForwardCase), then its long
// cases (GenLongForwardCase), each with a count and a time budget, so long
// sequences get a fixed share of the tier's time. RC_PARAMS keys override
// these (max_success the count of the first part only).
struct PropertyBudget {
  int cases = 0;             // RapidCheck max_success
  ForwardLimits limits;      // geometry and compute per case
  double time_budget_s = 0;  // stop generating after this (0: none)
  uint64_t seed = 0;         // 0: a fresh seed (printed)
  int long_cases = 0;        // run after the others, when they pass
  LongLimits long_limits;
  double long_time_budget_s = 0;
};

PropertyBudget BudgetFor(absl::string_view property, Tier tier);

// `budget` with its case counts and time budgets multiplied by `scale`
// (at least one case of each kind): a tier sized for a slow backend.
PropertyBudget ScaleBudget(PropertyBudget budget, double scale);

// The generated properties, in the order above.
std::vector<std::string> PropertyNames();

struct PropertyRunResult;

struct PropertyRunOptions {
  PropertyBudget budget;
  // What the generators may draw; unset: the backend's capabilities.
  std::optional<BackendCapabilities> capabilities;
  // Other cases to try instead of GenForwardCase; set, no long cases run.
  std::optional<rc::Gen<Case>> generator;
  bool shrink = true;
  // False: the case counts alone bound generation, so the run checks the
  // same cases on any machine (shards of one run); shrinking is still
  // capped by the time budget.
  bool stop_on_time = true;
  // Called with the smallest failing case so far each time shrinking finds
  // a smaller one (result.shrunk set), so that a run killed mid-shrink
  // still leaves a case that replays.
  std::function<void(const PropertyRunResult& result)> on_shrunk;
};

struct PropertyRunResult {
  bool passed = false;
  int64_t executed = 0;  // cases checked, long ones and shrinking included
  int64_t unsupported = 0;
  int64_t skipped_for_time = 0;
  int64_t long_executed = 0;  // of `executed`, the long cases
  int64_t long_skipped_for_time = 0;
  double long_seconds = 0;            // of `seconds`
  int64_t executions_to_failure = 0;  // when it failed: cases until the first failure
  double seconds_to_failure = 0;
  double seconds = 0;
  std::string params_note;     // the seed, or the RC_PARAMS used
  std::string message;         // RapidCheck's report when it failed
  std::optional<Case> shrunk;  // the smallest failing case
  // Whether `shrunk` replays the failure by itself (a failing call), or is
  // the input of a failing comparison of two launches.
  bool shrunk_replays = false;
  std::string why;             // what the property saw on it
  std::optional<Fault> fault;  // when the backend faulted on `shrunk`
};

// Runs one property on `backend` outside GoogleTest (mutation analysis,
// `varlen check`).
PropertyRunResult RunProperty(absl::string_view property, const Backend& backend,
                              const PropertyRunOptions& options);

// Takes out of a run's generated cases what skip entries for `test` name:
// dtypes (from the backend's capabilities) and data distributions.
void ApplySkipEntries(const Expectations& expectations, absl::string_view test,
                      const Backend& backend, PropertyRunOptions* options);

// "150 cases in 1.2 s, 12 long in 3.4 s, 2 unsupported", with the cases the
// time budgets left out.
std::string DescribeRun(const PropertyRunResult& result);

struct SuiteOptions {
  std::vector<std::string> backends;  // empty: every registered backend
  std::string corpus_dir;             // empty: no corpus replay
  Tier tier = Tier::kSmoke;
  double budget_scale = 1.0;  // ScaleBudget of every property's budget
  std::string failures_dir = "varlen-failures";
  // How the failure message says to replay a case ("varlen repro {file}
  // --backend={backend}" by default).
  std::string repro_command;
  // Known gaps of the backend (expectations.h); null: none.
  std::shared_ptr<const Expectations> expectations;
};

// Writes the shrunk case of a failed run of `property` on `backend` as
// DIR/<backend>-<property>.json with a name, a source and a description,
// ready for corpus/regressions/. Returns the path. REQUIRES: result.shrunk.
absl::StatusOr<std::string> WriteShrunkCase(const std::string& dir, absl::string_view backend,
                                            absl::string_view property, Tier tier,
                                            const PropertyRunResult& result);

// Overrides `options` with VARLEN_TIER, VARLEN_BUDGET_SCALE,
// VARLEN_FAILURES_DIR, VARLEN_CORPUS_DIR and VARLEN_EXPECTATIONS (a manifest
// file) when they are set. An unknown tier, a scale that is not a positive
// number or an invalid manifest is an error.
absl::StatusOr<SuiteOptions> ApplyEnvironment(SuiteOptions options);

// Registers the corpus tests and the property tests on each backend. Call
// after testing::InitGoogleTest and before RUN_ALL_TESTS.
absl::Status RegisterConformanceSuite(const SuiteOptions& options);

// The main() of a backend's conformance binary: registers `backend`, then
// the whole suite on it, and runs it (or `--repro=FILE`).
// The worker settings VARLEN_DEADLINE_S and VARLEN_WORKER_MEMORY_MB give.
absl::StatusOr<IsolationOptions> IsolationFromEnvironment();

int ConformanceMain(int argc, char** argv, std::unique_ptr<Backend> backend,
                    const char* corpus_dir);

}  // namespace varlen

// The installed corpus (or the source tree's, in a build tree); the
// varlen::conformance target defines it for its users.
#ifndef VARLEN_CORPUS_DIR
#define VARLEN_CORPUS_DIR ""
#endif

// One line: a main() that runs the whole suite on BackendClass.
#define VARLEN_CONFORMANCE_MAIN(BackendClass)                                      \
  int main(int argc, char** argv) {                                                \
    return ::varlen::ConformanceMain(argc, argv, std::make_unique<BackendClass>(), \
                                     VARLEN_CORPUS_DIR);                           \
  }

#endif  // VARLEN_CONFORMANCE_SUITE_H_
