// Fuzz target: arbitrary bytes as a case file.
//
// For any input: loading never crashes; a case that loads writes back to
// canonical JSON that loads to the same case; the case the byte decoder
// makes of the same bytes does too; and running a loaded case on every
// backend (metadata, resolution, kernel binding and, for small geometries,
// the kernel and the judge) never crashes (ASan and UBSan watch).

#include <cstdint>

#include "absl/strings/string_view.h"
#include "case_decoder.h"
#include "fuzzed_backends.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "violation.h"

namespace {

// The same bytes through the byte decoder: every decoded case must write
// to a case file that reads back to it, or a finding could not be kept.
void CheckDecodedRoundTrip(const uint8_t* data, size_t size) {
  static const varlen::DecodeLimits limits = *varlen::DecodeLimitsFor("contract");
  absl::StatusOr<varlen::Case> decoded = varlen::DecodeCase({data, size}, limits);
  if (!decoded.ok()) return;
  absl::StatusOr<varlen::Case> reread = varlen::ParseCase(varlen::WriteCase(*decoded), "<decoded>");
  if (!reread.ok() || !(*reread == *decoded)) {
    varlen::ReportViolation("decoded-case-round-trip",
                            reread.ok() ? "the case file of a decoded case reads back to another"
                                        : reread.status().message(),
                            *decoded);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckDecodedRoundTrip(data, size);
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<varlen::Case> parsed = varlen::ParseCase(text, "<input>");
  if (!parsed.ok()) return 0;

  const std::string written = varlen::WriteCase(*parsed);
  absl::StatusOr<varlen::Case> reparsed = varlen::ParseCase(written, "<rewritten>");
  if (!reparsed.ok() || !(*reparsed == *parsed)) {
    varlen::ReportViolation("case-json-round-trip",
                            reparsed.ok() ? "the rewritten case differs from the case read"
                                          : reparsed.status().message(),
                            *parsed);
  }

  // Small forward runs too, so binding, bounds checks, the oracle and the
  // judge see fuzzed arguments; anything larger runs resolution only.
  varlen::RunOptions options;
  options.budget = {.macs = 200'000, .elements = 20'000};
  varlen::CaseRunner runner(*parsed, options);
  for (const varlen::Backend* backend : varlen::FuzzedBackends()) runner.Run(*backend);
  return 0;
}
