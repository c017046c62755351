// The FlashAttention-2 forward algorithm on the CPU.
//
// FlashAttention computes what the float64 oracle computes, but the way GPU
// kernels do: for each (sequence, query head, tile of query rows) it streams
// the keys and values in tiles, keeps a running row maximum and row sum
// (online softmax) in float32, rescales the partial output whenever the
// maximum grows, and rounds the probabilities to the input dtype before they
// multiply v (as tensor-core kernels must). Products are accumulated in
// float32. It honours every stride of VarlenAttentionParams and spreads the
// work items over threads.
//
// It is the second CPU backend: CPU-only CI tests it differentially against
// the oracle, and its mutants measure the power of the conformance suite.

#ifndef VARLEN_KERNELS_CPU_FLASH_FLASH_ATTENTION_H_
#define VARLEN_KERNELS_CPU_FLASH_FLASH_ATTENTION_H_

#include "varlen/backend/params.h"

namespace varlen {

// Tile sizes, as a GPU kernel's launch configuration would fix them.
inline constexpr int kFlashTileRows = 64;  // query rows per work item
inline constexpr int kFlashTileKeys = 64;  // keys per streamed tile

// REQUIRES: CheckKernelBounds(params).ok(); input dtype float32, float16 or
// bfloat16; output dtype any floating dtype. `threads` <= 0 uses every
// hardware thread.
void FlashAttention(const VarlenAttentionParams& params, int threads = 0);

}  // namespace varlen

#endif  // VARLEN_KERNELS_CPU_FLASH_FLASH_ATTENTION_H_
