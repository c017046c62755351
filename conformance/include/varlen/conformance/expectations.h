// File: varlen/conformance/expectations.h
// -----------------------------------------------------------------------------
//
// An expectations manifest: what a backend is known not to pass yet, with a
// reason, an issue and an expiry date, so its suite can run green while the
// gaps stay visible. A JSON file:
//
//   {
//     "backend": "my_backend",
//     "strict": true,
//     "entries": [
//       {"test": "Corpus.sdpa_*", "dtype": "float64", "expect": "skip",
//        "reason": "no float64 kernels", "issue": "https://...", "expires": "2027-03-01"},
//       {"test": "Conformance.SystematicError", "expect": "fail",
//        "reason": "output rounds toward zero", "issue": "https://..."}
//     ]
//   }
//
// `test` is a glob (* and ?) over "Corpus.<case>" and "Conformance.<property>"
// (the GoogleTest names without "/<backend>"). `dtype` narrows a corpus entry
// to cases of that dtype, and a Conformance skip entry to generated cases of
// that dtype; `distribution` ("non_finite", ...) does the same for the data
// distribution. `expect`:
//   fail   the test must fail: a failure is reported XFAIL; a pass is XPASS,
//          which fails a strict run (remove the entry) and is a note otherwise
//   skip   the test (or the dtype) is not run
//   flaky  a failure is tolerated and reported
// An expired entry no longer applies; expired entries and entries that match
// no test are reported, and fail a strict run.

#ifndef VARLEN_CONFORMANCE_EXPECTATIONS_H_
#define VARLEN_CONFORMANCE_EXPECTATIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "varlen/backend/backend.h"
#include "varlen/cases/case.h"
#include "varlen/core/dtype.h"

namespace varlen {

enum class Expect { kFail, kSkip, kFlaky };

struct ExpectationEntry {
  std::string test;  // a glob
  std::optional<DType> dtype;
  std::optional<Distribution> distribution;
  Expect expect = Expect::kFail;
  std::string reason;
  std::string issue;
  std::optional<absl::CivilDay> expires;
};

struct Expectations {
  std::string origin;   // the file it came from
  std::string backend;  // empty: any
  bool strict = false;
  std::vector<ExpectationEntry> entries;
};

// Errors name the file, the JSON path and the rule.
absl::StatusOr<Expectations> ParseExpectations(absl::string_view json_text,
                                               absl::string_view origin);
absl::StatusOr<Expectations> LoadExpectations(const std::string& path);

absl::CivilDay Today();  // UTC

bool Expired(const ExpectationEntry& entry, absl::CivilDay today);

// The first unexpired entry whose glob matches `test` and whose dtype and
// distribution, if any, are `dtype` and `distribution`; nullptr when none
// applies.
const ExpectationEntry* FindExpectation(const Expectations& expectations, absl::string_view test,
                                        std::optional<DType> dtype, absl::CivilDay today,
                                        std::optional<Distribution> distribution = std::nullopt);

// Lines for the manifest's report: expired entries, and entries whose glob
// matches none of `tests`.
std::vector<std::string> ManifestProblems(const Expectations& expectations,
                                          const std::vector<std::string>& tests,
                                          absl::CivilDay today);

// Whether `expectations` applies to `backend` (it names that backend, or
// none).
bool AppliesTo(const Expectations& expectations, absl::string_view backend);

// `caps` without the dtypes that a skip entry for `test` names, so that a
// property's generated cases avoid them.
BackendCapabilities WithoutSkippedDTypes(BackendCapabilities caps, const Expectations& expectations,
                                         absl::string_view test, absl::CivilDay today);

// The data distributions that skip entries for `test` name (without a
// dtype), so that a property's generated cases avoid them.
std::vector<Distribution> SkippedDistributions(const Expectations& expectations,
                                               absl::string_view test, absl::CivilDay today);

// "skip: no float64 kernels (https://...), until 2027-03-01"
std::string DescribeEntry(const ExpectationEntry& entry);

}  // namespace varlen

#endif  // VARLEN_CONFORMANCE_EXPECTATIONS_H_
