#include "flash_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "varlen/backend/elements.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

using kernels::LoadAsFloat;
using kernels::RoundFloatTo;
using kernels::StoreFromDouble;

constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// One thread block of a GPU kernel: a tile of query rows of one head of one
// sequence.
struct WorkItem {
  int sequence;
  int head;
  int64_t first_row;
};

// Register tiles of both products: kBlockRows rows x two vectors of float32
// (8 accumulators, half of AVX2's registers), over the whole depth.
typedef float Lanes __attribute__((vector_size(32)));
typedef float UnalignedLanes __attribute__((vector_size(32), aligned(alignof(float)), may_alias));
constexpr int kLanes = 8;
constexpr int kBlock = 2 * kLanes;  // columns of a register tile
constexpr int kBlockRows = 4;
static_assert(kFlashTileKeys % kBlock == 0);

int64_t PaddedToBlock(int64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// The vector at p, by reference: a vector by value would change the baseline
// build's calling convention.
[[gnu::always_inline]] inline const UnalignedLanes& LanesAt(const float* p) {
  return *reinterpret_cast<const UnalignedLanes*>(p);
}
[[gnu::always_inline]] inline UnalignedLanes& LanesAt(float* p) {
  return *reinterpret_cast<UnalignedLanes*>(p);
}

// Per-thread buffers, in float32 like a kernel's shared memory and registers.
// Rows of v and of the accumulators are padded to whole register tiles
// (v's padding stays zero), so that the tiles never need a remainder loop.
struct Scratch {
  int64_t v_stride = 0;           // dv padded to kBlock
  std::vector<float> q;           // [rows][d]
  std::vector<float> k_t;         // [d][kFlashTileKeys], transposed so rows of scores vectorize
  std::vector<float> v;           // [keys][v_stride]
  std::vector<float> scores;      // [rows][kFlashTileKeys]: S, then P in the input dtype
  std::vector<float> row_max;     // [rows]
  std::vector<float> row_sum;     // [rows]
  std::vector<float> correction;  // [rows]: what this tile rescales the accumulator by
  std::vector<float> acc;         // [rows][v_stride], the unnormalized output
  std::vector<KeyRange> keys;     // [rows]: the keys each row attends, with a window
  // kSplitKvMergeWithoutRescale: the splits finished so far, summed.
  std::vector<float> merged_sum;  // [rows]
  std::vector<float> merged_acc;  // [rows][v_stride]
};

// scores[r][c] = sum_i q[r][i] k_t[i][c] for Rows rows and one block of
// kBlock keys, i in order (as a dot product over the head dim runs).
template <int Rows>
[[gnu::always_inline]] inline void ScoreBlock(const float* q, int d, const float* k_t,
                                              float* scores) {
  Lanes acc[Rows][2] = {};
  for (int i = 0; i < d; ++i) {
    const Lanes k0 = LanesAt(k_t + i * kFlashTileKeys);
    const Lanes k1 = LanesAt(k_t + i * kFlashTileKeys + kLanes);
    for (int r = 0; r < Rows; ++r) {
      const float qr = q[r * d + i];
      acc[r][0] += qr * k0;
      acc[r][1] += qr * k1;
    }
  }
  for (int r = 0; r < Rows; ++r) {
    LanesAt(scores + r * kFlashTileKeys) = acc[r][0];
    LanesAt(scores + r * kFlashTileKeys + kLanes) = acc[r][1];
  }
}

// acc[r][j] = acc[r][j] correction[r] + sum_c p[r][c] v[c][j] for Rows rows
// and one block of kBlock columns, c in key order.
template <int Rows>
[[gnu::always_inline]] inline void AccumulateBlock(const float* p, int64_t keys, const float* v,
                                                   int64_t v_stride, const float* correction,
                                                   float* acc) {
  Lanes a[Rows][2];
  for (int r = 0; r < Rows; ++r) {
    a[r][0] = LanesAt(acc + r * v_stride) * correction[r];
    a[r][1] = LanesAt(acc + r * v_stride + kLanes) * correction[r];
  }
  for (int64_t c = 0; c < keys; ++c) {
    const Lanes v0 = LanesAt(v + c * v_stride);
    const Lanes v1 = LanesAt(v + c * v_stride + kLanes);
    for (int r = 0; r < Rows; ++r) {
      const float pr = p[r * kFlashTileKeys + c];
      a[r][0] += pr * v0;
      a[r][1] += pr * v1;
    }
  }
  for (int r = 0; r < Rows; ++r) {
    LanesAt(acc + r * v_stride) = a[r][0];
    LanesAt(acc + r * v_stride + kLanes) = a[r][1];
  }
}

// Both products of a tile, over its rows in groups of kBlockRows.
struct TileProducts {
  // scores[r][0..keys padded to kBlock) = q[r] . k_t[][c], for r < rows.
  void (*scores)(const float* q, int d, const float* k_t, int64_t rows, int64_t keys,
                 float* scores);
  // acc[r] = acc[r] correction[r] + p[r] V, for r < rows.
  void (*accumulate)(const float* p, int64_t rows, int64_t keys, const float* v, int64_t v_stride,
                     const float* correction, float* acc);
};

template <int Rows>
[[gnu::always_inline]] inline void ScoreRows(const float* q, int d, const float* k_t, int64_t keys,
                                             float* scores) {
  for (int64_t c0 = 0; c0 < keys; c0 += kBlock) ScoreBlock<Rows>(q, d, k_t + c0, scores + c0);
}

template <int Rows>
[[gnu::always_inline]] inline void AccumulateRows(const float* p, int64_t keys, const float* v,
                                                  int64_t v_stride, const float* correction,
                                                  float* acc) {
  for (int64_t j0 = 0; j0 < v_stride; j0 += kBlock) {
    AccumulateBlock<Rows>(p, keys, v + j0, v_stride, correction, acc + j0);
  }
}

// Both run over the rows in register tiles of kBlockRows, then the remainder.
// (Plain calls, no lambdas: a lambda would be compiled for the baseline
// target inside the AVX2 variants below.)
[[gnu::always_inline]] inline void ScoresImpl(const float* q, int d, const float* k_t, int64_t rows,
                                              int64_t keys, float* scores) {
  const int64_t padded = PaddedToBlock(keys);
  int64_t r = 0;
  for (; r + kBlockRows <= rows; r += kBlockRows) {
    ScoreRows<kBlockRows>(q + r * d, d, k_t, padded, scores + r * kFlashTileKeys);
  }
  q += r * d, scores += r * kFlashTileKeys;
  switch (rows - r) {
    case 1:
      ScoreRows<1>(q, d, k_t, padded, scores);
      break;
    case 2:
      ScoreRows<2>(q, d, k_t, padded, scores);
      break;
    case 3:
      ScoreRows<3>(q, d, k_t, padded, scores);
      break;
    default:
      break;
  }
}

[[gnu::always_inline]] inline void AccumulateImpl(const float* p, int64_t rows, int64_t keys,
                                                  const float* v, int64_t v_stride,
                                                  const float* correction, float* acc) {
  int64_t r = 0;
  for (; r + kBlockRows <= rows; r += kBlockRows) {
    AccumulateRows<kBlockRows>(p + r * kFlashTileKeys, keys, v, v_stride, correction + r,
                               acc + r * v_stride);
  }
  p += r * kFlashTileKeys, correction += r, acc += r * v_stride;
  switch (rows - r) {
    case 1:
      AccumulateRows<1>(p, keys, v, v_stride, correction, acc);
      break;
    case 2:
      AccumulateRows<2>(p, keys, v, v_stride, correction, acc);
      break;
    case 3:
      AccumulateRows<3>(p, keys, v, v_stride, correction, acc);
      break;
    default:
      break;
  }
}

void ScoresBaseline(const float* q, int d, const float* k_t, int64_t rows, int64_t keys,
                    float* scores) {
  ScoresImpl(q, d, k_t, rows, keys, scores);
}
void AccumulateBaseline(const float* p, int64_t rows, int64_t keys, const float* v,
                        int64_t v_stride, const float* correction, float* acc) {
  AccumulateImpl(p, rows, keys, v, v_stride, correction, acc);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void ScoresAvx2(const float* q, int d, const float* k_t, int64_t rows,
                                            int64_t keys, float* scores) {
  ScoresImpl(q, d, k_t, rows, keys, scores);
}
[[gnu::target("avx2,fma")]] void AccumulateAvx2(const float* p, int64_t rows, int64_t keys,
                                                const float* v, int64_t v_stride,
                                                const float* correction, float* acc) {
  AccumulateImpl(p, rows, keys, v, v_stride, correction, acc);
}
#endif

// AVX2 with fused multiply-adds where the CPU has them (as a GPU's float32
// units fuse), the baseline's separate rounding otherwise: the last bits of
// an output may differ between the two machines, never its bound.
TileProducts PickTileProducts() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {&ScoresAvx2, &AccumulateAvx2};
  }
#endif
  return {&ScoresBaseline, &AccumulateBaseline};
}

// The strides a launch reads with: the given ones, or dense ones for the
// kIgnoresStrides mutant.
struct Strides {
  int64_t q_token, q_head, k_token, k_head, v_token, v_head;
};

Strides StridesFor(const VarlenAttentionParams& p, FlashBug bug) {
  if (bug != FlashBug::kIgnoresStrides) {
    return {p.q_token_stride, p.q_head_stride,  p.k_token_stride,
            p.k_head_stride,  p.v_token_stride, p.v_head_stride};
  }
  return {int64_t{p.num_heads_q} * p.head_dim_qk,  p.head_dim_qk,
          int64_t{p.num_heads_kv} * p.head_dim_qk, p.head_dim_qk,
          int64_t{p.num_heads_kv} * p.head_dim_v,  p.head_dim_v};
}

// Keys a mutant that reads past its sequence may read without leaving the
// buffers (a GPU kernel would read foreign memory; here that is kept inside
// the allocation so the bug shows in the numbers, not as a crash).
int64_t KeysInsideBuffers(const VarlenAttentionParams& p, const Strides& s, int64_t k_base,
                          int64_t v_base, int64_t keys) {
  const int64_t k_room = (p.k_numel - p.head_dim_qk - k_base) / s.k_token + 1;
  const int64_t v_room = (p.v_numel - p.head_dim_v - v_base) / s.v_token + 1;
  return std::max<int64_t>(0, std::min({keys, k_room, v_room}));
}

// `value` rounded to `dtype` toward zero: the kRoundsOutputTowardZero mutant.
double TowardZero(double value, DType dtype) {
  const double nearest = RoundToDType(value, dtype);
  if (!std::isfinite(value) || std::fabs(nearest) <= std::fabs(value)) return nearest;
  switch (dtype) {
    case DType::kFloat16:
      return Float16BitsToDouble(static_cast<uint16_t>(DoubleToFloat16Bits(nearest) - 1));
    case DType::kBFloat16:
      return BFloat16BitsToDouble(static_cast<uint16_t>(DoubleToBFloat16Bits(nearest) - 1));
    case DType::kFloat32:
      return std::nextafter(static_cast<float>(nearest), 0.0f);
    default:
      return std::nextafter(nearest, 0.0);
  }
}

template <typename In, typename Out>
void RunTile(const VarlenAttentionParams& p, const WorkItem& w, FlashBug bug,
             const TileProducts& products, Scratch& s) {
  const SequenceView view = SequenceAt(p, w.sequence);
  const Strides st = StridesFor(p, bug);
  int64_t rows = std::min<int64_t>(kFlashTileRows, view.rows - w.first_row);
  if (bug == FlashBug::kSkipsLastRowOfPartialTile && rows < kFlashTileRows) --rows;
  const int kv_head =
      bug == FlashBug::kGqaHeadModulo ? w.head % p.num_heads_kv : KvHeadFor(p, w.head);
  const int d = p.head_dim_qk, dv = p.head_dim_v;
  const int64_t vs = s.v_stride;
  float scale = static_cast<float>(p.softmax_scale);
  if (bug == FlashBug::kScaleFromValueHeadDim) scale = 1.0f / std::sqrt(static_cast<float>(dv));
  if (bug == FlashBug::kScaleInInputDType) scale = RoundFloatTo<In>(scale);
  const auto exp = [bug](float x) {
    return bug == FlashBug::kExp2WithoutLog2e ? std::exp2(x) : std::exp(x);
  };

  const int64_t q_base = view.q_offset + w.first_row * st.q_token + w.head * st.q_head;
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < d; ++i) s.q[r * d + i] = LoadAsFloat<In>(p.q, q_base + r * st.q_token + i);
  }
  std::fill_n(s.row_max.begin(), std::max<int64_t>(rows, 0), kNegativeInfinity);
  std::fill_n(s.row_sum.begin(), std::max<int64_t>(rows, 0), 0.0f);
  std::fill_n(s.acc.begin(), std::max<int64_t>(rows, 0) * vs, 0.0f);

  int64_t k_offset = view.k_offset, v_offset = view.v_offset, sequence_keys = view.keys;
  if (bug == FlashBug::kStaleKeyOffsets) {
    const SequenceView first = SequenceAt(p, 0);
    k_offset = first.k_offset, v_offset = first.v_offset;
  }
  if (bug == FlashBug::kQueryOffsetsForKeys) k_offset = v_offset = view.q_offset;
  if (bug == FlashBug::kKeyOffsetsFromLengths) {
    int64_t packed = 0;
    for (int b = 0; b < w.sequence; ++b) packed += p.seqlen_k[b];
    k_offset = packed * st.k_token, v_offset = packed * st.v_token;
  }
  const int64_t k_base = k_offset + kv_head * st.k_head;
  const int64_t v_base = v_offset + kv_head * st.v_head;
  if (bug == FlashBug::kReadsOneKeyPastTheSequence) ++sequence_keys;
  if (bug == FlashBug::kKeysCappedAt128) sequence_keys = std::min<int64_t>(sequence_keys, 128);
  if (bug == FlashBug::kKeysCappedAt1024)
    sequence_keys = std::min<int64_t>(sequence_keys, kMutantKeyCap);
  if (bug != FlashBug::kNone)
    sequence_keys = KeysInsideBuffers(p, st, k_base, v_base, sequence_keys);
  const bool split_kv =
      bug == FlashBug::kSplitKvMergeWithoutRescale && sequence_keys > 2 * kMutantSplitKeys;
  // A window: each row's keys, and only the tiles some row of the item
  // attends (rows are in order, so their ranges move right).
  const bool windowed =
      (p.window_left >= 0 || p.window_right >= 0) && bug != FlashBug::kIgnoresWindow;
  int64_t keys_from = 0, keys_to = sequence_keys;
  if (windowed) {
    keys_from = sequence_keys, keys_to = 0;
    for (int64_t r = 0; r < rows; ++r) {
      KeyRange range = KeysOfRow(p, w.sequence, view, w.first_row + r);
      if (bug == FlashBug::kWindowRightExclusive)
        range.last = std::max(range.first, range.last - 1);
      s.keys[r] = range;
      if (range.first < range.last) {
        keys_from = std::min(keys_from, range.first);
        keys_to = std::max(keys_to, range.last);
      }
    }
    keys_from -= keys_from % kFlashTileKeys;
  }
  // Each split starts a fresh online softmax; the finished ones are summed
  // as they are, which is right only if every split has the same maximum.
  const auto merge_split = [&] {
    for (int64_t r = 0; r < rows; ++r) {
      s.merged_sum[r] += s.row_sum[r];
      for (int j = 0; j < dv; ++j) s.merged_acc[r * vs + j] += s.acc[r * vs + j];
      s.row_max[r] = kNegativeInfinity;
      s.row_sum[r] = 0.0f;
      std::fill_n(&s.acc[r * vs], dv, 0.0f);
    }
  };
  if (split_kv) {
    std::fill_n(s.merged_sum.begin(), std::max<int64_t>(rows, 0), 0.0f);
    std::fill_n(s.merged_acc.begin(), std::max<int64_t>(rows, 0) * vs, 0.0f);
  }

  for (int64_t first_key = keys_from; first_key < keys_to; first_key += kFlashTileKeys) {
    if (split_kv && first_key > 0 && first_key % kMutantSplitKeys == 0) merge_split();
    int64_t keys = std::min<int64_t>(kFlashTileKeys, sequence_keys - first_key);
    if (bug == FlashBug::kDropsLastKeyOfPartialTile && keys < kFlashTileKeys) --keys;
    for (int64_t c = 0; c < keys; ++c) {
      const int64_t k_row = k_base + (first_key + c) * st.k_token;
      const int64_t v_row = v_base + (first_key + c) * st.v_token;
      for (int i = 0; i < d; ++i) s.k_t[i * kFlashTileKeys + c] = LoadAsFloat<In>(p.k, k_row + i);
      for (int j = 0; j < dv; ++j) s.v[c * vs + j] = LoadAsFloat<In>(p.v, v_row + j);
    }
    // S = Q K^T, accumulated in float32.
    if (rows > 0) products.scores(s.q.data(), d, s.k_t.data(), rows, keys, s.scores.data());
    // Online softmax: rescale what was accumulated when the maximum grows.
    // Row r's keys in this tile, [lo, hi); the others are masked out.
    const auto tile_keys = [&](int64_t r) -> KeyRange {
      if (!windowed) return {0, keys};
      const int64_t lo = std::clamp<int64_t>(s.keys[r].first - first_key, 0, keys);
      return {lo, std::clamp<int64_t>(s.keys[r].last - first_key, lo, keys)};
    };
    bool partial_rows = false;
    for (int64_t r = 0; r < rows; ++r) {
      float* score = &s.scores[r * kFlashTileKeys];
      const auto [lo, hi] = tile_keys(r);
      partial_rows |= lo > 0 || hi < keys;
      float tile_max = kNegativeInfinity;
      for (int64_t c = 0; c < keys; ++c) {
        score[c] *= scale;
        if (bug == FlashBug::kScoresInInputDType) score[c] = RoundFloatTo<In>(score[c]);
        if (bug == FlashBug::kCausalMask && first_key + c > w.first_row + r) {
          score[c] = kNegativeInfinity;
        }
        if (c >= lo && c < hi) tile_max = std::max(tile_max, score[c]);
      }
      float new_max = std::max(s.row_max[r], tile_max);
      if (bug == FlashBug::kTileMaxNotRunningMax) new_max = tile_max;
      if (bug == FlashBug::kNoMaxSubtraction) new_max = 0.0f;
      // Both -inf only if every logit so far is -inf: nothing to rescale.
      const float correction = new_max == kNegativeInfinity ? 1.0f : exp(s.row_max[r] - new_max);
      // The row's probabilities, a vector at a time (glibc's expf bits).
      if (bug == FlashBug::kExp2WithoutLog2e) {
        for (int64_t c = lo; c < hi; ++c) score[c] = exp(score[c] - new_max);
      } else if (hi > lo) {
        ShiftedExpFloat(score + lo, hi - lo, new_max);
      }
      float sum = 0.0f;
      for (int64_t c = 0; c < keys; ++c) {
        const float probability = c >= lo && c < hi ? score[c] : 0.0f;
        sum += probability;
        score[c] = RoundFloatTo<In>(probability);  // P in the input dtype before P V
      }
      s.correction[r] = bug == FlashBug::kNoAccumulatorRescale ? 1.0f : correction;
      s.row_sum[r] =
          (bug == FlashBug::kNoRowSumRescale ? s.row_sum[r] : s.row_sum[r] * correction) + sum;
      s.row_max[r] = new_max;
    }
    // O += P V, accumulated in float32 (or, for the mutant, in float16).
    if (bug == FlashBug::kAccumulatesInHalf) {
      for (int64_t r = 0; r < rows; ++r) {
        float* acc = &s.acc[r * vs];
        for (int j = 0; j < dv; ++j) acc[j] *= s.correction[r];
        for (int64_t c = 0; c < keys; ++c) {
          const float probability = s.scores[r * kFlashTileKeys + c];
          for (int j = 0; j < dv; ++j)
            acc[j] = RoundFloatTo<kernels::Float16>(acc[j] + probability * s.v[c * vs + j]);
        }
      }
    } else if (partial_rows) {
      // Each row's own keys only: a masked key's value (NaN, say) must not
      // reach the row through a zero weight.
      for (int64_t r = 0; r < rows; ++r) {
        const auto [lo, hi] = tile_keys(r);
        float* acc = &s.acc[r * vs];
        for (int j = 0; j < dv; ++j) acc[j] *= s.correction[r];
        for (int64_t c = lo; c < hi; ++c) {
          const float probability = s.scores[r * kFlashTileKeys + c];
          for (int j = 0; j < dv; ++j) acc[j] += probability * s.v[c * vs + j];
        }
      }
    } else if (rows > 0) {
      products.accumulate(s.scores.data(), rows, keys, s.v.data(), vs, s.correction.data(),
                          s.acc.data());
    }
    if (bug == FlashBug::kFirstKeyTileOnly) break;
  }
  if (split_kv) {
    merge_split();
    std::swap(s.row_sum, s.merged_sum);
    std::swap(s.acc, s.merged_acc);
  }

  const int64_t o_base = view.o_offset + w.first_row * p.o_token_stride + w.head * p.o_head_stride;
  const int written = bug == FlashBug::kAssumesValueHeadDimEqualsQk ? std::min(d, dv) : dv;
  const bool sinks = p.sinks != nullptr && bug != FlashBug::kIgnoresSinks;
  for (int64_t r = 0; r < rows; ++r) {
    const bool attends_none = windowed ? s.keys[r].first >= s.keys[r].last : view.keys == 0;
    // A sink joins the denominator at the end, against the row's maximum:
    // the output is acc * factor / (row_sum * factor + exp(sink - max)).
    float factor = 1.0f, denominator = s.row_sum[r];
    if (sinks) {
      const float sink = p.sinks[w.head], row_max = s.row_max[r];
      if (sink > row_max) {
        factor = row_max == kNegativeInfinity ? 0.0f : std::exp(row_max - sink);
        denominator = denominator * factor + 1.0f;
      } else {
        denominator += std::exp(sink - row_max);
      }
    }
    for (int j = 0; j < written; ++j) {
      double value = attends_none ? 0.0 : s.acc[r * vs + j] * factor / denominator;
      if (bug == FlashBug::kRoundsOutputTowardZero) value = TowardZero(value, p.output_dtype);
      if (bug == FlashBug::kNanToZero && std::isnan(value)) value = 0.0;
      StoreFromDouble<Out>(p.o, o_base + r * p.o_token_stride + j, value);
    }
  }
}

template <typename In, typename Out>
void RunAll(const VarlenAttentionParams& p, const std::vector<WorkItem>& items, int threads,
            FlashBug bug) {
  std::atomic<size_t> next{0};
  const TileProducts products = PickTileProducts();
  auto worker = [&] {
    Scratch s;
    s.v_stride = PaddedToBlock(p.head_dim_v);
    s.q.resize(static_cast<size_t>(kFlashTileRows) * p.head_dim_qk);
    s.k_t.resize(static_cast<size_t>(p.head_dim_qk) * kFlashTileKeys);
    s.v.resize(static_cast<size_t>(kFlashTileKeys) * s.v_stride);
    s.scores.resize(static_cast<size_t>(kFlashTileRows) * kFlashTileKeys);
    s.row_max.resize(kFlashTileRows);
    s.row_sum.resize(kFlashTileRows);
    s.correction.resize(kFlashTileRows);
    s.acc.resize(static_cast<size_t>(kFlashTileRows) * s.v_stride);
    s.keys.resize(kFlashTileRows);
    if (bug == FlashBug::kSplitKvMergeWithoutRescale) {
      s.merged_sum.resize(s.row_sum.size());
      s.merged_acc.resize(s.acc.size());
    }
    for (size_t i = next++; i < items.size(); i = next++)
      RunTile<In, Out>(p, items[i], bug, products, s);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

BackendCapabilities FlashCapabilities() {
  return {.input_dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16},
          .max_head_dim = 512,
          .grouped_query_attention = true,
          .distinct_value_head_dim = true,
          .strided_inputs = true,
          .windows = true,
          .sinks = true,
          .device = "cpu"};
}

void FlashAttention(const VarlenAttentionParams& params, int threads, FlashBug bug) {
  std::vector<WorkItem> items;
  const int batch = bug == FlashBug::kDropsLastSequence ? params.batch - 1 : params.batch;
  int non_empty = 0;
  for (int b = 0; b < batch; ++b) {
    const SequenceView view = SequenceAt(params, b);
    const int sequence = bug == FlashBug::kCompactsEmptySequences ? non_empty : b;
    non_empty += view.rows > 0;
    const int64_t rows = bug == FlashBug::kRowsCappedAt4096
                             ? std::min<int64_t>(view.rows, kMutantRowCap)
                             : view.rows;
    for (int h = 0; h < params.num_heads_q; ++h) {
      for (int64_t row = 0; row < rows; row += kFlashTileRows) items.push_back({sequence, h, row});
    }
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<size_t>(threads, std::max<size_t>(items.size(), 1)));
  VARLEN_DISPATCH_FLOAT_TYPES(params.input_dtype, In, [&] {
    VARLEN_DISPATCH_FLOAT_TYPES(params.output_dtype, Out,
                                [&] { RunAll<In, Out>(params, items, threads, bug); });
  });
}

}  // namespace varlen
