// The FlashAttention-2 forward kernel for packed variable-length sequences.
//
// One thread block per (block of 64 query rows, query head, sequence), four
// warps, each owning 16 of the rows. The block stages its Q tile in shared
// memory, then streams the sequence's keys and values in tiles:
//
//   1. the whole block loads K and V (zero past the sequence and past
//      head_dim: TileElementSource);
//   2. each warp computes S = Q K^T for its 16 rows (tensor cores for
//      float16 and bfloat16, float32 FMAs for float32 inputs);
//   3. one lane per row runs SoftmaxTileRow: scale, mask (the keys past the
//      sequence, and those outside the row's window), running maximum,
//      rescale factor, running sum, P rounded to the input dtype;
//   4. the warp rescales its rows of the float32 accumulator and adds P V
//      (under a window, a tile whose values hold NaN or infinity row by row
//      over each row's own keys: AccumulateAttended).
//
// The epilogue divides by the row sum (a sink joining it) and rounds to the
// input dtype. Steps 1 and the epilogue touch global memory; every address
// comes from SequenceAt and the params' strides, in int64. The arithmetic of
// steps 3 and 4 and of the epilogue is tile_math.h, shared with the host
// tests.

#ifndef VARLEN_KERNELS_CUDA_FLASH_FORWARD_CUH_
#define VARLEN_KERNELS_CUDA_FLASH_FORWARD_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "flash_forward.h"
#include "tile_math.h"
#include "tile_shape.h"

namespace varlen::cuda_kernels {

template <TileElement E>
struct FragmentTypeOf;
template <>
struct FragmentTypeOf<TileElement::kBFloat16> {
  using type = __nv_bfloat16;
};
template <>
struct FragmentTypeOf<TileElement::kFloat16> {
  using type = __half;
};

// The block-wide load of one tile into shared memory (step 1).
template <TileElement E>
__device__ void LoadTile(Storage<E>* tile, const Storage<E>* source, const TileSource& from,
                         int elements) {
  for (int e = threadIdx.x; e < elements; e += blockDim.x) {
    const int64_t at = TileElementSource(from, e);
    tile[e] = at < 0 ? Storage<E>(0) : source[at];
  }
}

// S[16 rows of this warp][kKeys] = Q K^T (step 2).
template <TileElement E, int kD, int kKeys>
__device__ void WarpScores(const Storage<E>* q_rows, const Storage<E>* k_tile, float* score_rows,
                           int lane) {
  if constexpr (E == TileElement::kFloat32) {
    for (int e = lane; e < 16 * kKeys; e += 32) {
      const int r = e / kKeys, c = e % kKeys;
      float s = 0.0f;
#pragma unroll 16
      for (int i = 0; i < kD; ++i) s = fmaf(q_rows[r * kD + i], k_tile[c * kD + i], s);
      score_rows[e] = s;
    }
  } else {
    using namespace nvcuda;
    using T = typename FragmentTypeOf<E>::type;
    const T* q = reinterpret_cast<const T*>(q_rows);
    const T* k = reinterpret_cast<const T*>(k_tile);
#pragma unroll
    for (int n = 0; n < kKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
      wmma::fill_fragment(s, 0.0f);
#pragma unroll
      for (int i = 0; i < kD / 16; ++i) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        // K^T as a column-major B: element (i, n) is k_tile[n][i].
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
        wmma::load_matrix_sync(a, q + i * 16, kD);
        wmma::load_matrix_sync(b, k + n * 16 * kD + i * 16, kD);
        wmma::mma_sync(s, a, b, s);
      }
      wmma::store_matrix_sync(score_rows + n * 16, s, kKeys, wmma::mem_row_major);
    }
  }
}

// acc[16 rows of this warp][kD] += P V (step 4).
template <TileElement E, int kD, int kKeys>
__device__ void WarpAccumulate(const Storage<E>* p_rows, const Storage<E>* v_tile, float* acc_rows,
                               int lane) {
  if constexpr (E == TileElement::kFloat32) {
    for (int e = lane; e < 16 * kD; e += 32) {
      const int r = e / kD, j = e % kD;
      float a = acc_rows[e];
#pragma unroll 16
      for (int c = 0; c < kKeys; ++c) a = fmaf(p_rows[r * kKeys + c], v_tile[c * kD + j], a);
      acc_rows[e] = a;
    }
  } else {
    using namespace nvcuda;
    using T = typename FragmentTypeOf<E>::type;
    const T* p = reinterpret_cast<const T*>(p_rows);
    const T* v = reinterpret_cast<const T*>(v_tile);
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
      wmma::load_matrix_sync(o, acc_rows + n * 16, kD, wmma::mem_row_major);
#pragma unroll
      for (int c = 0; c < kKeys / 16; ++c) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, p + c * 16, kKeys);
        wmma::load_matrix_sync(b, v + c * 16 * kD + n * 16, kD);
        wmma::mma_sync(o, a, b, o);
      }
      wmma::store_matrix_sync(acc_rows + n * 16, o, kD, wmma::mem_row_major);
    }
  }
}

// acc[16 rows of this warp][kD] += P V, each row over the columns it
// attends: a tile whose values hold NaN or infinity under a window (step 4,
// AccumulateAttended).
template <TileElement E, int kD, int kKeys>
__device__ void WarpAccumulateAttended(const VarlenAttentionParams& p, int sequence,
                                       const SequenceView& view, int64_t first_row, int64_t rows,
                                       int64_t first_key, int valid_keys, const Storage<E>* p_rows,
                                       const Storage<E>* v_tile, float* acc_rows, int lane) {
  for (int e = lane; e < 16 * kD; e += 32) {
    const int r = e / kD, j = e % kD;
    if (r >= rows) break;  // e grows with r
    const TileColumns attended =
        AttendedColumns(KeysOfRow(p, sequence, view, first_row + r), first_key, valid_keys);
    acc_rows[e] = AccumulateAttended<E>(p_rows + r * kKeys, v_tile, kD, j, attended, acc_rows[e]);
  }
}

template <TileElement E, int kHeadDim>
__global__ void __launch_bounds__(TileShapeFor(E, kHeadDim).threads)
    FlashForwardKernel(const VarlenAttentionParams p) {
  constexpr TileShape kTile = TileShapeFor(E, kHeadDim);
  constexpr int kD = kTile.head_dim, kRows = kTile.block_rows, kKeys = kTile.block_keys;
  using S = Storage<E>;

  const int sequence = static_cast<int>(blockIdx.z);
  const int head = static_cast<int>(blockIdx.y);
  const SequenceView view = SequenceAt(p, sequence);
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * kRows;
  if (first_row >= view.rows) return;  // the same for the whole block
  const int64_t rows = view.rows - first_row < kRows ? view.rows - first_row : kRows;
  const int kv_head = KvHeadFor(p, head);

  extern __shared__ __align__(128) unsigned char shared[];
  S* q_tile = reinterpret_cast<S*>(shared + kTile.shared.q);
  S* k_tile = reinterpret_cast<S*>(shared + kTile.shared.k);
  S* v_tile = reinterpret_cast<S*>(shared + kTile.shared.v);
  float* scores = reinterpret_cast<float*>(shared + kTile.shared.scores);
  S* p_tile = reinterpret_cast<S*>(shared + kTile.shared.p);
  float* acc = reinterpret_cast<float*>(shared + kTile.shared.acc);
  RowState* row_state = reinterpret_cast<RowState*>(shared + kTile.shared.row_state);
  float* correction = reinterpret_cast<float*>(shared + kTile.shared.correction);

  const S* q = static_cast<const S*>(p.q);
  const S* k = static_cast<const S*>(p.k);
  const S* v = static_cast<const S*>(p.v);
  LoadTile<E>(q_tile, q,
              {view.q_offset + first_row * p.q_token_stride + head * p.q_head_stride,
               p.q_token_stride, rows, p.head_dim_qk, kD},
              kRows * kD);
  for (int e = threadIdx.x; e < kRows * kD; e += blockDim.x) acc[e] = 0.0f;
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) row_state[r] = InitialRowState();

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_row = warp * 16;
  const float scale = static_cast<float>(p.softmax_scale);
  const bool windowed = HasWindow(p);
  for (int64_t first_key = 0; first_key < view.keys; first_key += kKeys) {
    const int valid_keys =
        static_cast<int>(view.keys - first_key < kKeys ? view.keys - first_key : kKeys);
    __syncthreads();  // the previous tile is no longer read; Q and the state are in place
    LoadTile<E>(k_tile, k,
                {view.k_offset + first_key * p.k_token_stride + kv_head * p.k_head_stride,
                 p.k_token_stride, valid_keys, p.head_dim_qk, kD},
                kKeys * kD);
    LoadTile<E>(v_tile, v,
                {view.v_offset + first_key * p.v_token_stride + kv_head * p.v_head_stride,
                 p.v_token_stride, valid_keys, p.head_dim_v, kD},
                kKeys * kD);
    bool non_finite = false;
    if (windowed) {
      for (int e = threadIdx.x; e < kKeys * kD; e += blockDim.x)
        non_finite = non_finite || !IsFiniteValue(Decode<E>(v_tile[e]));
    }
    const bool mask_values = __syncthreads_or(non_finite) != 0;  // also the tiles' barrier

    WarpScores<E, kD, kKeys>(q_tile + warp_row * kD, k_tile, scores + warp_row * kKeys, lane);
    __syncwarp();
    if (lane < 16) {
      const int r = warp_row + lane;
      float* row = scores + r * kKeys;
      float factor = 1.0f;
      if (r < rows) {
        const KeyRange keys = KeysOfRow(p, sequence, view, first_row + r);
        factor = SoftmaxTileRow<E>(row, AttendedColumns(keys, first_key, valid_keys), kKeys, scale,
                                   &row_state[r]);
      } else {
        for (int c = 0; c < kKeys; ++c) row[c] = 0.0f;  // no query row: P stays finite
      }
      correction[r] = factor;
      for (int c = 0; c < kKeys; ++c) p_tile[r * kKeys + c] = Encode<E>(row[c]);  // exact
    }
    __syncwarp();
    for (int e = lane; e < 16 * kD; e += 32)
      acc[warp_row * kD + e] *= correction[warp_row + e / kD];
    __syncwarp();
    if (mask_values) {
      WarpAccumulateAttended<E, kD, kKeys>(p, sequence, view, first_row + warp_row, rows - warp_row,
                                           first_key, valid_keys, p_tile + warp_row * kKeys, v_tile,
                                           acc + warp_row * kD, lane);
    } else {
      WarpAccumulate<E, kD, kKeys>(p_tile + warp_row * kKeys, v_tile, acc + warp_row * kD, lane);
    }
  }
  __syncthreads();

  S* o = static_cast<S*>(p.o);
  const int64_t o_base = view.o_offset + first_row * p.o_token_stride + head * p.o_head_stride;
  const float sink = SinkOf(p, head);
  for (int e = threadIdx.x; e < kRows * p.head_dim_v; e += blockDim.x) {
    const int r = e / p.head_dim_v, j = e % p.head_dim_v;
    if (r >= rows) break;  // e grows with r
    const KeyRange keys = KeysOfRow(p, sequence, view, first_row + r);
    o[o_base + r * p.o_token_stride + j] =
        Encode<E>(FinalizeOutput(acc[r * kD + j], row_state[r], keys.first < keys.last, sink));
  }
}

template <TileElement E, int kHeadDim>
cudaError_t LaunchFlashForwardFor(const VarlenAttentionParams& device_params,
                                  const LaunchPlan& plan, cudaStream_t stream) {
  constexpr TileShape kTile = TileShapeFor(E, kHeadDim);
  const auto kernel = FlashForwardKernel<E, kHeadDim>;
  if (cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               kTile.shared.bytes);
      error != cudaSuccess) {
    return error;
  }
  if (plan.row_blocks == 0 || plan.heads == 0 || plan.sequences == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(plan.heads),
                  static_cast<unsigned>(plan.sequences));
  kernel<<<grid, kTile.threads, kTile.shared.bytes, stream>>>(device_params);
  return cudaGetLastError();
}

}  // namespace varlen::cuda_kernels

#endif  // VARLEN_KERNELS_CUDA_FLASH_FORWARD_CUH_
