// Fuzz target: a small decoded geometry and data (up to 64 tokens, 4 heads,
// head dim 128; or one in four long and thin, up to two sequences of 160
// tokens past the kernels' key tiles), called correctly (correct_call.h), through every available
// backend and judged against the float64 reference by the tolerance model.
// For every input and backend:
//
//   * a case inside the backend's capabilities succeeds: a correct call is
//     never refused;
//   * its output matches the reference (no silent corruption, NaN and Inf
//     exactly where the reference has them, every element written);
//   * never a crash or undefined behaviour.
//
// The call is the correct one, so what this target finds is the kernel's
// doing; the contract target fuzzes the arguments.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "case_decoder.h"
#include "fuzzed_backends.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/executor.h"
#include "violation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const varlen::DecodeLimits limits = *varlen::DecodeLimitsFor("differential");
  absl::StatusOr<varlen::Case> decoded = varlen::DecodeCase({data, size}, limits);
  if (!decoded.ok()) return 0;
  varlen::Case& wild = *decoded;
  // A correct scale is one a float32 kernel can take and keep every logit
  // inside float32 with: others are the hardened check's business (it
  // refuses a nonzero scale outside float32's normal range), not a kernel's.
  if (wild.geometry.softmax_scale.has_value()) {
    const double magnitude = std::abs(*wild.geometry.softmax_scale);
    if (magnitude > 1e4 || (magnitude != 0 && magnitude < std::numeric_limits<float>::min())) {
      wild.geometry.softmax_scale.reset();
    }
  }

  varlen::RunOptions options;
  options.budget = {.macs = 4'000'000, .elements = 200'000};
  // A fuzzer is an optimizer: against the suite's statistical bound (2 x the
  // emulation's error) it finds the rare honest case beyond it, such as a
  // 6-token float32 case at 2.7 x. A wrong sequence, a misplaced NaN or an
  // unwritten element is far beyond either factor (docs/conformance.md).
  options.tolerance.factor = 4.0;
  // Backends given the same call share a runner: one oracle, one emulation.
  std::vector<std::unique_ptr<varlen::CaseRunner>> runners;
  static const std::vector<const varlen::Backend*> backends = varlen::FuzzedBackends();
  for (const varlen::Backend* backend : backends) {
    // The decoded profile when the backend consumes it and it can carry
    // the geometry, else the first that does.
    std::vector<varlen::Profile> profiles = backend->capabilities().profiles;
    if (profiles.empty())
      profiles.assign(varlen::AllProfiles().begin(), varlen::AllProfiles().end());
    std::erase_if(profiles,
                  [&](varlen::Profile p) { return !varlen::ProfileCanCarry(p, wild.geometry); });
    if (profiles.empty()) continue;
    const varlen::Profile profile =
        std::find(profiles.begin(), profiles.end(), wild.call.profile) != profiles.end()
            ? wild.call.profile
            : profiles.front();

    varlen::Case c = wild;
    // The latest, whichever engine the profile is: older versions' modelled
    // bugs corrupt even correct calls.
    c.version.reset();
    // The layer passes its own scale; a custom one goes in a direct call.
    const bool layer = wild.call.entry == varlen::Entry::kLayer &&
                       !wild.geometry.softmax_scale.has_value() && wild.geometry.total_tokens() > 0;
    const bool prepared =
        wild.call.forward_metadata.has_value() || wild.call.vllm_metadata.has_value();
    varlen::SetCorrectCall(&c, profile, prepared,
                           layer ? varlen::Entry::kLayer : varlen::Entry::kDirect);
    const bool fused = wild.call.layout == varlen::QLayout::kFusedQkv ||
                       wild.call.layout == varlen::QLayout::kBatchedFusedQkv;
    if (fused && backend->capabilities().strided_inputs &&
        varlen::ProfileTakesFusedQkv(profile, wild.geometry)) {
      c.call.layout = varlen::FusedQkvLayout(profile);
    }
    auto same = std::find_if(runners.begin(), runners.end(),
                             [&](const auto& runner) { return runner->test_case() == c; });
    varlen::CaseRunner& runner =
        same != runners.end()
            ? **same
            : *runners.emplace_back(std::make_unique<varlen::CaseRunner>(c, options));
    const varlen::Outcome outcome = runner.Run(*backend);
    if (outcome.observed == varlen::Observed::kUnsupported) continue;
    if (outcome.observed == varlen::Observed::kCorruption) {
      // Every element written and finite where the reference is, only
      // beyond the bound: named by dtype, since how far a correct kernel
      // may stray is the tolerance model's question (docs/conformance.md).
      const auto& n = outcome.numerics;
      const bool only_beyond_bound = outcome.kernel_fault.ok() && n.has_value() &&
                                     n->unwritten == 0 && n->non_finite == 0 &&
                                     n->lost_non_finite == 0;
      varlen::ReportViolation(
          only_beyond_bound
              ? "differential-beyond-tolerance-" + std::string(varlen::DTypeName(c.geometry.dtype))
              : std::string("differential-wrong-output"),
          "a correct call returned an output that does not match the float64 reference", c,
          &outcome);
    }
    if (outcome.observed != varlen::Observed::kSuccess) {
      varlen::ReportViolation("differential-correct-call-refused",
                              "a correct call inside the backend's capabilities failed", c,
                              &outcome);
    }
  }
  return 0;
}
