// The fuzz targets' one byte decoder: libFuzzer bytes -> a Case.
//
// Every input decodes (bytes that run out read as zeros), so the fuzzer
// spends its time on the contract rather than on parsing. The decoder covers
// every field the contract reads, for every modelled engine (the engine is
// drawn first, so each gets an even share of the inputs): profile, entry,
// mode, engine version, graph mode, layout, and every argument form (absent,
// None, bool, int, float, str, list, host or device tensors of each dtype
// and shape, SingletonCache, output workspaces, SGLang's builder-made and
// hand-built metadata, vLLM's encoder metadata builders), with special
// values taken from raw bits (NaN, +-Inf, -0.0, subnormals, int64 extremes,
// int32 wrap points, Unicode digits and spaces in strings), rows past the
// last sequence, and the platform.
//
// `varlen decode --target=NAME FILE` prints what a target decodes from FILE
// as a case file, ready for corpus/regressions/.

#ifndef VARLEN_FUZZ_CASE_DECODER_H_
#define VARLEN_FUZZ_CASE_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/cases/case.h"

namespace varlen {

// The geometry a target decodes: small enough to run forward in
// microseconds where the target runs kernels.
struct DecodeLimits {
  int max_sequences = 6;
  int64_t max_len = 24;
  int64_t max_kv_heads = 2;
  int64_t max_heads = 8;  // query heads: max_kv_heads times a GQA ratio of 1, 2 or 4
  int64_t max_head_dim = 16;
  // When positive, one input in four decodes a long, thin geometry instead:
  // up to two sequences of up to `long_len` tokens, one KV head, head dim up
  // to 16. Kernels stream keys in tiles (cpu_flash: 64), and only sequences
  // past a tile reach the code that joins tiles, within the same budget.
  int64_t long_len = 0;
  // Whether a platform is drawn: the contract's rules read it, while a
  // correct call on a platform that refuses its backend is no numerical
  // finding.
  bool draws_platform = true;
};

// Decodes `bytes` into a case that passes ValidateCase. The rare
// combination the case format refuses (a layout its profile cannot take)
// is decoded again as a packed layout; an error is returned only when that
// is refused too.
absl::StatusOr<Case> DecodeCase(absl::Span<const uint8_t> bytes, const DecodeLimits& limits = {});

// Where each choice the decoder makes reads its bytes: [begin, end) offsets
// into `bytes`, in decoding order (bytes past the end read as zeros and own
// no span). Rewriting one span changes one field of the decoded case and
// leaves the others as they were, as far as the structure allows (a new
// sequence count gives the later choices other meanings).
struct ChoiceSpan {
  size_t begin = 0;
  size_t end = 0;
};
std::vector<ChoiceSpan> DecodeChoiceSpans(absl::Span<const uint8_t> bytes,
                                          const DecodeLimits& limits = {});

// The targets that decode their input with DecodeCase, and their limits.
std::vector<std::string> DecodingTargets();
absl::StatusOr<DecodeLimits> DecodeLimitsFor(absl::string_view target);

}  // namespace varlen

#endif  // VARLEN_FUZZ_CASE_DECODER_H_
