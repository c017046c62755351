// libFuzzer's own cost: a target that does nothing. Its exec/s, measured
// beside the real targets with the same compiler, sanitizers and machine
// (scripts/fuzz-rates), is the ceiling any target can reach.

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }
