// The tile shapes of the CUDA FlashAttention kernel and the layout of its
// shared memory, per input dtype and padded head dim: one constexpr table
// that the kernel template, the host launch planner and the host emulation
// all read, so they cannot disagree.
//
// A head dim is padded up to the next compiled bucket (72 -> 80, 100 ->
// 128); the padding columns are zero in shared memory and never read from
// or written to global memory. head_dim_v is padded the same way (the
// kernel pads max(head_dim_qk, head_dim_v)).

#ifndef VARLEN_KERNELS_CUDA_TILE_SHAPE_H_
#define VARLEN_KERNELS_CUDA_TILE_SHAPE_H_

#include <cstdint>

#include "tile_math.h"

namespace varlen::cuda_kernels {

// The padded head dims the kernel is compiled for (multiples of 16, the
// tensor-core fragment width), as an X-macro: the bucket table below, the
// explicit instantiations and the dispatch all expand this one list.
#define VARLEN_CUDA_HEAD_DIMS(X) X(32) X(64) X(80) X(96) X(128) X(160) X(192) X(256)

#define VARLEN_CUDA_LIST_ITEM(D) D,
inline constexpr int kHeadDimBuckets[] = {VARLEN_CUDA_HEAD_DIMS(VARLEN_CUDA_LIST_ITEM)};
#undef VARLEN_CUDA_LIST_ITEM
inline constexpr int kMaxHeadDim = kHeadDimBuckets[sizeof kHeadDimBuckets / sizeof(int) - 1];

// The bucket `head_dim` runs in, or 0 when it is larger than every bucket.
VARLEN_HOST_DEVICE constexpr int PaddedHeadDim(int head_dim) {
  for (int bucket : kHeadDimBuckets) {
    if (head_dim <= bucket) return bucket;
  }
  return 0;
}

VARLEN_HOST_DEVICE constexpr int ElementBytes(TileElement e) {
  return e == TileElement::kFloat32 ? 4 : 2;
}

// Byte offsets of the shared-memory regions of one thread block. Every
// region starts on a 32-byte boundary (the tensor-core loads need it): the
// sizes are multiples of 16 rows x 16 columns.
struct SharedLayout {
  int q;           // [block_rows][head_dim] input dtype
  int k;           // [block_keys][head_dim] input dtype
  int v;           // [block_keys][head_dim] input dtype
  int scores;      // [block_rows][block_keys] float: S, then P in float
  int p;           // [block_rows][block_keys] input dtype: P rounded, the A of P V
  int acc;         // [block_rows][head_dim] float: the unnormalised output
  int row_state;   // [block_rows] RowState
  int correction;  // [block_rows] float: this tile's rescale factor per row
  int bytes;       // the total
};

struct TileShape {
  int head_dim;    // padded
  int block_rows;  // query rows per thread block, 16 per warp
  int block_keys;  // keys per streamed tile
  int warps;
  int threads;
  SharedLayout shared;
};

VARLEN_HOST_DEVICE constexpr TileShape TileShapeFor(TileElement element, int padded_head_dim) {
  TileShape t{};
  t.head_dim = padded_head_dim;
  t.block_rows = 64;
  // Wide heads halve the key tile so that head dim 256 in half precision
  // fits an sm_80 block (164 KB).
  t.block_keys = padded_head_dim <= 128 ? 64 : 32;
  t.warps = t.block_rows / 16;
  t.threads = t.warps * 32;
  const int e = ElementBytes(element);
  int at = 0;
  const auto take = [&at](int bytes) {
    const int start = at;
    at += (bytes + 31) / 32 * 32;
    return start;
  };
  t.shared.q = take(t.block_rows * t.head_dim * e);
  t.shared.k = take(t.block_keys * t.head_dim * e);
  t.shared.v = take(t.block_keys * t.head_dim * e);
  t.shared.scores = take(t.block_rows * t.block_keys * 4);
  t.shared.p = take(t.block_rows * t.block_keys * e);
  t.shared.acc = take(t.block_rows * t.head_dim * 4);
  t.shared.row_state = take(t.block_rows * static_cast<int>(sizeof(RowState)));
  t.shared.correction = take(t.block_rows * 4);
  t.shared.bytes = at;
  return t;
}

}  // namespace varlen::cuda_kernels

#endif  // VARLEN_KERNELS_CUDA_TILE_SHAPE_H_
