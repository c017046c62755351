// The conformance suite at its smoke tier (VARLEN_TIER overrides) on every
// backend built into this tree: the regression corpus replayed and the
// generated properties.

#include <iostream>

#include "gtest/gtest.h"
#include "varlen/conformance/suite.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  varlen::SuiteOptions defaults;
  defaults.corpus_dir = VARLEN_CORPUS_DIR;
  absl::StatusOr<varlen::SuiteOptions> options = varlen::ApplyEnvironment(defaults);
  absl::Status registered =
      options.ok() ? varlen::RegisterConformanceSuite(*options) : options.status();
  if (!registered.ok()) {
    std::cerr << registered.message() << "\n";
    return 2;
  }
  return RUN_ALL_TESTS();
}
