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
// The binary honours VARLEN_TIER (smoke, full, nightly), VARLEN_FAILURES_DIR
// (default ./varlen-failures), VARLEN_CORPUS_DIR, VARLEN_EXPECTATIONS (a
// manifest of known gaps, expectations.h) and RC_PARAMS, and
// `--repro=FILE` replays one case file on the backend. Each failing property
// writes its shrunk case there as a corpus-ready JSON file and prints the
// line that replays it.

#ifndef VARLEN_CONFORMANCE_SUITE_H_
#define VARLEN_CONFORMANCE_SUITE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/backend/backend.h"
#include "varlen/conformance/expectations.h"
#include "varlen/conformance/generators.h"

namespace varlen {

enum class Tier {
  kSmoke,    // seconds: every property, small cases (CI, every commit)
  kFull,     // minutes: more and larger cases
  kNightly,  // hours: many more, a fresh seed each run
};

absl::string_view TierName(Tier tier);  // "smoke", "full", "nightly"
absl::StatusOr<Tier> ParseTier(absl::string_view name);

// How one property runs at a tier. RC_PARAMS keys override these.
struct PropertyBudget {
  int cases = 0;             // RapidCheck max_success
  ForwardLimits limits;      // geometry and compute per case
  double time_budget_s = 0;  // stop generating after this (0: none)
  uint64_t seed = 0;         // 0: a fresh seed (printed)
};

PropertyBudget BudgetFor(absl::string_view property, Tier tier);

// The generated properties, in the order above.
std::vector<std::string> PropertyNames();

struct PropertyRunOptions {
  PropertyBudget budget;
  // The cases to try; unset: GenForwardCase(backend capabilities, limits).
  std::optional<rc::Gen<Case>> generator;
  bool shrink = true;
};

struct PropertyRunResult {
  bool passed = false;
  int64_t executed = 0;  // cases checked, shrinking included
  int64_t unsupported = 0;
  int64_t skipped_for_time = 0;
  int64_t executions_to_failure = 0;  // when it failed: cases until the first failure
  double seconds_to_failure = 0;
  double seconds = 0;
  std::string params_note;     // the seed, or the RC_PARAMS used
  std::string message;         // RapidCheck's report when it failed
  std::optional<Case> shrunk;  // the smallest failing case
  std::string why;             // what the property saw on it
};

// Runs one property on `backend` outside GoogleTest (mutation analysis,
// `varlen check`).
PropertyRunResult RunProperty(absl::string_view property, const Backend& backend,
                              const PropertyRunOptions& options);

struct SuiteOptions {
  std::vector<std::string> backends;  // empty: every registered backend
  std::string corpus_dir;             // empty: no corpus replay
  Tier tier = Tier::kSmoke;
  std::string failures_dir = "varlen-failures";
  // How the failure message says to replay a case ("varlen repro {file}
  // --backend={backend}" by default).
  std::string repro_command;
  // Known gaps of the backend (expectations.h); null: none.
  std::shared_ptr<const Expectations> expectations;
};

// Writes `c`, shrunk by `property` on `backend`, as DIR/<backend>-<property>.json
// with a name, a source and a description, ready for corpus/regressions/.
// Returns the path.
absl::StatusOr<std::string> WriteShrunkCase(const std::string& dir, absl::string_view backend,
                                            absl::string_view property, Tier tier, Case c,
                                            const std::string& why);

// Overrides `options` with VARLEN_TIER, VARLEN_FAILURES_DIR,
// VARLEN_CORPUS_DIR and VARLEN_EXPECTATIONS (a manifest file) when they are
// set. An unknown tier or an invalid manifest is an error.
absl::StatusOr<SuiteOptions> ApplyEnvironment(SuiteOptions options);

// Registers the corpus tests and the property tests on each backend. Call
// after testing::InitGoogleTest and before RUN_ALL_TESTS.
absl::Status RegisterConformanceSuite(const SuiteOptions& options);

// The main() of a backend's conformance binary: registers `backend`, then
// the whole suite on it, and runs it (or `--repro=FILE`).
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
