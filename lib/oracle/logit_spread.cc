// The float32 logit-rounding measure (vector_paths.h), a panel's columns in
// vectors: the compiler had made scalar code of the loop over them.

#include <algorithm>
#include <cmath>
#include <limits>

#include "vector_paths.h"

namespace varlen::internal {
namespace {

// Vectors of `Bytes` bytes of T (GCC drops vector_size from a typedef whose
// element type does not depend on the template).
template <typename T, int Bytes>
struct Vectors {
  typedef T Vec __attribute__((vector_size(Bytes)));
  typedef T Unaligned __attribute__((vector_size(Bytes), aligned(alignof(T)), may_alias));
};

template <int Bytes>
[[gnu::always_inline]] inline double SpreadLanes(const double* probabilities,
                                                 const double* abs_scores, double scale,
                                                 double denominator, const double* v_panels,
                                                 const double* out, int64_t keys, int64_t dv) {
  using Vec = typename Vectors<double, Bytes>::Vec;
  using UnalignedVec = typename Vectors<double, Bytes>::Unaligned;
  using Bits = typename Vectors<int64_t, Bytes>::Vec;
  constexpr int64_t kWidth = 8;  // a panel: 64 bytes of double
  constexpr int kLanes = Bytes / sizeof(double), kVecs = kWidth / kLanes;
  const double weight_scale = std::fabs(scale) / denominator;
  Bits magnitude_bits;  // all but the sign bit
  for (int lane = 0; lane < kLanes; ++lane) {
    magnitude_bits[lane] = std::numeric_limits<int64_t>::max();
  }
  double worst = 0;
  for (int64_t j0 = 0; j0 < dv; j0 += kWidth) {
    Vec o[kVecs], spread[kVecs] = {};
    for (int v = 0; v < kVecs; ++v) {
      o[v] = *reinterpret_cast<const UnalignedVec*>(out + j0 + v * kLanes) / denominator;
    }
    const double* panel = v_panels + j0 * keys;
    for (int64_t c = 0; c < keys; ++c) {
      const double weight = weight_scale * probabilities[c] * abs_scores[c];
      for (int v = 0; v < kVecs; ++v) {
        const Vec difference =
            *reinterpret_cast<const UnalignedVec*>(panel + c * kWidth + v * kLanes) - o[v];
        // A product and a sum, never fused (-ffp-contract=off).
        const Vec term =
            weight * reinterpret_cast<Vec>(reinterpret_cast<Bits>(difference) & magnitude_bits);
        spread[v] += term;
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      for (int lane = 0; lane < kLanes && j0 + v * kLanes + lane < dv; ++lane) {
        if (std::isfinite(spread[v][lane])) worst = std::max(worst, spread[v][lane]);
      }
    }
  }
  return worst;
}

double SpreadBaseline(const double* probabilities, const double* abs_scores, double scale,
                      double denominator, const double* v_panels, const double* out, int64_t keys,
                      int64_t dv) {
  return SpreadLanes<16>(probabilities, abs_scores, scale, denominator, v_panels, out, keys, dv);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] double SpreadAvx2(const double* probabilities, const double* abs_scores,
                                              double scale, double denominator,
                                              const double* v_panels, const double* out,
                                              int64_t keys, int64_t dv) {
  return SpreadLanes<32>(probabilities, abs_scores, scale, denominator, v_panels, out, keys, dv);
}

[[gnu::target("avx512f,avx512vl,avx512dq,avx2,fma")]] double SpreadAvx512(
    const double* probabilities, const double* abs_scores, double scale, double denominator,
    const double* v_panels, const double* out, int64_t keys, int64_t dv) {
  return SpreadLanes<64>(probabilities, abs_scores, scale, denominator, v_panels, out, keys, dv);
}
#endif

}  // namespace

SpreadFn PickLogitSpread(OracleIsa isa) {
  if (isa == OracleIsa::kBest) {
    isa = OracleIsaRuns(OracleIsa::kAvx512) ? OracleIsa::kAvx512
          : OracleIsaRuns(OracleIsa::kAvx2) ? OracleIsa::kAvx2
                                            : OracleIsa::kBaseline;
  }
  switch (isa) {
#if defined(__x86_64__)
    case OracleIsa::kAvx512:
      return &SpreadAvx512;
    case OracleIsa::kAvx2:
      return &SpreadAvx2;
#endif
    default:
      return &SpreadBaseline;
  }
}

}  // namespace varlen::internal
