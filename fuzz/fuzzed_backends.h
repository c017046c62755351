// The backends the fuzz targets run, and the planted bugs that replace them.
//
// A build with planted bugs (-DVARLEN_FUZZ_PLANTED_BUGS=ON, as the fuzz
// preset is) links the conformance suite's mutants, and the
// environment variable VARLEN_PLANTED_BUG names one (`varlen mutants`
// lists them): every target then runs that mutant in place of the backends
// it normally runs, so scripts/fuzz-time-to-find can time how long the
// nightly job takes to find each bug. In any other build the variable is an
// error, never silently ignored.

#ifndef VARLEN_FUZZ_FUZZED_BACKENDS_H_
#define VARLEN_FUZZ_FUZZED_BACKENDS_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "varlen/backend/backend.h"

namespace varlen {

// The registered backend `name`, or the planted bug. Exits with status 2
// and a message when either cannot be had.
const Backend& FuzzedBackend(absl::string_view name);

// Every available registered backend, or the planted bug alone.
std::vector<const Backend*> FuzzedBackends();

}  // namespace varlen

#endif  // VARLEN_FUZZ_FUZZED_BACKENDS_H_
