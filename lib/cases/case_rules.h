// Internal: the checks the case reader (case_json.cc) and each engine's
// call rules (lib/cases/<engine>/calls.cc) share. Every error names the
// JSON path of the value, the value and the rule.

#ifndef VARLEN_LIB_CASES_CASE_RULES_H_
#define VARLEN_LIB_CASES_CASE_RULES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "varlen/cases/case.h"

namespace varlen::internal {

// InvalidArgument "<path>: <problem>".
absl::Status PathError(absl::string_view path, absl::string_view problem);

// `value` within [lo, hi], else an error that states `rule`.
absl::Status CheckRange(absl::string_view path, int64_t value, int64_t lo, int64_t hi,
                        absl::string_view rule);

// A literal argument that parsed but cannot be: shapes that disagree with
// the values given, views past the limits, integers that do not fit their
// dtype; lists and caches checked element by element.
absl::Status ValidateArg(const ArgLiteral& a, const std::string& path);

// What a geometry's rows are, for a rule about them: "the total of
// geometry.seq_lens", and its padding when it has any.
std::string RowsOfGeometry(const Geometry& g);

}  // namespace varlen::internal

#endif  // VARLEN_LIB_CASES_CASE_RULES_H_
