// How a test's result is reported under an expectations manifest entry
// (internal to the suite: the corpus tests and the property tests share it).

#ifndef VARLEN_CONFORMANCE_EXPECTATION_REPORT_H_
#define VARLEN_CONFORMANCE_EXPECTATION_REPORT_H_

#include <iostream>
#include <string>

#include "gtest/gtest.h"
#include "varlen/conformance/expectations.h"

namespace varlen::internal {

// Fails the current test, or reports XFAIL, XPASS or a tolerated flaky
// failure, as `entry` (nullptr: none) says. Skip entries are handled before
// the test runs.
inline void ReportUnderExpectation(const ExpectationEntry* entry, bool strict, bool passed,
                                   const std::string& failure) {
  if (entry == nullptr) {
    if (!passed) ADD_FAILURE() << failure;
    return;
  }
  const std::string described = DescribeEntry(*entry);
  if (entry->expect == Expect::kFail) {
    if (!passed) {
      std::cout << "[  XFAIL   ] expected failure: " << described << "\n";
    } else if (strict) {
      ADD_FAILURE() << "XPASS: passed, but the expectations manifest says " << described
                    << "; remove the entry";
    } else {
      std::cout << "[  XPASS   ] passed, but expected to fail: " << described << "\n";
    }
  } else if (entry->expect == Expect::kFlaky && !passed) {
    std::cout << "[  FLAKY   ] failure tolerated: " << described << "\n" << failure << "\n";
  } else if (!passed) {
    ADD_FAILURE() << failure;
  }
}

}  // namespace varlen::internal

#endif  // VARLEN_CONFORMANCE_EXPECTATION_REPORT_H_
