// File: varlen/cases/executor.h
// -----------------------------------------------------------------------------
//
// The one executor: it runs a Case against a Backend and judges the result.
//
//   1. materialize the call (tensors, kwargs, prepared metadata from the
//      case's builder; a builder may itself raise);
//   2. resolve it for the case's profile and mode (contract layer);
//   3. bind the resolved arguments as the profile's kernel would, check the
//      backend supports them and that no access leaves its buffer, poison the
//      output and run the backend;
//   4. judge the output against the float64 oracle of the ground-truth
//      geometry, and the whole outcome against the case's expectation.
//
// A case with warmup calls (Case::warmup) first runs each of them on the same
// backend, every time it runs: a backend that caches (built graphs, offsets)
// has then just seen a slightly different call. Their outcomes are recorded
// in Outcome::warmups and not judged.
//
// Geometries over the CPU budget (limits.h) stop after step 2, unless a GPU
// can run the oracle (a CUDA build on a machine with a device): then they
// run forward up to the GPU budget.
//
// A call-level backend (Backend::call_level(), an engine's own backend
// class) replaces steps 2 and 3: it gets the whole call. Faithful mode,
// at the backend's engine version, predicts the outcome, and that
// prediction is the expectation, whatever the case file says: a predicted
// error must be raised with the same type and message; a predicted correct
// launch must return the reference's numbers; a predicted launch other
// than the ground truth's (a silent corruption, a harmless difference)
// must return without raising, its numbers reported, not judged; observed
// host syncs must equal the predicted ones where the backend can observe
// them. Hardened cases do not apply to an engine's own code.
//
// Example:
//   CaseRunner runner(c);
//   for (const Backend* b : AllBackends()) Print(runner.Run(*b));

#ifndef VARLEN_CASES_EXECUTOR_H_
#define VARLEN_CASES_EXECUTOR_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "varlen/backend/backend.h"
#include "varlen/cases/case.h"
#include "varlen/cases/limits.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/synth.h"
#include "varlen/contract/resolve.h"

namespace varlen {

// What was observed, before comparing with any expectation.
enum class Observed {
  kError,        // a builder, resolution or a kernel entry raised
  kSuccess,      // resolved; the output matches (or resolution only)
  kCorruption,   // resolved; the output does not match, or the kernel would
                 // have accessed memory outside its buffers
  kUnsupported,  // the backend cannot run this (or is unavailable here)
};

enum class Verdict { kPass, kFail, kUnsupported };

absl::string_view ObservedName(Observed observed);
absl::string_view VerdictName(Verdict verdict);  // "PASS", "FAIL", "UNSUPPORTED"

// A call-level run: what faithful mode predicted and what the engine's own
// forward did. At namespace scope, not nested in Outcome: clang evaluates
// std::optional's constructibility of a nested struct with default member
// initializers while the enclosing class is still incomplete, and refuses it.
struct EngineCallOutcome {
  std::string predicted;             // "RuntimeError: ...", or the launch it predicts
  bool ground_truth_launch = false;  // the prediction is the ground truth's launch
  std::string did;                   // "raised TypeError: ...", "returned [T, H, D] float32"
  std::optional<DeviceEventCounts> device_events;  // observed, where observable
};

struct Outcome {
  std::string backend;
  std::vector<DeviceEvent> builder_events;  // from building forward_metadata
  std::optional<Resolution> resolution;     // unset when a builder raised
  absl::Status error;                       // the Python error raised, if any
  std::string error_stage;                  // "metadata builder", "resolution", "kernel entry"
  std::string resolution_only_reason;       // non-empty when no forward run was made
  absl::Status unsupported;                 // why the backend cannot run it
  std::string kernel;                       // what the kernel was asked to do
  absl::Status kernel_fault;                // an out-of-bounds access, caught before the run
  std::optional<NumericReport> numerics;
  std::optional<Tensor> output;  // packed [T, Hq, Dv], with RunOptions.keep_output
  Observed observed = Observed::kSuccess;
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> mismatches;  // why the verdict is FAIL
  // The warmup calls made first, in order: recorded, never judged (each has
  // its own observed and verdict, as a case without an expectation would).
  std::vector<Outcome> warmups;
  // Call level: what faithful mode predicted (`resolution` holds its
  // resolution) and what the engine's forward did.
  std::optional<EngineCallOutcome> engine;
};

struct RunOptions {
  ToleranceModel tolerance;
  bool allow_forward = true;  // false: resolution only, whatever the budget
  bool keep_output = false;   // keep the backend's output in Outcome::output
  ForwardBudget budget;       // for the ground truth, and for what a kernel would compute
  // The reference of this case's geometry, data and profile, from an earlier
  // runner (CaseRunner::computed_reference): spellings of one call share it.
  std::shared_ptr<const Reference> reference;
};

// Prepares a case once (tensors, oracle) and runs it on any number of
// backends. REQUIRES: ValidateCase(c).ok().
class CaseRunner {
 public:
  explicit CaseRunner(Case c, RunOptions options = {});

  const Case& test_case() const { return case_; }
  bool runs_forward() const { return forward_; }

  Outcome Run(const Backend& backend);

  // The q, k and v every backend receives (shape only without a forward
  // run), and the float64 oracle and emulation. REQUIRES for reference():
  // runs_forward().
  const QkvTensors& tensors() const { return qkv_; }
  const Reference& reference() { return GetReference(); }
  // The reference once a run has computed (or been given) it, else null.
  std::shared_ptr<const Reference> computed_reference() const { return reference_; }

 private:
  // Steps 1-4: fills `outcome` up to, not including, the verdict.
  void Execute(const Backend& backend, Outcome* outcome);
  // Steps 2-4 for a call-level backend, the verdict included.
  void ExecuteWholeCall(const Backend& backend, AttentionCall call, Outcome* outcome);
  const Reference& GetReference();
  double ReferenceScale() const;  // the scale the reference runs with

  Case case_;
  RunOptions options_;
  absl::StatusOr<OracleDevice> oracle_device_;  // an error: resolution only, and why
  bool forward_;
  QkvTensors qkv_;
  std::shared_ptr<const Reference> reference_;
  std::vector<CaseRunner> warmups_;  // one per Case::warmup
};

// Shorthand for a single backend.
Outcome RunCase(const Case& c, const Backend& backend, RunOptions options = {});

// The call `c` makes with `qkv` (SynthesizeQkv or ShapeOnlyQkv of c), its
// metadata built as the case names in its mode, before the attention layer:
// what a backend is called with. An error is the metadata builder's.
absl::StatusOr<AttentionCall> CallOfCase(const Case& c, const QkvTensors& qkv);

// Whether the kernel of `c`'s profile refuses `c`'s geometry at its entry (a
// dtype or head size it does not take; IsKernelCapabilityLimit). A
// generated correct call with such a geometry is out of scope for every
// property: its replay as a case would never reach a backend.
bool KernelRefusesGeometry(const Case& c);

}  // namespace varlen

#endif  // VARLEN_CASES_EXECUTOR_H_
