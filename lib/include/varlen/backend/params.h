// File: varlen/backend/params.h
// -----------------------------------------------------------------------------
//
// VarlenAttentionParams is the one contract between the harness and every
// attention kernel: plain pointers, element strides, per-sequence offsets and
// lengths. A kernel reads nothing else, so a backend never re-validates and
// never sees a Python-level argument.
//
// SequenceAt() is the varlen offset math, written once: where sequence b's
// rows start in q, k, v and o, and how many query rows and keys the kernel
// touches. Every kernel (the float64 reference included) uses it, and
// CheckKernelBounds() proves with the same math that no access leaves its
// buffer before a kernel runs.
//
// Offsets are in elements, not tokens: that is how cuDNN's ragged offsets
// work, and it lets a wrong elements-per-token reach the kernel exactly as it
// would on a GPU (misaligned rows, not a refused call).

#ifndef VARLEN_BACKEND_PARAMS_H_
#define VARLEN_BACKEND_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "varlen/core/dtype.h"

// SequenceAt and KvHeadFor also run inside CUDA kernels (kernels/cuda).
#if defined(__CUDACC__)
#define VARLEN_HOST_DEVICE __host__ __device__
#else
#define VARLEN_HOST_DEVICE
#endif

namespace varlen {

struct VarlenAttentionParams {
  // Packed row-major tensors [tokens, heads, head_dim]; strides in elements.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  DType input_dtype = DType::kBFloat16;                        // q, k and v
  DType output_dtype = DType::kBFloat16;                       // o (float64 for the oracle)
  int64_t q_numel = 0, k_numel = 0, v_numel = 0, o_numel = 0;  // buffer extents
  int64_t q_token_stride = 0, q_head_stride = 0;
  int64_t k_token_stride = 0, k_head_stride = 0;
  int64_t v_token_stride = 0, v_head_stride = 0;
  int64_t o_token_stride = 0, o_head_stride = 0;

  int num_heads_q = 0;
  int num_heads_kv = 0;  // divides num_heads_q (GQA)
  int head_dim_qk = 0;
  int head_dim_v = 0;
  double softmax_scale = 0.0;

  // One entry per sequence (padded sequences have length 0). Element offset
  // of each sequence's first token in q, k, v and o.
  int batch = 0;
  const int64_t* q_start = nullptr;
  const int64_t* k_start = nullptr;
  const int64_t* v_start = nullptr;
  const int64_t* o_start = nullptr;
  const int64_t* seqlen_q = nullptr;
  const int64_t* seqlen_k = nullptr;
  // The kernel computes rows [0, min(seqlen_q, max_rows_q)) and reads keys
  // [0, min(seqlen_k, max_keys)) of each sequence: how launch grids sized
  // from max_seqlen truncate a sequence that is longer than promised.
  int64_t max_rows_q = 0;
  int64_t max_keys = 0;

  // The attention variant (varlen/contract/variant.h): row i of sequence b
  // attends key j when i + shift - window_left <= j <= i + shift +
  // window_right, shift = seqlen_k[b] - seqlen_q[b], a negative bound being
  // none. `sinks`, when set, holds one logit per query head that joins each
  // row's softmax denominator. KeysOfRow() is this rule, written once.
  int64_t window_left = -1;
  int64_t window_right = -1;
  const float* sinks = nullptr;
};

// Where one sequence lives and how much of it a kernel touches.
struct SequenceView {
  int64_t q_offset, k_offset, v_offset, o_offset;  // elements
  int64_t rows;                                    // query rows computed (and output rows written)
  int64_t keys;                                    // keys attended to
};

// A tensor the sequence does not touch (q and o without rows, k and v
// without keys) gets offset 0: the bounds check never validated its offset,
// so no kernel may compute an address from it.
VARLEN_HOST_DEVICE inline SequenceView SequenceAt(const VarlenAttentionParams& p, int b) {
  const auto clamp = [](int64_t length, int64_t bound) -> int64_t {
    const int64_t n = length < bound ? length : bound;
    return n > 0 ? n : 0;
  };
  const int64_t rows = clamp(p.seqlen_q[b], p.max_rows_q);
  const int64_t keys = clamp(p.seqlen_k[b], p.max_keys);
  return {rows > 0 ? p.q_start[b] : 0,
          keys > 0 ? p.k_start[b] : 0,
          keys > 0 ? p.v_start[b] : 0,
          rows > 0 ? p.o_start[b] : 0,
          rows,
          keys};
}

// The keys [first, last) row `row` of sequence b attends to (of the view's
// keys), under the window; first >= last when it attends none.
struct KeyRange {
  int64_t first, last;
};
VARLEN_HOST_DEVICE inline KeyRange KeysOfRow(const VarlenAttentionParams& p, int b,
                                             const SequenceView& s, int64_t row) {
  KeyRange range{0, s.keys};
  if (s.keys == 0) return range;
  // Both lengths are positive here (the view has rows and keys), and row <
  // seqlen_q: no step overflows, whatever the window's bounds.
  const int64_t diagonal = row + (p.seqlen_k[b] - p.seqlen_q[b]);
  if (p.window_left >= 0 && p.window_left < diagonal) range.first = diagonal - p.window_left;
  if (p.window_right >= 0 && p.window_right < range.last - 1 - diagonal) {
    range.last = diagonal + p.window_right + 1;
  }
  return range;
}

// Whether the kernel computes anything but full attention.
VARLEN_HOST_DEVICE inline bool HasVariant(const VarlenAttentionParams& p) {
  return p.window_left >= 0 || p.window_right >= 0 || p.sinks != nullptr;
}

// The KV head that query head `h` reads under GQA.
VARLEN_HOST_DEVICE inline int KvHeadFor(const VarlenAttentionParams& p, int h) {
  return h / (p.num_heads_q / p.num_heads_kv);
}

// True when q, k and v are [tokens, heads, head_dim] with no gaps (not views
// of a fused projection).
bool IsDense(const VarlenAttentionParams& p);

// Tokens of the packed q (rows of its buffer).
int64_t PackedTokens(const VarlenAttentionParams& p);

// OK when every element a kernel would read or write lies inside its buffer;
// otherwise OutOfRange naming the sequence, the tensor and the range. A GPU
// kernel given such params reads foreign memory or faults.
absl::Status CheckKernelBounds(const VarlenAttentionParams& p);

}  // namespace varlen

#endif  // VARLEN_BACKEND_PARAMS_H_
