// A structure-aware mutator for the targets that decode their input
// (case_decoder.h), linked into their libFuzzer binaries only. Byte-level
// mutations of a decoded input mostly shift every later choice at once; this
// one rewrites the bytes of one choice (one field of the case: a length, a
// profile, one argument's form or value) and leaves the others as they were.
// A quarter of the time it defers to libFuzzer's own mutations, and when the
// input is too short for every choice to own bytes it grows it at the front,
// which gives the choices that read zeros bytes of their own.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "case_decoder.h"

// The target this binary is: set by the build (fuzz/CMakeLists.txt).
#ifndef VARLEN_FUZZ_TARGET_NAME
#error "VARLEN_FUZZ_TARGET_NAME must name a decoding target"
#endif

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  static const varlen::DecodeLimits limits = *varlen::DecodeLimitsFor(VARLEN_FUZZ_TARGET_NAME);
  std::minstd_rand random(seed);
  if (size == 0 || random() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);

  const std::vector<varlen::ChoiceSpan> spans = varlen::DecodeChoiceSpans({data, size}, limits);
  // Every byte was read: later choices read zeros. Grow at the front (the
  // decoder reads from the end, so the choices that own bytes keep them).
  const bool exhausted = !spans.empty() && spans.back().begin == 0;
  if ((spans.empty() || exhausted) && size < max_size && random() % 2 == 0) {
    const size_t grown = std::min(max_size, size + 1 + random() % 16);
    std::memmove(data + (grown - size), data, size);
    for (size_t i = 0; i < grown - size; ++i) data[i] = static_cast<uint8_t>(random());
    return grown;
  }
  if (spans.empty()) return LLVMFuzzerMutate(data, size, max_size);

  const varlen::ChoiceSpan& choice = spans[random() % spans.size()];
  for (size_t i = choice.begin; i < choice.end; ++i) data[i] = static_cast<uint8_t>(random());
  return size;
}
