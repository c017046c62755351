// File: varlen/cases/report.h
// -----------------------------------------------------------------------------
//
// How outcomes are shown: as text for people reproducing a bug report, and
// as JSON for tools. Resolved arguments print in the same spelling case files
// use, so an expectation's "resolved" block can be copied from a report.

#ifndef VARLEN_CASES_REPORT_H_
#define VARLEN_CASES_REPORT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "varlen/cases/case.h"
#include "varlen/cases/executor.h"
#include "varlen/contract/resolve.h"

namespace varlen {

// {"profile": "fa3", "cu_seqlens": {"tensor": [...], ...}, "max_seqlen": 720, ...}
nlohmann::ordered_json ResolvedArgsToJson(const ResolvedArgs& args);

// A Python value as case files spell it.
nlohmann::ordered_json ValueToJson(const Value& value);

// One line: what the caller passed (cu_seqlens, metadata, kwargs).
std::string DescribeCall(const CallSpec& call);

// The text block `varlen repro` prints for one outcome. The Python error, if
// any, is a line of its own, exactly as Python prints it.
std::string FormatOutcomeText(const Case& c, const std::string& origin, const Outcome& outcome);

// The same outcome as JSON: every fact of the text block, field for field
// (a test keeps the two in agreement), in the versioned schema of
// docs/report-json.md.
inline constexpr int kOutcomeJsonSchema = 1;
nlohmann::ordered_json OutcomeToJson(const Case& c, const std::string& origin,
                                     const Outcome& outcome);

// How one case's outcome changed from one SGLang version to the next (the
// triage view of `varlen repro --sglang=all`).
struct VersionDifference {
  // "fixed in 0.5.23" (it failed before and succeeds now), "new in 0.5.23"
  // (it succeeded before and fails now) or "changed in 0.5.23"; empty when
  // nothing differs.
  std::string summary;
  // One entry per field that differs: "resolved.seq_lens: {...} -> {...}".
  std::vector<std::string> fields;
  // What was compared, and the side that ran for resolution only (no output
  // to judge there), if any: then the summary never says "fixed" or "new".
  std::string compared;
};

// Compares the outcome, the error, the resolved arguments and the device
// event counts of one case run under two versions.
VersionDifference CompareVersions(const Outcome& before, EngineVersion before_version,
                                  const Outcome& after, EngineVersion after_version);

// The same comparison for one call under two engines (CounterpartCase):
// the summary says what each engine did ("sglang:fa3 succeeds;
// vllm:FLASH_ATTN/fa3 raises RuntimeError: ..."), the fields what differs
// (the resolved arguments are each engine's own, so they always do).
VersionDifference CompareEngines(const Case& a, const Outcome& in_a, const Case& b,
                                 const Outcome& in_b);

}  // namespace varlen

#endif  // VARLEN_CASES_REPORT_H_
