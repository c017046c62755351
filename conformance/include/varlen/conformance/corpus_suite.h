// File: varlen/conformance/corpus_suite.h
// -----------------------------------------------------------------------------
//
// The regression corpus as GoogleTest tests, for this project and for anyone
// embedding varlen to check their own backend: one test per (case file,
// backend), named Corpus.<case name>/<backend>, that fails with the full
// `varlen repro` report when the case's expectation does not hold. A run
// that is "not supported" by a backend is skipped, never passed or failed.
//
// Example, in a test binary of a new backend:
//   int main(int argc, char** argv) {
//     testing::InitGoogleTest(&argc, argv);
//     varlen::RegisterBackend(std::make_unique<MyBackend>());
//     absl::Status s = varlen::RegisterCorpusTests("corpus/regressions", {"my_backend"});
//     if (!s.ok()) { std::cerr << s.message() << "\n"; return 2; }
//     return RUN_ALL_TESTS();
//   }

#ifndef VARLEN_CONFORMANCE_CORPUS_SUITE_H_
#define VARLEN_CONFORMANCE_CORPUS_SUITE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "varlen/conformance/expectations.h"

namespace varlen {

// Registers the tests for every case under `corpus_dir` on each backend named
// in `backend_names` (all registered backends when empty), under
// `expectations` when given (it must outlive the tests). Call after
// testing::InitGoogleTest and before RUN_ALL_TESTS. An invalid case file or
// an unknown backend name is an error, not a test failure.
absl::Status RegisterCorpusTests(const std::string& corpus_dir,
                                 const std::vector<std::string>& backend_names = {},
                                 const Expectations* expectations = nullptr);

// "Corpus.<case name with every character but letters, digits and _ as _>":
// the name expectations manifests match.
std::string CorpusTestName(const std::string& case_name);

}  // namespace varlen

#endif  // VARLEN_CONFORMANCE_CORPUS_SUITE_H_
