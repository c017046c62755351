// The FlashAttention-2 forward algorithm on the CPU.
//
// FlashAttention computes what the float64 oracle computes, but the way GPU
// kernels do: for each (sequence, query head, tile of query rows) it streams
// the keys and values in tiles, keeps a running row maximum and row sum
// (online softmax) in float32, rescales the partial output whenever the
// maximum grows, and rounds the probabilities to the input dtype before they
// multiply v (as tensor-core kernels must). Both products run in float32
// register tiles (4 rows x 16 columns), in AVX2 with fused multiply-adds where
// the CPU has them, as a GPU's float32 units fuse. It honours every stride of
// VarlenAttentionParams and spreads the work items over threads.
//
// It is the second CPU backend: CPU-only CI tests it differentially against
// the oracle, and its mutants measure the power of the conformance suite.

#ifndef VARLEN_KERNELS_CPU_FLASH_FLASH_ATTENTION_H_
#define VARLEN_KERNELS_CPU_FLASH_FLASH_ATTENTION_H_

#include "varlen/backend/backend.h"
#include "varlen/backend/params.h"

namespace varlen {

// Tile sizes, as a GPU kernel's launch configuration would fix them.
inline constexpr int kFlashTileRows = 64;  // query rows per work item
inline constexpr int kFlashTileKeys = 64;  // keys per streamed tile

// Deliberate bugs, each a realistic one from the bug classes of attention
// kernels, switched on one at a time (mutant schemata: the mutants are this
// kernel, so they follow it). The conformance suite's test power is the
// share of them it kills; kNone is the correct kernel.
enum class FlashBug {
  kNone,
  kDropsLastKeyOfPartialTile,    // `< keys - 1` in the remainder tile
  kSkipsLastRowOfPartialTile,    // the last query row of a partial tile is never written
  kCompactsEmptySequences,       // work items number non-empty sequences, offsets use that number
  kReadsOneKeyPastTheSequence,   // keys [0, n] instead of [0, n)
  kStaleKeyOffsets,              // every sequence reads keys at sequence 0's offsets
  kQueryOffsetsForKeys,          // k and v addressed with q's per-sequence offsets
  kScaleFromValueHeadDim,        // 1/sqrt(head_dim_v) instead of the given scale
  kScaleInInputDType,            // the scale rounded to the input dtype
  kNoMaxSubtraction,             // exp(s) without the running maximum
  kKeysCappedAt128,              // a kernel compiled for max_seqlen 128
  kGqaHeadModulo,                // kv_head = h % kv_heads instead of h / group
  kAssumesValueHeadDimEqualsQk,  // the output loop runs over min(head_dim, head_dim_v)
  kIgnoresStrides,               // q, k and v read as dense [T, H, D]
  kRoundsOutputTowardZero,       // output truncated instead of rounded to nearest
  kAccumulatesInHalf,            // P*V accumulated in float16
  kScoresInInputDType,           // S = QK^T rounded to the input dtype before softmax
  kNoAccumulatorRescale,         // acc not rescaled when the maximum grows
  kNoRowSumRescale,              // the row sum not rescaled when the maximum grows
  kTileMaxNotRunningMax,         // the new maximum is the tile's, not the running one
  kFirstKeyTileOnly,             // stops after the first tile of keys
  kDropsLastSequence,            // no work items for the last sequence
  kCausalMask,                   // a causal mask applied to non-causal attention
  kExp2WithoutLog2e,             // exp2(s - m) without the log2(e) factor
  kNanToZero,                    // NaN outputs replaced by 0 in the epilogue
  // Bugs that only show past a length (the lengths vision encoders use):
  kKeysCappedAt1024,            // a key loop bounded by a compiled 1,024 (a shared-memory K cache)
  kSplitKvMergeWithoutRescale,  // past 2,048 keys, 1,024-key splits whose partial results are
                                // summed without rescaling to the common maximum
  kRowsCappedAt4096,            // a launch grid of at most 64 row blocks: rows past 4,096 unwritten
  // Bugs of the attention variants (a window, sinks):
  kIgnoresWindow,          // full attention whatever the window
  kWindowRightExclusive,   // the window's right bound read as exclusive (one key short)
  kIgnoresSinks,           // the sinks left out of the denominator
  kKeyOffsetsFromLengths,  // keys found by summing the lengths before (cu_seqlens_k rebuilt from
                           // seqused_k): rows in no sequence assumed away
};

// Where the length mutants change behaviour.
inline constexpr int64_t kMutantKeyCap = 1024;
inline constexpr int64_t kMutantSplitKeys = 1024;  // split size, past 2 splits
inline constexpr int64_t kMutantRowCap = 4096;

// What the kernel runs: float32, float16 and bfloat16 inputs, head dims up
// to 512, GQA, a distinct value head dim, strided inputs, windows and sinks. The cpu_flash
// backend and its mutants declare it.
BackendCapabilities FlashCapabilities();

// REQUIRES: CheckKernelBounds(params).ok(); input dtype float32, float16 or
// bfloat16; output dtype any floating dtype. `threads` <= 0 uses every
// hardware thread.
void FlashAttention(const VarlenAttentionParams& params, int threads = 0,
                    FlashBug bug = FlashBug::kNone);

}  // namespace varlen

#endif  // VARLEN_KERNELS_CPU_FLASH_FLASH_ATTENTION_H_
