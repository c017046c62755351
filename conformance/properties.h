// The suite's generated properties (internal to the suite): each checks one
// generated case on one backend and says why it does not hold. suite.cc runs
// them through RapidCheck; conformance/suite.h documents what each checks.

#ifndef VARLEN_CONFORMANCE_PROPERTIES_H_
#define VARLEN_CONFORMANCE_PROPERTIES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/backend/backend.h"
#include "varlen/backend/fault.h"
#include "varlen/cases/case.h"

namespace varlen::internal {

// What a property counted over its cases besides failures, and the case
// that replays a failure by itself when there is one (a failing call of a
// comparison property, rather than the input of the comparison).
struct PropertyRun {
  int64_t unsupported = 0;
  std::optional<Case> replay;
  std::optional<Fault> fault;  // when the backend faulted on the case
};

struct Property {
  const char* name;
  // "" when the property holds on the case, else why not.
  std::string (*check)(const Backend&, const Case&, PropertyRun*);
  // Whether the case replays the failure by itself (Numerics), or is the
  // input of a comparison that `varlen repro` does not make.
  bool case_replays;
};

// The checks, one per property (numeric_properties.cc, call_properties.cc,
// metamorphic_properties.cc).
std::string CheckNumerics(const Backend&, const Case&, PropertyRun*);
// The ground truth's launch with a window, a causal mask or sinks, judged
// against the float64 reference; unsupported where the backend computes
// none of them.
std::string CheckAttentionVariants(const Backend&, const Case&, PropertyRun*);
// The ground truth's launch with rows in no sequence (before, between and
// after the sequences; NaN in q, k and v), judged against the reference.
std::string CheckPaddingRows(const Backend&, const Case&, PropertyRun*);
std::string CheckSystematicError(const Backend&, const Case&, PropertyRun*);
std::string CheckArgumentForms(const Backend&, const Case&, PropertyRun*);
std::string CheckGraphSafety(const Backend&, const Case&, PropertyRun*);
std::string CheckNoSilentCorruption(const Backend&, const Case&, PropertyRun*);
std::string CheckPoisonedNeighbours(const Backend&, const Case&, PropertyRun*);
std::string CheckSequencePermutation(const Backend&, const Case&, PropertyRun*);
std::string CheckSequenceAlone(const Backend&, const Case&, PropertyRun*);
std::string CheckSplitJoin(const Backend&, const Case&, PropertyRun*);
std::string CheckLogitShift(const Backend&, const Case&, PropertyRun*);
std::string CheckGqaRepeatedKv(const Backend&, const Case&, PropertyRun*);

// In the order conformance/suite.h lists them.
absl::Span<const Property> Properties();
const Property* FindProperty(absl::string_view name);

}  // namespace varlen::internal

#endif  // VARLEN_CONFORMANCE_PROPERTIES_H_
