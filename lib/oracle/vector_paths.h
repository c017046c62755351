// The oracle's vector routines that live outside its blocked loops, by
// instruction set: the float32 emulation's exponential (ShiftedExpFloat,
// varlen/oracle/reference_attention.h) and the float32 logit-rounding
// measure. The per-head loops pick one path per run. The measure's file is
// compiled with -ffp-contract=off: its sums stay unfused, as they were.

#ifndef VARLEN_ORACLE_VECTOR_PATHS_H_
#define VARLEN_ORACLE_VECTOR_PATHS_H_

#include <cstdint>

#include "varlen/oracle/reference_attention.h"

namespace varlen::internal {

using FloatExpFn = void (*)(float* x, int64_t n, float shift);

// The path of `isa` (kBest: AVX-512 where the CPU runs it, else AVX2 with
// FMA, else the baseline). REQUIRES: OracleIsaRuns(isa).
FloatExpFn PickShiftedExpFloat(OracleIsa isa);

// For one query row: the largest over its output columns of
// sum_c p_c |v_cj - o_j| size_c, where p (unnormalized, divided by
// `denominator`) are its probabilities, size_c = |scale| sum_i |q_i k_ci|
// its logits' absolute sums (`abs_scores`, unscaled), o its output (`out`,
// undivided) and v packed in panels of 8 columns [dv / 8][keys][8].
// Non-finite columns do not count: the judge sees those by kind.
using SpreadFn = double (*)(const double* probabilities, const double* abs_scores, double scale,
                            double denominator, const double* v_panels, const double* out,
                            int64_t keys, int64_t dv);

// As PickShiftedExpFloat.
SpreadFn PickLogitSpread(OracleIsa isa);

}  // namespace varlen::internal

#endif  // VARLEN_ORACLE_VECTOR_PATHS_H_
