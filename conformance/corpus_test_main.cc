// Replays corpus/regressions on every backend built into this binary.

#include <iostream>

#include "gtest/gtest.h"
#include "varlen/conformance/corpus_suite.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const absl::Status registered = varlen::RegisterCorpusTests(VARLEN_CORPUS_DIR);
  if (!registered.ok()) {
    std::cerr << registered.message() << "\n";
    return 2;
  }
  return RUN_ALL_TESTS();
}
