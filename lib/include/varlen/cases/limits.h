// File: varlen/cases/limits.h
// -----------------------------------------------------------------------------
//
// The bounds a case must respect, and the CPU budget that decides whether a
// case runs forward (resolution, kernel, numerical judgement) or resolution
// only. The overflow rules need geometries of millions of tokens: those
// resolve against shape-only tensors and never allocate.

#ifndef VARLEN_CASES_LIMITS_H_
#define VARLEN_CASES_LIMITS_H_

#include <cstdint>

#include "varlen/cases/case.h"

namespace varlen {

inline constexpr int64_t kMaxSequences = 1'000'000;
inline constexpr int64_t kMaxTotalTokens = 2'147'483'647;  // int32 token offsets
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 512;
inline constexpr int64_t kMaxLiteralValues = 1'000'000;  // per tensor literal
inline constexpr int64_t kMaxCaseFileBytes = 64 << 20;
inline constexpr int kMaxJsonDepth = 32;  // nesting of objects and arrays

// A forward run costs about three attention passes (oracle, same-precision
// emulation, backend). Above either budget a case runs resolution only. One
// sequence of 16,384 tokens at head dim 1 fits: the lengths vision
// encoders use, at a cost the CPU oracle pays in about a second.
inline constexpr int64_t kForwardBudgetMacs = 600'000'000;     // per pass
inline constexpr int64_t kForwardBudgetElements = 50'000'000;  // q, k, v, o

struct ForwardBudget {
  int64_t macs = kForwardBudgetMacs;
  int64_t elements = kForwardBudgetElements;
};

// Multiply-adds of one attention pass over `g`: sum of len^2 * H * (D + Dv).
int64_t AttentionMacs(const Geometry& g);
// Elements of q, k, v and o together.
int64_t TensorElements(const Geometry& g);
bool FitsForwardBudget(const Geometry& g, const ForwardBudget& budget = {});

// With a GPU (a CUDA build on a machine with a device) the oracle and the
// emulation run there, and geometries beyond the CPU budget run forward up
// to this one: vision batches of tens of thousands of tokens per image.
inline constexpr ForwardBudget kGpuForwardBudget{.macs = 20'000'000'000'000,
                                                 .elements = 2'000'000'000};

}  // namespace varlen

#endif  // VARLEN_CASES_LIMITS_H_
