// How a fuzz target reports a violated property. It prints one line naming
// the property (the crash type the nightly driver deduplicates on), the
// details, the violating case as a case file between marker lines (the
// driver keeps it for corpus/regressions/), what running it did, and aborts
// as libFuzzer expects of a finding.

#ifndef VARLEN_FUZZ_VIOLATION_H_
#define VARLEN_FUZZ_VIOLATION_H_

#include "absl/strings/string_view.h"
#include "varlen/cases/case.h"
#include "varlen/cases/executor.h"

namespace varlen {

// The marker lines, shared with scripts/nightly.
inline constexpr absl::string_view kViolationPrefix = "==varlen== property violated: ";
inline constexpr absl::string_view kCaseBegin = "==varlen== case begin";
inline constexpr absl::string_view kCaseEnd = "==varlen== case end";

// `property` is a short fixed name (never data-dependent), so that one bug
// found many times deduplicates to one signature.
[[noreturn]] void ReportViolation(absl::string_view property, absl::string_view detail,
                                  const Case& c, const Outcome* outcome = nullptr);

}  // namespace varlen

#endif  // VARLEN_FUZZ_VIOLATION_H_
