// What the cuDNN SDPA graph is built with and fed with, as plain numbers:
// the 4-d views of Q, K, V and O, and the ragged offsets and sequence
// lengths of one call. Plain C++, so the mapping from the kernel params to
// cuDNN's tensors is tested without cuDNN or a GPU.
//
// cuDNN's ragged ("THD") SDPA sees each tensor as (B, H, S_max, D) with
// strides (S_max * token_stride, head_stride, token_stride, 1): within a
// sequence that is the packed [T, H, D] layout, and the batch stride is
// nominal because the ragged offset of sequence b (in elements) replaces
// b * batch_stride. The sequence lengths and the padding mask limit each
// sequence to its own rows and keys.

#ifndef VARLEN_KERNELS_CUDNN_SDPA_LAYOUT_H_
#define VARLEN_KERNELS_CUDNN_SDPA_LAYOUT_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph_cache.h"
#include "varlen/backend/params.h"

namespace varlen::cudnn_kernels {

struct TensorView4d {
  std::array<int64_t, 4> dims;     // (B, H, S, D)
  std::array<int64_t, 4> strides;  // elements
};

struct SdpaTensorViews {
  TensorView4d q, k, v, o;
};

// The views the graph for `key` declares.
SdpaTensorViews ViewsFor(const SdpaGraphKey& key);

// The integer tensors of one call, on the host. Offsets have B + 1 entries
// (the last one is the end of the furthest sequence, cuDNN's shape
// (B+1, 1, 1, 1)); lengths have B.
struct RaggedArguments {
  std::vector<int64_t> q_offsets, k_offsets, v_offsets, o_offsets;
  std::vector<int64_t> seq_len_q, seq_len_kv;
};

// The ragged arguments of `params`, as the kernel touches them
// (SequenceAt): a sequence longer than the launch bound is given the
// bound, so cuDNN computes exactly the rows and keys the flashinfer_cudnn
// model says its graph (S_max = max_token_per_sequence) computes, and a
// tensor a sequence does not touch gets offset 0.
//
// InvalidArgument when an offset is not a multiple of 16 bytes: cuDNN
// loads 16-byte aligned tiles, and a misaligned address is a sticky CUDA
// error that would end every later run in the process.
absl::StatusOr<RaggedArguments> RaggedArgumentsFor(const VarlenAttentionParams& params);

// `values` as the bytes of a `dtype` (kInt32 or kInt64) device tensor.
// REQUIRES: every value fits `dtype` (KeyFor chooses kInt64 when an
// element offset can reach 2^31).
std::vector<uint8_t> EncodeIntegers(const std::vector<int64_t>& values, DType dtype);

}  // namespace varlen::cudnn_kernels

#endif  // VARLEN_KERNELS_CUDNN_SDPA_LAYOUT_H_
