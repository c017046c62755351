// How far a correct float32 kernel strays from the float64 oracle, measured
// against the tolerance model's yardstick (numerics.h): for random small
// float32 cases, normal and with logits near 1e4, the ratio
// error / (E + noise floor) of a backend, with E taken from one emulation
// (its sums in one order), from two (opposite orders), and as the model
// takes it: the larger of two emulations and the effect of rounding each
// logit once (E_logit). The suite fails a case above 2 (the factor), the
// differential fuzz target above 4.
//
//   varlen_float32_tolerance_study [BACKEND] [CASES]     (cpu_flash, 1500)

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "varlen/backend/registry.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/executor.h"

namespace varlen {
namespace {

struct Tally {
  double worst = 0;
  int over2 = 0, over4 = 0;
  void Add(double ratio) {
    worst = std::max(worst, ratio);
    over2 += ratio > 2;
    over4 += ratio > 4;
  }
};

int Main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "cpu_flash";
  const int cases = argc > 2 ? std::atoi(argv[2]) : 1500;
  const Backend* backend = FindBackend(name);
  if (backend == nullptr || !backend->Available().ok() || cases <= 0) {
    std::fprintf(stderr, "usage: %s [BACKEND (available)] [CASES > 0]\n", argv[0]);
    return 2;
  }
  std::mt19937_64 rng(11);
  Tally one[2], two[2], logits[2];  // [normal, large logits]
  int judged[2] = {0, 0};
  for (int i = 0; i < cases; ++i) {
    const int large = i % 2;
    Case c;
    c.name = "study";
    c.source = "float32_tolerance_study";
    for (uint64_t s = 0, n = 1 + rng() % 3; s < n; ++s) {
      c.geometry.seq_lens.push_back(static_cast<int64_t>(1 + rng() % 48));
    }
    c.geometry.num_heads = c.geometry.num_kv_heads = static_cast<int64_t>(1 + rng() % 3);
    const int64_t dims[] = {8, 16, 32, 64, 128};
    c.geometry.head_dim = c.geometry.head_dim_v = dims[rng() % 5];
    c.geometry.dtype = DType::kFloat32;
    c.data.seed = rng();
    c.data.distribution = large ? Distribution::kLargeLogits : Distribution::kNormal;
    SetCorrectCall(&c, Profile::kFa3);
    CaseRunner runner(c);
    const Outcome outcome = runner.Run(*backend);
    if (!outcome.numerics.has_value()) continue;
    const Reference& r = runner.reference();
    double single = 0;  // the first emulation alone
    for (size_t j = 0; j < r.oracle.size(); ++j) {
      if (std::isfinite(r.oracle[j]) && std::isfinite(r.emulated[j])) {
        single = std::max(single, std::fabs(r.emulated[j] - r.oracle[j]));
      }
    }
    const double error = outcome.numerics->max_abs_error;
    one[large].Add(error / (single + r.noise_floor));
    two[large].Add(error / (r.emulation_error + r.noise_floor));
    logits[large].Add(error / (std::max(r.emulation_error, r.logit_rounding) + r.noise_floor));
    ++judged[large];
  }
  std::printf("| %s, float32 | cases | E from | worst ratio | cases > 2 | cases > 4 |\n",
              name.c_str());
  std::printf("|---|---|---|---|---|---|\n");
  const char* kinds[] = {"normal data", "logits near 1e4"};
  for (int large = 0; large < 2; ++large) {
    std::printf("| %s | %d | one order | %.2f | %d | %d |\n", kinds[large], judged[large],
                one[large].worst, one[large].over2, one[large].over4);
    std::printf("| %s | %d | two orders | %.2f | %d | %d |\n", kinds[large], judged[large],
                two[large].worst, two[large].over2, two[large].over4);
    std::printf("| %s | %d | two orders or logit rounding (the model) | %.2f | %d | %d |\n",
                kinds[large], judged[large], logits[large].worst, logits[large].over2,
                logits[large].over4);
  }
  return 0;
}

}  // namespace
}  // namespace varlen

int main(int argc, char** argv) { return varlen::Main(argc, argv); }
