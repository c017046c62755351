// File: varlen/conformance/generators.h
// -----------------------------------------------------------------------------
//
// RapidCheck generators for the harness's inputs, with shrinking built in:
// a failing property shrinks toward fewer and shorter sequences, fewer heads
// and smaller head dims.
//
//   GenSeqLens      per-sequence token counts, zeros included
//   GenGeometry     a ground-truth geometry small enough to run on a CPU
//   GenCase         a valid Case of any profile, mode, SGLang version, entry,
//                   layout and argument forms (for format and robustness
//                   properties)
//   GenForwardCase  a correct call that must succeed and run forward: a
//                   geometry weighted toward the values kernels get wrong
//                   (tile edges, batch buckets, GQA ratios, odd head dims),
//                   every data distribution, dense and fused-qkv layouts,
//                   within a backend's capabilities and a compute budget
//   GenLongForwardCase the same, with one or a few sequences of the lengths
//                   vision encoders use (thousands of patches), at small
//                   heads x head dims so the float64 oracle stays cheap
//
// Example:
//   RC_GTEST_PROP(MySuite, Holds, ()) {
//     const varlen::Geometry g = *varlen::GenGeometry();
//     ...
//   }

#ifndef VARLEN_CONFORMANCE_GENERATORS_H_
#define VARLEN_CONFORMANCE_GENERATORS_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "rapidcheck.h"
#include "varlen/backend/backend.h"
#include "varlen/cases/case.h"
#include "varlen/cases/correct_call.h"  // SetCorrectCall, OffsetsOf

namespace varlen {

struct GeometryLimits {
  int max_sequences = 6;
  int64_t max_len = 40;
  int max_heads = 4;
  int max_head_dim = 16;
  bool allow_zero_lengths = true;
  // Also draw the head sizes kernels decide on: real towers' (64 to 128),
  // others off the multiples of 8, and past 256 (the engine differentials).
  bool kernel_head_dims = false;
};

// At least one sequence; lengths in [0, max_len] (no zeros unless allowed).
rc::Gen<std::vector<int64_t>> GenSeqLens(const GeometryLimits& limits = {});

rc::Gen<Geometry> GenGeometry(const GeometryLimits& limits = {});

// Any valid case (ValidateCase passes), geometry within `limits`.
rc::Gen<Case> GenCase(const GeometryLimits& limits = {});
// The same draws with the profile fixed (the call then made one of that
// profile's engine: a vLLM profile gets vLLM's one entry and argument forms).
rc::Gen<Case> GenCaseFor(Profile profile, const GeometryLimits& limits = {});

struct ForwardLimits {
  int64_t max_macs = 2'000'000;  // of one attention pass (AttentionMacs)
  int max_sequences = 70;
  int64_t max_len = 129;
  std::vector<Distribution> excluded_distributions;  // never drawn
};

// Sequence lengths weighted toward special values: one sequence, a few of
// lengths around the tile sizes 64 and 128, many tiny ones around the batch
// buckets 8/16/32/64, zero-length ones. Shrinks toward fewer, shorter.
rc::Gen<std::vector<int64_t>> GenSpecialSeqLens(const ForwardLimits& limits = {});

// A case whose arguments are correct for its profile, mode and version, so
// it must succeed with output equal to the reference. Only what `caps`
// declares is generated (dtypes, GQA, value head dim, strided inputs,
// profiles, head dim, tokens, sequences).
rc::Gen<Case> GenForwardCase(const BackendCapabilities& caps, const ForwardLimits& limits = {});

// Long sequences: where kernels change code paths with length (split-KV
// heuristics, tile counts at shared-memory or register limits,
// flashinfer_cudnn's max_seqlen buckets, the size of a launch grid).
struct LongLimits {
  int64_t min_len = 1000;  // of the long sequences
  int64_t max_len = 5000;
  int64_t max_macs = 100'000'000;                    // of one attention pass
  std::vector<Distribution> excluded_distributions;  // never drawn
};

// One long sequence alone, two or three of them, or one among many short
// and empty ones. Long lengths are weighted toward multiples of the tile
// sizes 64 and 128 +-1, powers of two +-1, flashinfer_cudnn's max_seqlen
// buckets +-1 (4096 ... 131072) and max_len itself, inside [min_len,
// max_len]; they shrink toward min_len.
rc::Gen<std::vector<int64_t>> GenLongSeqLens(const LongLimits& limits = {});

// A correct call, as GenForwardCase makes, on GenLongSeqLens lengths: at
// most two query heads over one KV head, head dims shrunk (down to 1) until
// the case fits limits.max_macs, so the lengths stay long.
rc::Gen<Case> GenLongForwardCase(const BackendCapabilities& caps, const LongLimits& limits = {});

// Shrinks `g` until one attention pass fits `max_macs`: first to at most two
// KV heads (same GQA ratio), then the head dims (down to min_head_dim), then
// the longest sequences. Deterministic, so a shrunk case stays under the
// budget.
void FitBudget(Geometry* g, int64_t max_macs, int64_t min_head_dim = 16);
// The same by halving the longest sequences alone: heads and head dims stay.
void FitBudgetByLengths(Geometry* g, int64_t max_macs);

// How RapidCheck prints counterexamples.
void showValue(const Geometry& g, std::ostream& os);
void showValue(const Case& c, std::ostream& os);

}  // namespace varlen

#endif  // VARLEN_CONFORMANCE_GENERATORS_H_
