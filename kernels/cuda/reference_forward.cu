// The GPU reference: ReferenceAttention's arithmetic (kernels/cpu_reference)
// for cases too large for the CPU. Deliberately not the flash kernel's
// algorithm: the row maximum comes from a first pass over every key, the
// second pass takes exp, the sum and P V, and nothing is rescaled. A row
// attends the keys KeysOfRow gives it; a sink starts its maximum and joins
// its sum, as in the CPU reference.
//
// One block per (32 query rows, head, sequence), eight threads per row.
// Keys and values pass through shared memory 32 at a time, stored as float:
// every input dtype it takes (float32, float16, bfloat16) is exact in
// float, and the products are formed in the accumulation type (a product
// of two floats is exact in double).

#include <cuda_runtime.h>

#include "flash_forward.h"
#include "tile_math.h"

namespace varlen::cuda_kernels {
namespace {

constexpr int kRows = 32;        // query rows per block
constexpr int kKeys = 32;        // keys per pass through shared memory
constexpr int kLanesPerRow = 8;  // consecutive lanes of one warp
constexpr int kThreads = kRows * kLanesPerRow;
constexpr int kMaxColumnsPerLane = kReferenceMaxHeadDim / kLanesPerRow;

__device__ float LoadFloat(const void* base, int64_t index, DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return Float16BitsToFloat(static_cast<const uint16_t*>(base)[index]);
    case DType::kBFloat16:
      return BFloat16BitsToFloat(static_cast<const uint16_t*>(base)[index]);
    default:
      return static_cast<const float*>(base)[index];
  }
}

// Float64 outputs take the value; the others are written by the emulation,
// whose value is a float already (so the dtype's rounding is the only one).
__device__ void StoreValue(void* base, int64_t index, double value, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(base)[index] = static_cast<float>(value);
      break;
    case DType::kFloat16:
      static_cast<uint16_t*>(base)[index] = FloatToFloat16Bits(static_cast<float>(value));
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[index] = FloatToBFloat16Bits(static_cast<float>(value));
      break;
    default:
      static_cast<double*>(base)[index] = value;
      break;
  }
}

// P rounded to the input dtype before P V (the emulation's rounding).
__device__ float RoundToInput(float x, DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return RoundTo<TileElement::kFloat16>(x);
    case DType::kBFloat16:
      return RoundTo<TileElement::kBFloat16>(x);
    default:
      return x;
  }
}

// `rows` x `cols` of a [tokens, heads, dim] tensor into shared memory as
// float, zero past `valid_rows`.
__device__ void LoadRows(float* tile, const void* source, DType dtype, int64_t base,
                         int64_t token_stride, int64_t valid_rows, int rows, int cols) {
  for (int e = threadIdx.x; e < rows * cols; e += kThreads) {
    const int r = e / cols, c = e % cols;
    tile[e] = r < valid_rows ? LoadFloat(source, base + r * token_stride + c, dtype) : 0.0f;
  }
}

// The reduction over the eight lanes of one row.
template <typename Acc>
__device__ Acc RowReduce(Acc value, bool take_max) {
  for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2) {
    const Acc other = __shfl_xor_sync(0xffffffffu, value, offset, kLanesPerRow);
    value = take_max ? (other > value ? other : value) : value + other;
  }
  return value;
}

// Acc = double: the oracle. Acc = float with `round_probabilities`: the
// judge's same-precision emulation.
template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    ReferenceForwardKernel(const VarlenAttentionParams p, bool round_probabilities) {
  const int sequence = static_cast<int>(blockIdx.z), head = static_cast<int>(blockIdx.y);
  const SequenceView view = SequenceAt(p, sequence);
  const int64_t first_row = static_cast<int64_t>(blockIdx.x) * kRows;
  if (first_row >= view.rows) return;  // the same for the whole block
  const int kv_head = KvHeadFor(p, head);
  const int d = p.head_dim_qk, dv = p.head_dim_v;

  extern __shared__ __align__(16) unsigned char shared[];
  float* q = reinterpret_cast<float*>(shared);            // [kRows][d]
  float* k = q + kRows * d;                               // [kKeys][d]
  float* v = k + kKeys * d;                               // [kKeys][dv]
  Acc* weights = reinterpret_cast<Acc*>(v + kKeys * dv);  // [kRows][kKeys]

  LoadRows(q, p.q, p.input_dtype,
           view.q_offset + first_row * p.q_token_stride + head * p.q_head_stride, p.q_token_stride,
           view.rows - first_row, kRows, d);
  const int row = static_cast<int>(threadIdx.x) / kLanesPerRow;
  const int lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
  const Acc scale = static_cast<Acc>(p.softmax_scale);
  const int64_t k_base = view.k_offset + kv_head * p.k_head_stride;
  const int64_t v_base = view.v_offset + kv_head * p.v_head_stride;
  const bool in_sequence = first_row + row < view.rows;
  const KeyRange keys =
      in_sequence ? KeysOfRow(p, sequence, view, first_row + row) : KeyRange{0, view.keys};
  const auto attends = [&](int64_t key) { return key >= keys.first && key < keys.last; };
  const auto logit = [&](int key) {
    Acc dot = 0;
    for (int i = 0; i < d; ++i)
      dot += static_cast<Acc>(q[row * d + i]) * static_cast<Acc>(k[key * d + i]);
    return dot * scale;
  };

  // Pass 1: the maximum of each row (the sink's, when larger).
  const Acc sink =
      p.sinks != nullptr ? static_cast<Acc>(p.sinks[head]) : -static_cast<Acc>(INFINITY);
  Acc max_logit = sink;
  for (int64_t chunk = 0; chunk < view.keys; chunk += kKeys) {
    __syncthreads();
    LoadRows(k, p.k, p.input_dtype, k_base + chunk * p.k_token_stride, p.k_token_stride,
             view.keys - chunk, kKeys, d);
    __syncthreads();
    for (int c = lane; c < kKeys && chunk + c < view.keys; c += kLanesPerRow) {
      if (!attends(chunk + c)) continue;
      const Acc s = logit(c);
      max_logit = s > max_logit ? s : max_logit;  // NaN is skipped, as std::max does
    }
  }
  max_logit = RowReduce(max_logit, /*take_max=*/true);

  // Pass 2: exp, the sum, and P V. Lane j owns the columns j, j + 8, ...
  Acc sum = 0;
  Acc out[kMaxColumnsPerLane] = {};
  for (int64_t chunk = 0; chunk < view.keys; chunk += kKeys) {
    __syncthreads();
    LoadRows(k, p.k, p.input_dtype, k_base + chunk * p.k_token_stride, p.k_token_stride,
             view.keys - chunk, kKeys, d);
    LoadRows(v, p.v, p.input_dtype, v_base + chunk * p.v_token_stride, p.v_token_stride,
             view.keys - chunk, kKeys, dv);
    __syncthreads();
    for (int c = lane; c < kKeys; c += kLanesPerRow) {
      Acc w = 0;
      if (chunk + c < view.keys && attends(chunk + c)) {
        w = exp(logit(c) - max_logit);
        sum += w;
        if (round_probabilities) w = RoundToInput(static_cast<float>(w), p.input_dtype);
      }
      weights[row * kKeys + c] = w;
    }
    __syncwarp();  // a row's weights come from its own eight lanes
#pragma unroll
    for (int i = 0; i < kMaxColumnsPerLane; ++i) {
      const int column = lane + i * kLanesPerRow;
      if (column < dv) {
        for (int c = 0; c < kKeys; ++c) {
          out[i] += weights[row * kKeys + c] * static_cast<Acc>(v[c * dv + column]);
        }
      }
    }
  }
  Acc denominator = RowReduce(sum, /*take_max=*/false);
  if (p.sinks != nullptr) denominator += exp(sink - max_logit);

  if (!in_sequence) return;
  const int64_t o_row =
      view.o_offset + (first_row + row) * p.o_token_stride + head * p.o_head_stride;
#pragma unroll
  for (int i = 0; i < kMaxColumnsPerLane; ++i) {
    const int column = lane + i * kLanesPerRow;
    if (column < dv) {
      const double value =
          keys.first >= keys.last ? 0.0 : static_cast<double>(out[i] / denominator);
      StoreValue(p.o, o_row + column, value, p.output_dtype);
    }
  }
}

template <typename Acc>
cudaError_t Launch(const VarlenAttentionParams& p, int64_t row_blocks, bool round,
                   cudaStream_t stream) {
  const int bytes = (kRows * p.head_dim_qk + kKeys * p.head_dim_qk + kKeys * p.head_dim_v) * 4 +
                    kRows * kKeys * static_cast<int>(sizeof(Acc));
  if (cudaError_t error = cudaFuncSetAttribute(ReferenceForwardKernel<Acc>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      error != cudaSuccess) {
    return error;
  }
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(p.num_heads_q),
                  static_cast<unsigned>(p.batch));
  ReferenceForwardKernel<Acc><<<grid, kThreads, bytes, stream>>>(p, round);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchReferenceForward(const VarlenAttentionParams& device_params,
                                   ReferenceArithmetic arithmetic, int64_t longest_rows,
                                   cudaStream_t stream) {
  const VarlenAttentionParams& p = device_params;
  if (p.head_dim_qk > kReferenceMaxHeadDim || p.head_dim_v > kReferenceMaxHeadDim ||
      p.input_dtype == DType::kFloat64) {
    return cudaErrorInvalidValue;
  }
  const int64_t row_blocks = (longest_rows + kRows - 1) / kRows;
  if (row_blocks == 0 || p.num_heads_q == 0 || p.batch == 0) return cudaSuccess;
  return arithmetic == ReferenceArithmetic::kFloat64
             ? Launch<double>(p, row_blocks, /*round=*/false, stream)
             : Launch<float>(p, row_blocks, /*round=*/true, stream);
}

// Every kernel of this library is built for the same architectures, so one
// stands for all.
cudaError_t CheckKernelImage() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, ReferenceForwardKernel<float>);
}

}  // namespace varlen::cuda_kernels
