// The arithmetic of one tile of the CUDA FlashAttention kernel, written once
// for the device and the host.
//
// Everything here is a plain function of a few floats or one row of a
// shared-memory tile: the kernel calls it from its threads, and the unit
// tests (and the host emulation of the kernel in tests/kernels/cuda) call
// the very same code on the CPU, against the float64 reference on the same
// tiles. What only a GPU can check is what surrounds these calls: which
// thread handles which row, and the tensor-core fragments of S = Q K^T and
// O += P V.
//
//   * Encode/Decode: float <-> the input dtype's bits, rounding to nearest
//     even (NaN stays NaN), as the conversion instructions do;
//   * TileElementSource: where element e of a [rows x padded head dim] tile
//     comes from in global memory, or nothing (zero fill) past the sequence
//     or past head_dim: the boundary masking of the last tile and the
//     head-dim padding;
//   * AttendedColumns: which columns of a key tile a row attends (the keys
//     of the sequence, within the row's window);
//   * SoftmaxTileRow: the online-softmax step of one query row over one key
//     tile (scale, mask of the columns the row does not attend, running
//     maximum, rescale factor, running sum, probabilities rounded to the
//     input dtype);
//   * FinalizeOutput: the normalisation of the epilogue, a sink joining the
//     row sum.

#ifndef VARLEN_KERNELS_CUDA_TILE_MATH_H_
#define VARLEN_KERNELS_CUDA_TILE_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "varlen/backend/params.h"  // VARLEN_HOST_DEVICE

namespace varlen::cuda_kernels {

// The input dtypes the kernel is compiled for.
enum class TileElement { kFloat32, kFloat16, kBFloat16 };

// How an element of each dtype is stored: float, or its 16-bit encoding.
template <TileElement E>
struct StorageOf {
  using type = uint16_t;
};
template <>
struct StorageOf<TileElement::kFloat32> {
  using type = float;
};
template <TileElement E>
using Storage = typename StorageOf<E>::type;

VARLEN_HOST_DEVICE inline uint32_t BitsOf(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

VARLEN_HOST_DEVICE inline float FloatOf(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

VARLEN_HOST_DEVICE inline uint16_t FloatToBFloat16Bits(float x) {
  uint32_t bits = BitsOf(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

VARLEN_HOST_DEVICE inline float BFloat16BitsToFloat(uint16_t bits) {
  return FloatOf(uint32_t{bits} << 16);
}

// IEEE binary16, round to nearest even, with subnormals and overflow to inf.
VARLEN_HOST_DEVICE inline uint16_t FloatToFloat16Bits(float x) {
  const uint32_t bits = BitsOf(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  // Bits dropped from the 24-bit significand: 13 for a normal half, more
  // for a subnormal one (the result's exponent is pinned at -14).
  const int shift = exponent < -14 ? 13 + (-14 - exponent) : 13;
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  if (exponent < -14) return sign | static_cast<uint16_t>(rounded);  // a carry makes it normal
  // A carry out of the significand moves into the exponent field by itself.
  rounded += static_cast<uint32_t>(exponent + 15 - 1) << 10;
  return sign | static_cast<uint16_t>(rounded);
}

VARLEN_HOST_DEVICE inline float Float16BitsToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1fu) return FloatOf(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return FloatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal (or zero): mantissa * 2^-24, exact in float.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

template <TileElement E>
VARLEN_HOST_DEVICE inline Storage<E> Encode(float x) {
  if constexpr (E == TileElement::kFloat32) {
    return x;
  } else if constexpr (E == TileElement::kBFloat16) {
    return FloatToBFloat16Bits(x);
  } else {
    return FloatToFloat16Bits(x);
  }
}

template <TileElement E>
VARLEN_HOST_DEVICE inline float Decode(Storage<E> x) {
  if constexpr (E == TileElement::kFloat32) {
    return x;
  } else if constexpr (E == TileElement::kBFloat16) {
    return BFloat16BitsToFloat(x);
  } else {
    return Float16BitsToFloat(x);
  }
}

// x rounded to the input dtype: what P is before it multiplies V.
template <TileElement E>
VARLEN_HOST_DEVICE inline float RoundTo(float x) {
  return Decode<E>(Encode<E>(x));
}

// One [rows x padded_cols] tile of a [tokens, heads, head_dim] tensor: the
// first `valid_rows` rows and `valid_cols` columns come from memory, the rest
// is zero. Padding past head_dim keeps the dot products exact; zero rows
// past the sequence keep 0 * garbage (NaN) out of P V.
struct TileSource {
  int64_t base;          // element offset of the tile's first row, column 0
  int64_t token_stride;  // elements between consecutive rows
  int64_t valid_rows;
  int valid_cols;
  int padded_cols;
};

// The element offset that tile element `e` (row-major) is read from, or -1
// for a zero.
VARLEN_HOST_DEVICE inline int64_t TileElementSource(const TileSource& t, int e) {
  const int row = e / t.padded_cols;
  const int col = e - row * t.padded_cols;
  if (row >= t.valid_rows || col >= t.valid_cols) return -1;
  return t.base + row * t.token_stride + col;
}

// Running statistics of one query row across key tiles.
struct RowState {
  float max;  // of the scaled logits seen so far; -inf before any
  float sum;  // of exp(logit - max) over them
};

VARLEN_HOST_DEVICE inline float NegativeInfinity() { return FloatOf(0xff800000u); }

VARLEN_HOST_DEVICE inline RowState InitialRowState() { return {NegativeInfinity(), 0.0f}; }

VARLEN_HOST_DEVICE inline float Exp(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);  // the accurate exponential, not __expf
#else
  return std::exp(x);
#endif
}

// The columns [first, end) of a key tile that a row attends.
struct TileColumns {
  int first, end;
};

// The columns of the tile of keys [first_key, first_key + valid_keys) of a
// sequence that a row attending the keys `range` (KeysOfRow) takes.
VARLEN_HOST_DEVICE inline TileColumns AttendedColumns(const KeyRange& range, int64_t first_key,
                                                      int valid_keys) {
  const auto clamp = [valid_keys](int64_t key) {
    return key < 0 ? 0 : key > valid_keys ? valid_keys : static_cast<int>(key);
  };
  const int first = clamp(range.first - first_key);
  const int end = clamp(range.last - first_key);
  return {first, end > first ? end : first};
}

// One online-softmax step of a query row over one key tile. `scores` holds
// the row's raw dot products q.k for `tile_keys` columns, of which the row
// attends `attended`. On return scores[c] is the probability
// exp(scale * s - max) rounded to the input dtype (0 for the masked
// columns), `state` covers the tile, and the result is the factor by which
// everything accumulated before this tile must be multiplied.
template <TileElement E>
VARLEN_HOST_DEVICE inline float SoftmaxTileRow(float* scores, TileColumns attended, int tile_keys,
                                               float scale, RowState* state) {
  for (int c = 0; c < attended.first; ++c) scores[c] = 0.0f;
  float tile_max = NegativeInfinity();
  for (int c = attended.first; c < attended.end; ++c) {
    scores[c] *= scale;
    tile_max = scores[c] > tile_max ? scores[c] : tile_max;
  }
  const float new_max = state->max > tile_max ? state->max : tile_max;
  // Both -inf: every logit so far is -inf, there is nothing to rescale (and
  // exp(-inf - -inf) would be NaN).
  const float correction = new_max == NegativeInfinity() ? 1.0f : Exp(state->max - new_max);
  float sum = 0.0f;
  for (int c = attended.first; c < attended.end; ++c) {
    const float probability = Exp(scores[c] - new_max);
    sum += probability;  // the row sum takes P before rounding, as FlashAttention-2 does
    scores[c] = RoundTo<E>(probability);
  }
  for (int c = attended.end; c < tile_keys; ++c) scores[c] = 0.0f;
  state->sum = state->sum * correction + sum;
  state->max = new_max;
  return correction;
}

VARLEN_HOST_DEVICE inline bool IsFiniteValue(float x) {
  return (BitsOf(x) & 0x7f800000u) != 0x7f800000u;
}

// Whether a window masks keys of the launch (then a key some rows of a block
// attend, others do not, sits in the tiles of both).
VARLEN_HOST_DEVICE inline bool HasWindow(const VarlenAttentionParams& p) {
  return p.window_left >= 0 || p.window_right >= 0;
}

// One element of a row's P V over the columns it attends, added to `acc`:
// how a tile whose values hold NaN or infinity is accumulated under a
// window, since 0 * NaN of a masked key would reach a row that never
// attends it (the whole-tile P V of the other tiles takes every column).
template <TileElement E>
VARLEN_HOST_DEVICE inline float AccumulateAttended(const Storage<E>* p_row,
                                                   const Storage<E>* v_tile, int v_row_stride,
                                                   int column, TileColumns attended, float acc) {
  for (int c = attended.first; c < attended.end; ++c) {
    acc += Decode<E>(p_row[c]) * Decode<E>(v_tile[c * v_row_stride + column]);
  }
  return acc;
}

// The output value of one accumulated element: acc / sum, where a sink (a
// logit that adds no value; -inf for none) joins the sum against the row's
// maximum; 0 for a row that attends no key.
VARLEN_HOST_DEVICE inline float FinalizeOutput(float acc, const RowState& state, bool has_keys,
                                               float sink = NegativeInfinity()) {
  if (!has_keys) return 0.0f;
  if (sink == NegativeInfinity()) return acc / state.sum;
  if (sink <= state.max) return acc / (state.sum + Exp(sink - state.max));
  const float factor = Exp(state.max - sink);  // the sink is the larger maximum
  return acc * factor / (state.sum * factor + 1.0f);
}

// The sink of query head `head`, -inf when the launch has none.
VARLEN_HOST_DEVICE inline float SinkOf(const VarlenAttentionParams& p, int head) {
  return p.sinks != nullptr ? p.sinks[head] : NegativeInfinity();
}

}  // namespace varlen::cuda_kernels

#endif  // VARLEN_KERNELS_CUDA_TILE_MATH_H_
