// What each engine adds to the fuzz decoder, in a file of its own
// (fuzz/engines/<engine>.cc): how its call is read from the bytes, how a
// decoded call is blended with the engine's correct call, and the plainest
// entry a case falls back to when the case format refuses the decoded one.
// The decoder asks DecoderOf(engine) instead of switching on it; the
// choices every engine shares (Python values of every kind, SGLang's
// metadata, which the other engines must refuse) live in DecodeContext.

#ifndef VARLEN_FUZZ_ENGINE_DECODERS_H_
#define VARLEN_FUZZ_ENGINE_DECODERS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "case_decoder.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "varlen/cases/case.h"

namespace varlen::internal {

// FuzzedDataProvider that notes which bytes each choice took: every value
// the decoder reads comes from the end of the input, so a choice owns one
// contiguous span.
class ChoiceReader {
 public:
  ChoiceReader(absl::Span<const uint8_t> bytes, std::vector<ChoiceSpan>* spans)
      : in_(bytes.data(), bytes.size()), spans_(spans) {}

  bool ConsumeBool() {
    return Noted([&] { return in_.ConsumeBool(); });
  }
  template <typename T>
  T ConsumeIntegral() {
    return Noted([&] { return in_.ConsumeIntegral<T>(); });
  }
  template <typename T>
  T ConsumeIntegralInRange(T min, T max) {
    return Noted([&] { return in_.ConsumeIntegralInRange<T>(min, max); });
  }
  template <typename T>
  T ConsumeFloatingPointInRange(T min, T max) {
    return Noted([&] { return in_.ConsumeFloatingPointInRange<T>(min, max); });
  }

 private:
  template <typename Read>
  std::invoke_result_t<Read> Noted(Read read) {
    const size_t before = in_.remaining_bytes();
    auto value = read();
    if (spans_ != nullptr && in_.remaining_bytes() < before) {
      spans_->push_back({in_.remaining_bytes(), before});
    }
    return value;
  }

  FuzzedDataProvider in_;
  std::vector<ChoiceSpan>* spans_;
};

// The bytes being decoded, what the decoded geometry makes plausible (its
// offsets, its longest sequence, its per-token width), and the values every
// engine's arguments are drawn from.
class DecodeContext : public ChoiceReader {
 public:
  DecodeContext(absl::Span<const uint8_t> bytes, const DecodeLimits& limits,
                std::vector<ChoiceSpan>* spans)
      : ChoiceReader(bytes, spans), limits_(limits) {}

  const DecodeLimits& limits() const { return limits_; }
  void set_limits(const DecodeLimits& limits) { limits_ = limits; }

  // Sets what the values below take as plausible from `g`.
  void SetGeometry(const Geometry& g);
  const std::vector<int64_t>& offsets() const { return offsets_; }
  int64_t longest() const { return longest_; }
  int64_t width() const { return width_; }  // heads times head dim

  // Any Python value a caller might pass, biased toward the plausible ones
  // (lists nest up to `depth`).
  ArgLiteral Arg(int depth);
  // The true maximum, an offset, or a value at an integer edge.
  int64_t Int();
  // Special floats from their bit patterns, or the true maximum spelt as a
  // float (integral or not).
  double Float();
  double FiniteFloat();
  // What int() may be handed as text.
  std::string Str();
  // A tensor of the offsets (right, with one entry off, or one value) in
  // every dtype, device, shape and contiguity a caller might pass.
  TensorLiteral TensorValue();
  // SGLang's forward metadata, made by its builders or by hand.
  MetadataSpec Metadata();

  template <typename T>
  T PickOne(std::initializer_list<T> values) {
    return *(values.begin() + ConsumeIntegralInRange<size_t>(0, values.size() - 1));
  }

 private:
  std::string RandomText();

  DecodeLimits limits_;
  std::vector<int64_t> offsets_;
  int64_t longest_ = 0;
  int64_t width_ = 0;
};

struct EngineDecoder {
  // c's call for `profile` (and c's version, or c's value head dim where
  // the engine's entry constrains it), read from the bytes.
  void (*decode_call)(DecodeContext& in, Profile profile, Case* c);
  // c's call made the engine's correct call with `taken` (1 to 3) of the
  // decoded call's arguments, or a max off the truth by at most two.
  void (*blend_with_correct_call)(DecodeContext& in, Case* c, int taken);
  // c's call through the engine's plainest entry: the last form a case the
  // format refuses is decoded as.
  void (*to_plainest_entry)(Case* c);
};

// The one switch on the engine; each engine's table in its own file.
const EngineDecoder& DecoderOf(Engine engine);
const EngineDecoder& SglangDecoder();
const EngineDecoder& VllmDecoder();
const EngineDecoder& TransformersDecoder();

}  // namespace varlen::internal

#endif  // VARLEN_FUZZ_ENGINE_DECODERS_H_
