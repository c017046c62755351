// File: varlen/cases/synth.h
// -----------------------------------------------------------------------------
//
// Data synthesis: q, k and v for a case, from its seed and distribution, or
// from the .npy files the case names (a recorded call's values).
//
// The generator is fixed here, not borrowed from a library whose algorithm
// may change between versions: SplitMix64 seeds one xoshiro256** stream per
// tensor, and every distribution is built from 53-bit uniforms with additions
// and multiplications only (the "normal" is an Irwin-Hall sum of twelve
// uniforms), so a case yields bit-identical tensors on every machine.

#ifndef VARLEN_CASES_SYNTH_H_
#define VARLEN_CASES_SYNTH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "varlen/cases/case.h"
#include "varlen/core/tensor.h"

namespace varlen {

// xoshiro256** seeded through SplitMix64.
class Prng {
 public:
  explicit Prng(uint64_t seed);
  // Inline: synthesis draws twelve per element.
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double NextUnit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

// Which tensor a stream feeds; streams are independent for one seed.
enum class SynthStream : uint64_t { kQ = 1, kK = 2, kV = 3 };

struct QkvTensors {
  // [T, H, D] (or [bsz, s, H, D] for the batched layout, [bsz, s, H * D]
  // with merged_heads; strided views of one buffer for the fused_qkv
  // layout). The values do not depend on the layout.
  Tensor q, k, v;
};

// Allocates and fills q, k and v for `c` on the cuda device tag, rounded to
// the case's dtype: its files' values once LoadCaseData read them (NaN
// everywhere before, so nothing passes by accident), else drawn from its
// seed. REQUIRES: FitsForwardBudget(c.geometry).
QkvTensors SynthesizeQkv(const Case& c);

// Reads the files `c` names (c->data.files; relative names from
// `directory`) into c->data.file_values. Each must hold its tensor's
// elements in row-major order: its shape the one the call passes, or the
// one with its heads apart ([T, H, D], [bsz, s, H, D] batched). Errors name
// `origin`, the file and the rule. A no-op for a case without files.
absl::Status LoadCaseData(Case* c, const std::string& directory, absl::string_view origin);

// c's files as absolute paths (for a process with another working folder).
QkvFiles AbsoluteDataFiles(const DataSpec& data);

// Shape-only q, k and v for resolution-only runs.
QkvTensors ShapeOnlyQkv(const Case& c);

// q, k and v with their heads apart, as the reference and the ground truth
// read them: the [bsz, s, H, D] views of merged_heads tensors; `qkv` itself
// otherwise.
QkvTensors HeadsApart(const Case& c, const QkvTensors& qkv);

}  // namespace varlen

#endif  // VARLEN_CASES_SYNTH_H_
