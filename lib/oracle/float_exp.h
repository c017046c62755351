// The float32 emulation's exponential by instruction set (ShiftedExpFloat,
// varlen/oracle/reference_attention.h), for the oracle's per-head loops,
// which pick one path per run.

#ifndef VARLEN_ORACLE_FLOAT_EXP_H_
#define VARLEN_ORACLE_FLOAT_EXP_H_

#include <cstdint>

#include "varlen/oracle/reference_attention.h"

namespace varlen::internal {

using FloatExpFn = void (*)(float* x, int64_t n, float shift);

// The path of `isa` (kBest: AVX-512 where the CPU runs it, else AVX2 with
// FMA, else the baseline). REQUIRES: OracleIsaRuns(isa).
FloatExpFn PickShiftedExpFloat(OracleIsa isa);

}  // namespace varlen::internal

#endif  // VARLEN_ORACLE_FLOAT_EXP_H_
