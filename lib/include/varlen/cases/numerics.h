// File: varlen/cases/numerics.h
// -----------------------------------------------------------------------------
//
// The numerical judge. A backend's output is compared with the float64
// oracle computed from the case's ground-truth geometry, never from the
// resolved arguments, under a tolerance that is measured, not guessed:
//
//   bound = factor * E_emulated + noise_floor
//
// where E_emulated is the max error of a same-precision emulation (inputs in
// the dtype, float32 accumulation, probabilities rounded before P*V; for
// float64 inputs the naive float64 loop, whose sums run in another order;
// for float32 inputs the larger of two emulations whose sums run in
// opposite orders, since there the order is most of the error) against the
// oracle (the blocked float64 one), and noise_floor = 2 * max|((ref + 0.3) - 0.3) -
// ref| computed in the dtype: the rounding noise of one add at the output's magnitude (the rule
// FlashAttention 3 uses, with factor 2).
//
// Besides the error, the judge counts NaN/Inf where the oracle is finite,
// finite values where the oracle is NaN/Inf (NaN and Inf propagate exactly
// where the reference has them; NaN against Inf may follow either the oracle
// or the emulation), and output elements the kernel never wrote (the output
// is poisoned with a sentinel NaN before the run). Any of those fails,
// whatever the error.

#ifndef VARLEN_CASES_NUMERICS_H_
#define VARLEN_CASES_NUMERICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varlen/backend/params.h"
#include "varlen/cases/case.h"
#include "varlen/cases/limits.h"
#include "varlen/core/tensor.h"

namespace varlen {

// Per element, |out - oracle| <= factor * max(E_emulated, E_logit) + noise
// floor (docs/conformance.md): E_emulated the largest error of the
// same-precision emulation (for float32, of two with their sums in opposite
// orders), E_logit (float32 only) the first-order effect of rounding each
// logit once, which a float32 kernel carries in any order of its sums.
struct ToleranceModel {
  double factor = 2.0;
};

// The oracle and the emulation for one case, computed once and shared by
// every backend the case runs on.
struct Reference {
  std::vector<double> oracle;    // [T, Hq, Dv], float64
  std::vector<double> emulated;  // the same-precision emulation
  double emulation_error = 0.0;  // max |emulated - oracle|
  double logit_rounding = 0.0;   // E_logit: float32 inputs, CPU oracle
  double noise_floor = 0.0;
  absl::Status status;  // not OK when a GPU run of the oracle failed
};

// Where the oracle of a geometry runs: the CPU within `cpu_budget`; beyond
// it a GPU, when this build has CUDA, the machine a device, and the
// geometry fits kGpuForwardBudget; otherwise nowhere (resolution only),
// with the reason.
enum class OracleDevice { kCpu, kGpu };
absl::StatusOr<OracleDevice> OracleDeviceFor(const Geometry& g, const ForwardBudget& cpu_budget);

// OK when geometries beyond the CPU budget can run their oracle on a GPU
// here; else why not.
absl::Status GpuOracleAvailable();

// Runs any launch with the oracle's float64 arithmetic on the CPU, the
// output rounded to params.output_dtype: what an exact kernel handed that
// launch returns (the executor's prediction for a call-level backend).
// REQUIRES: CheckKernelBounds(params).ok().
void RunExactKernel(const VarlenAttentionParams& params);

// REQUIRES: q, k, v hold data for c's geometry ([T, H, D] or [b, s, H, D]).
Reference ComputeReference(const Geometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                           OracleDevice device = OracleDevice::kCpu);

struct ElementLocation {
  int64_t sequence = -1;
  int64_t row = -1;  // within the sequence
  int64_t head = -1;
  int64_t dim = -1;
  double expected = 0.0;
  double actual = 0.0;
};

struct NumericReport {
  int64_t elements = 0;
  int64_t unwritten = 0;        // still holding the poison sentinel
  int64_t non_finite = 0;       // NaN/Inf where the oracle is finite
  int64_t lost_non_finite = 0;  // finite (or another NaN/Inf) where the oracle is NaN/Inf
  double max_abs_error = 0.0;   // over written, finite elements
  double max_rel_error = 0.0;   // over elements with |oracle| > noise_floor
  double emulation_error = 0.0;
  double logit_rounding = 0.0;
  double noise_floor = 0.0;
  double tolerance_factor = 0.0;
  double bound = 0.0;
  ElementLocation worst;                       // largest error (or first bad element)
  std::vector<double> per_sequence_max_error;  // to locate a bug in one sequence
  // [sequence][head] row-major, `heads` columns: the largest error of each
  // block, +infinity where an element is unwritten or wrongly (non-)finite.
  std::vector<double> per_sequence_head_max_error;
  int64_t heads = 0;
  // Elements of the padding rows (Geometry::padding), and those of them
  // still holding the sentinel: what the kernel did there, not judged.
  int64_t padding_elements = 0;
  int64_t padding_unwritten = 0;
  bool passed = false;
};

// Fills `output` with the sentinel NaN of its dtype.
void PoisonOutput(const Tensor& output);

// Compares the sequences' rows of `output` ([T, Hq, Dv] elements, any view)
// with `reference`; the padding rows are counted, not judged.
NumericReport JudgeOutput(const Geometry& g, const Reference& reference, const Tensor& output,
                          const ToleranceModel& tolerance);

// "max abs error 1.2e-03 <= bound 3.9e-03 (2 x emulation 1.5e-03 + noise 9.8e-04)" (the
// logit rounding named instead when it is the larger yardstick), plus
// unwritten and non-finite counts and the worst element when they matter.
std::string SummarizeNumerics(const NumericReport& report);

}  // namespace varlen

#endif  // VARLEN_CASES_NUMERICS_H_
