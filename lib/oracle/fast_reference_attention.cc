// The blocked oracle. Its loops are written for the vectorizer: the right
// operand of both products (K^T, V) is packed into panels of 64 bytes, and
// a tile of up to 6 rows (12 with AVX-512) x two vectors stays in vector
// registers (GCC and clang vector types) over a slice of the depth: one
// panel in two 32-byte vectors, or two panels in two 64-byte ones; blocks
// of 24 rows share each column tile while it is in L1. Compiled for
// AVX-512, for AVX2+FMA and for the baseline, chosen at run time; every
// path sums in the same order.

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "varlen/backend/elements.h"
#include "varlen/oracle/reference_attention.h"
#include "vector_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace varlen {
namespace {

// Rows of a register tile: 6 rows x 2 vectors = 12 accumulators, enough to
// hide the latency of fused multiply-adds among AVX2's 16 registers.
constexpr int kTileRows = 6;
// Rows of a block: the rows whose scores are held at once. Each column
// tile of K^T (or V) is read once per block from L2 and then from L1 by
// its register tiles, not once per register tile: with 6 rows the products
// waited on L2 (Intel's cores, which do not forward a store to a load
// without latency, showed it first).
constexpr int kBlockRows = 4 * kTileRows;

// Columns of a panel: 64 bytes of T.
template <typename T>
constexpr int64_t kPanel = 64 / sizeof(T);

template <typename T>
constexpr int64_t PaddedToPanels(int64_t n) {
  return (n + kPanel<T> - 1) / kPanel<T> * kPanel<T>;
}

// c[r][0..2 * lanes) = sum_i a[r][i] * b[i][0..2 * lanes) for `Rows` rows
// of `a` (row stride lda), where row i of b is the vector at b0 + i *
// kPanel followed by the one at b1 + i * kPanel (of `Bytes` bytes each):
// one register tile over `depth` steps, from zero or, with `accumulate`,
// from c's partial sums (stored and loaded exactly: the same bits as one
// pass).
template <typename T, int Rows, int Bytes>
[[gnu::always_inline]] inline void PanelTile(const T* a, int64_t lda, const T* b0, const T* b1,
                                             int64_t depth, bool accumulate, T* c, int64_t ldc) {
  typedef T Vec __attribute__((vector_size(Bytes)));
  // An unaligned view of a vector of T (loads straight into a register; a
  // memcpy through the stack would stall on store forwarding).
  typedef T UnalignedVec __attribute__((vector_size(Bytes), aligned(alignof(T)), may_alias));
  constexpr int64_t kLanes = Bytes / sizeof(T);
  Vec acc[Rows][2] = {};
  if (accumulate) {
    for (int r = 0; r < Rows; ++r) {
      acc[r][0] = *reinterpret_cast<const UnalignedVec*>(c + r * ldc);
      acc[r][1] = *reinterpret_cast<const UnalignedVec*>(c + r * ldc + kLanes);
    }
  }
  for (int64_t i = 0; i < depth; ++i) {
    const Vec v0 = *reinterpret_cast<const UnalignedVec*>(b0 + i * kPanel<T>);
    const Vec v1 = *reinterpret_cast<const UnalignedVec*>(b1 + i * kPanel<T>);
    for (int r = 0; r < Rows; ++r) {
      const T ar = a[r * lda + i];
      acc[r][0] += ar * v0;
      acc[r][1] += ar * v1;
    }
  }
  for (int r = 0; r < Rows; ++r) {
    *reinterpret_cast<UnalignedVec*>(c + r * ldc) = acc[r][0];
    *reinterpret_cast<UnalignedVec*>(c + r * ldc + kLanes) = acc[r][1];
  }
}

// Steps [first, first + steps) of a product whose panels hold `depth` rows.
struct DepthSlice {
  int64_t depth, first, steps;
  bool accumulate() const { return first > 0; }
};

// The tile over the columns [j0, j0 + 2 * lanes) and the slice's steps:
// half a panel as two 16-byte vectors, one panel as two 32-byte halves, or
// two panels as two 64-byte vectors.
template <typename T, int Rows, int Bytes>
[[gnu::always_inline]] inline void ColumnTile(const T* a, int64_t lda, const T* panels,
                                              DepthSlice slice, int64_t j0, T* c, int64_t ldc) {
  const T* first =
      panels + (j0 / kPanel<T>)*kPanel<T> * slice.depth + slice.first * kPanel<T> + j0 % kPanel<T>;
  const T* second = Bytes < 64 ? first + Bytes / sizeof(T) : first + kPanel<T> * slice.depth;
  PanelTile<T, Rows, Bytes>(a + slice.first, lda, first, second, slice.steps, slice.accumulate(),
                            c + j0, ldc);
}

// Rows of a register tile of `Bytes`-byte vectors: 2 x 6 accumulators
// among AVX2's (and SSE2's) 16 registers, 2 x 12 among AVX-512's 32 (twice
// the multiply-adds per load of `a`).
constexpr int TileRows(int bytes) { return bytes == 64 ? 2 * kTileRows : kTileRows; }

// The tile of `rows` rows (at most Rows), its row count a constant.
template <typename T, int Bytes, int Rows = TileRows(Bytes)>
[[gnu::always_inline]] inline void ColumnTileOfRows(const T* a, int64_t lda, int rows,
                                                    const T* panels, DepthSlice slice, int64_t j0,
                                                    T* c, int64_t ldc) {
  if constexpr (Rows > 1) {
    if (rows < Rows) {
      return ColumnTileOfRows<T, Bytes, Rows - 1>(a, lda, rows, panels, slice, j0, c, ldc);
    }
  }
  ColumnTile<T, Rows, Bytes>(a, lda, panels, slice, j0, c, ldc);
}

// Steps of a depth slice: its rows of two panels (2 x 128 x 64 bytes) and
// of a block's `a` (24 x 128 x 8 bytes) fit in L1 together. P V's depth is
// the keys, whose panels would otherwise be read from L2 by every register
// tile.
constexpr int64_t kDepthSlice = 128;

// c[r][j] = sum_i a[r][i] * b[i][j] for up to kBlockRows rows of `a`, where
// b (depth x n) is packed as panels [n / kPanel][depth][kPanel] and n is a
// multiple of kPanel: the one product both Q K^T and P V run on. Slices of
// the depth outside, then column tiles, then register tiles of rows, so
// that what a column tile reads stays in L1 while every row of the block
// uses it. With 64-byte vectors, two panels at a time and an odd last one
// in halves. Each element sums its products in depth order, whatever the
// tiling: the bits do not depend on it.
// (The baseline takes SSE2's 16-byte vectors: wider generic vectors there
// are put together through the stack.)
template <typename T, int Bytes>
[[gnu::always_inline]] inline void GemmPanels(const T* a, int64_t lda, int rows, const T* panels,
                                              int64_t depth, int64_t n, T* c, int64_t ldc) {
  constexpr int64_t kColumns = 2 * Bytes / sizeof(T);
  for (int64_t first = 0; first < depth; first += kDepthSlice) {
    const DepthSlice slice{depth, first, std::min(kDepthSlice, depth - first)};
    int64_t j0 = 0;
    for (; j0 + kColumns <= n; j0 += kColumns) {
      constexpr int kRows = TileRows(Bytes);
      for (int r0 = 0; r0 < rows; r0 += kRows) {
        ColumnTileOfRows<T, Bytes>(a + r0 * lda, lda, std::min(kRows, rows - r0), panels, slice, j0,
                                   c + r0 * ldc, ldc);
      }
    }
    if (j0 < n) {
      for (int r0 = 0; r0 < rows; r0 += kTileRows) {
        ColumnTileOfRows<T, 32>(a + r0 * lda, lda, std::min(kTileRows, rows - r0), panels, slice,
                                j0, c + r0 * ldc, ldc);
      }
    }
  }
}

using GemmFn = void (*)(const void*, int64_t, int, const void*, int64_t, int64_t, void*, int64_t);

template <typename T>
void GemmBaseline(const void* a, int64_t lda, int rows, const void* panels, int64_t depth,
                  int64_t n, void* c, int64_t ldc) {
  GemmPanels<T, 16>(static_cast<const T*>(a), lda, rows, static_cast<const T*>(panels), depth, n,
                    static_cast<T*>(c), ldc);
}

#if defined(__x86_64__)
template <typename T>
[[gnu::target("avx2,fma")]] void GemmAvx2(const void* a, int64_t lda, int rows, const void* panels,
                                          int64_t depth, int64_t n, void* c, int64_t ldc) {
  GemmPanels<T, 32>(static_cast<const T*>(a), lda, rows, static_cast<const T*>(panels), depth, n,
                    static_cast<T*>(c), ldc);
}

template <typename T>
[[gnu::target("avx512f,avx512vl,avx2,fma")]] void GemmAvx512(const void* a, int64_t lda, int rows,
                                                             const void* panels, int64_t depth,
                                                             int64_t n, void* c, int64_t ldc) {
  GemmPanels<T, 64>(static_cast<const T*>(a), lda, rows, static_cast<const T*>(panels), depth, n,
                    static_cast<T*>(c), ldc);
}
#endif

// kBest resolved to the fastest path this CPU runs: AVX-512 where its FMAs
// are twice AVX2's (Intel's cores with 512-bit FMA units), otherwise AVX2.
// (On AMD's Zen 4 both reach the same float64 FMA limit, and the 512-bit
// tiles ran slower: docs/measurements.md.)
OracleIsa Resolved(OracleIsa isa) {
  if (isa != OracleIsa::kBest) return isa;
#if defined(__x86_64__)
  if (OracleIsaRuns(OracleIsa::kAvx512) && __builtin_cpu_is("intel")) return OracleIsa::kAvx512;
#endif
  if (OracleIsaRuns(OracleIsa::kAvx2)) return OracleIsa::kAvx2;
  return OracleIsa::kBaseline;
}

template <typename T>
GemmFn PickGemm(OracleIsa isa) {
  switch (Resolved(isa)) {
#if defined(__x86_64__)
    case OracleIsa::kAvx512:
      return &GemmAvx512<T>;
    case OracleIsa::kAvx2:
      return &GemmAvx2<T>;
#endif
    default:
      return &GemmBaseline<T>;
  }
}

// exp(x - shift) of four doubles, where the result is a normal double:
// x - shift = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, the first
// with trailing zeros so that n times it is exact), e^r by its Taylor
// polynomial to degree 13 (remainder below 2^-57 relative), times 2^n made
// from bits. Adding 1.5 * 2^52 rounds to an integer, ties to even, and
// leaves it in the low bits.
// (In place: a vector argument or result by value would change the
// baseline build's calling convention.)
template <typename Vec>
[[gnu::always_inline]] inline void ExpNormalRange(Vec& x) {
  typedef int64_t Bits __attribute__((vector_size(sizeof(Vec))));
  constexpr double kLog2e = 0x1.71547652b82fep0;
  constexpr double kLn2Hi = 0x1.62e42feep-1;
  constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
  constexpr double kShifter = 0x1.8p52;
  const Vec shifted = x * kLog2e + kShifter;
  const Vec n = shifted - kShifter;
  const Vec r = (x - n * kLn2Hi) - n * kLn2Lo;
  // 1/k! for k = 13 down to 0: the coefficients in Horner's order.
  constexpr std::array<double, 14> kInverseFactorials = [] {
    std::array<double, 14> c{};
    double factorial = 1;
    for (int k = 0; k < 14; ++k) {
      c[13 - k] = 1.0 / factorial;
      factorial *= k + 1;
    }
    return c;
  }();
  Vec p = r * kInverseFactorials[0] + kInverseFactorials[1];
  for (int k = 2; k < 14; ++k) p = p * r + kInverseFactorials[k];
  const Bits exponent =
      (__builtin_bit_cast(Bits, shifted) - __builtin_bit_cast(Bits, Vec{} + kShifter) + 1023) << 52;
  x = p * __builtin_bit_cast(Vec, exponent);
}

typedef double Double2 __attribute__((vector_size(16)));
typedef double Double4 __attribute__((vector_size(32)));
typedef double Double8 __attribute__((vector_size(64)));

// Bit i set where lane i of v lies outside [-708, 709] or is NaN: where
// ExpNormalRange does not hold. GCC builds a generic vector's comparison
// lane by lane, a quarter of the exponential's time, hence the compares of
// each instruction set where there is one.
template <typename Vec>
[[gnu::always_inline]] inline unsigned OutsideNormalRange(const Vec& v) {
  unsigned lanes = 0;
  for (int lane = 0; lane < static_cast<int>(sizeof(Vec) / sizeof(double)); ++lane) {
    if (!(v[lane] >= -708.0 && v[lane] <= 709.0)) lanes |= 1u << lane;
  }
  return lanes;
}

#if defined(__x86_64__)
[[gnu::always_inline]] inline unsigned OutsideNormalRange(const Double2& v) {
  const __m128d inside =
      _mm_and_pd(_mm_cmpge_pd(v, _mm_set1_pd(-708.0)), _mm_cmple_pd(v, _mm_set1_pd(709.0)));
  return ~static_cast<unsigned>(_mm_movemask_pd(inside)) & 0x3u;
}

[[gnu::target("avx2,fma")]] inline unsigned OutsideNormalRange(const Double4& v) {
  const __m256d inside = _mm256_and_pd(_mm256_cmp_pd(v, _mm256_set1_pd(-708.0), _CMP_GE_OQ),
                                       _mm256_cmp_pd(v, _mm256_set1_pd(709.0), _CMP_LE_OQ));
  return ~static_cast<unsigned>(_mm256_movemask_pd(inside)) & 0xFu;
}

[[gnu::target("avx512f,avx512vl,avx512dq,avx2,fma")]] inline unsigned OutsideNormalRange(
    const Double8& v) {
  const __mmask8 inside = _mm512_cmp_pd_mask(v, _mm512_set1_pd(-708.0), _CMP_GE_OQ) &
                          _mm512_cmp_pd_mask(v, _mm512_set1_pd(709.0), _CMP_LE_OQ);
  return ~static_cast<unsigned>(inside) & 0xFFu;
}
#endif

template <typename Vec>
[[gnu::always_inline]] inline void ShiftedExpLanes(double* x, int64_t n, double shift) {
  typedef double UnalignedVec __attribute__((vector_size(sizeof(Vec)), aligned(8), may_alias));
  constexpr int kLanes = static_cast<int>(sizeof(Vec) / sizeof(double));
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Vec v = *reinterpret_cast<const UnalignedVec*>(x + i) - shift;
    Vec y = v;
    ExpNormalRange(y);
    // Where 2^n would leave the normal range, and NaN: std::exp.
    if (const unsigned outside = OutsideNormalRange(v); outside != 0) {
      for (int lane = 0; lane < kLanes; ++lane) {
        if (outside >> lane & 1u) y[lane] = std::exp(v[lane]);
      }
    }
    *reinterpret_cast<UnalignedVec*>(x + i) = y;
  }
  for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

using ExpFn = void (*)(double*, int64_t, double);

void ShiftedExpBaseline(double* x, int64_t n, double shift) {
  ShiftedExpLanes<Double2>(x, n, shift);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void ShiftedExpAvx2(double* x, int64_t n, double shift) {
  ShiftedExpLanes<Double4>(x, n, shift);
}

[[gnu::target("avx512f,avx512vl,avx512dq,avx2,fma")]] void ShiftedExpAvx512(double* x, int64_t n,
                                                                            double shift) {
  ShiftedExpLanes<Double8>(x, n, shift);
}
#endif

ExpFn PickShiftedExp(OracleIsa isa) {
  switch (Resolved(isa)) {
#if defined(__x86_64__)
    case OracleIsa::kAvx512:
      return &ShiftedExpAvx512;
    case OracleIsa::kAvx2:
      return &ShiftedExpAvx2;
#endif
    default:
      return &ShiftedExpBaseline;
  }
}

// Scales the row and returns its maximum, in four chains of comparisons
// (one chain waits on each). NaN is skipped in every chain, so the maximum is
// the sequential one's (up to the sign of a zero, which exp(x - max) does not see).
template <typename Acc>
Acc ScaleAndMax(Acc* row, int64_t n, Acc scale) {
  constexpr int kChains = 4;
  Acc max[kChains];
  std::fill_n(max, kChains, -std::numeric_limits<Acc>::infinity());
  int64_t c = 0;
  for (; c + kChains <= n; c += kChains) {
    for (int l = 0; l < kChains; ++l) {
      row[c + l] *= scale;
      max[l] = std::max(max[l], row[c + l]);
    }
  }
  for (; c < n; ++c) {
    row[c] *= scale;
    max[0] = std::max(max[0], row[c]);
  }
  for (int l = 1; l < kChains; ++l) max[0] = std::max(max[0], max[l]);
  return max[0];
}

// The row's sum in four chains (one chain waits on each add), added as
// (0 + 1) + (2 + 3) and then the tail: the float64 oracle's softmax
// denominator.
double RowSum(const double* row, int64_t n) {
  constexpr int kChains = 4;
  double sum[kChains] = {};
  int64_t c = 0;
  for (; c + kChains <= n; c += kChains) {
    for (int l = 0; l < kChains; ++l) sum[l] += row[c + l];
  }
  double total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  for (; c < n; ++c) total += row[c];
  return total;
}

struct Item {
  int sequence;
  int head;
};

// The instruction set's routines, picked once per run.
template <typename Acc>
struct Paths {
  explicit Paths(OracleIsa isa)
      : gemm(PickGemm<Acc>(isa)),
        shifted_exp(PickShiftedExp(isa)),
        shifted_expf(internal::PickShiftedExpFloat(isa)),
        spread(internal::PickLogitSpread(isa)) {}
  GemmFn gemm;
  ExpFn shifted_exp;
  internal::FloatExpFn shifted_expf;
  internal::SpreadFn spread;
};

// One (sequence, head): gather Q, and K^T and V packed as panels (columns
// past the end are zero); then per block of query rows S = Q K^T, softmax
// with the max subtracted, O = P V. Acc is the accumulation type; with
// `round_probabilities` P is rounded to the input dtype before P V. With
// `logit_rounding` (float64 only) also |Q| |K|^T, and the row's effect of
// float32 logit rounding raises *logit_rounding.
template <typename In, typename Out, typename Acc>
void AttendHead(const VarlenAttentionParams& p, const Item& item, bool round_probabilities,
                const Paths<Acc>& paths, std::vector<Acc>& scratch, double* logit_rounding) {
  const SequenceView s = SequenceAt(p, item.sequence);
  const int64_t rows = s.rows, keys = s.keys, d = p.head_dim_qk, dv = p.head_dim_v;
  const int kv_head = KvHeadFor(p, item.head);
  const int64_t o_base = s.o_offset + item.head * p.o_head_stride;
  if (keys == 0) {  // a row with no keys is written as 0
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < dv; ++j) {
        kernels::StoreFromDouble<Out>(p.o, o_base + r * p.o_token_stride + j, 0.0);
      }
    }
    return;
  }
  constexpr int64_t kWidth = kPanel<Acc>;
  const int64_t keys_padded = PaddedToPanels<Acc>(keys), dv_padded = PaddedToPanels<Acc>(dv);
  const bool measure = std::is_same_v<Acc, double> && logit_rounding != nullptr;
  const int64_t qk_size = rows * d + d * keys_padded + kBlockRows * keys_padded;
  scratch.assign(
      static_cast<size_t>(qk_size * (measure ? 2 : 1) + keys * dv_padded + kBlockRows * dv_padded),
      Acc{0});
  Acc* q = scratch.data();                            // [rows][d]
  Acc* k_panels = q + rows * d;                       // [keys_padded / kWidth][d][kWidth]
  Acc* scores = k_panels + d * keys_padded;           // [kBlockRows][keys_padded]
  Acc* v_panels = scores + kBlockRows * keys_padded;  // [dv_padded / kWidth][keys][kWidth]
  Acc* out = v_panels + keys * dv_padded;             // [kBlockRows][dv_padded]
  // The same three for |q|, |k| and |Q| |K|^T, when measuring.
  Acc* abs_q = out + kBlockRows * dv_padded;
  Acc* abs_k_panels = abs_q + rows * d;
  Acc* abs_scores = abs_k_panels + d * keys_padded;
  const auto load = [](const void* base, int64_t index) {
    return static_cast<Acc>(kernels::LoadAsDouble<In>(base, index));
  };
  const int64_t q_base = s.q_offset + item.head * p.q_head_stride;
  const int64_t k_base = s.k_offset + kv_head * p.k_head_stride;
  const int64_t v_base = s.v_offset + kv_head * p.v_head_stride;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < d; ++i) q[r * d + i] = load(p.q, q_base + r * p.q_token_stride + i);
  }
  for (int64_t c = 0; c < keys; ++c) {
    Acc* k_column = k_panels + (c / kWidth) * d * kWidth + c % kWidth;
    for (int64_t i = 0; i < d; ++i)
      k_column[i * kWidth] = load(p.k, k_base + c * p.k_token_stride + i);
    for (int64_t j = 0; j < dv; ++j) {
      v_panels[(j / kWidth) * keys * kWidth + c * kWidth + j % kWidth] =
          load(p.v, v_base + c * p.v_token_stride + j);
    }
  }
  if (measure) {
    for (int64_t i = 0; i < rows * d; ++i) abs_q[i] = std::fabs(q[i]);
    for (int64_t i = 0; i < d * keys_padded; ++i) abs_k_panels[i] = std::fabs(k_panels[i]);
  }
  const Acc scale = static_cast<Acc>(p.softmax_scale);
  const bool windowed = p.window_left >= 0 || p.window_right >= 0;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const int block = static_cast<int>(std::min<int64_t>(kBlockRows, rows - r0));
    paths.gemm(q + r0 * d, d, block, k_panels, d, keys_padded, scores, keys_padded);
    if (measure)
      paths.gemm(abs_q + r0 * d, d, block, abs_k_panels, d, keys_padded, abs_scores, keys_padded);
    Acc denominator[kBlockRows];
    KeyRange ranges[kBlockRows];
    for (int r = 0; r < block; ++r) {
      // The keys the row attends (all of them without a window); the others
      // get probability 0 in P V.
      const KeyRange range = ranges[r] = KeysOfRow(p, item.sequence, s, r0 + r);
      const int64_t first = range.first, n = std::max<int64_t>(range.last - range.first, 0);
      Acc* all = scores + r * keys_padded;
      std::fill(all, all + first, Acc{0});
      std::fill(all + first + n, all + keys, Acc{0});
      Acc* row = all + first;
      Acc max_score = ScaleAndMax(row, n, scale);
      if (p.sinks != nullptr) max_score = std::max(max_score, static_cast<Acc>(p.sinks[item.head]));
      if constexpr (std::is_same_v<Acc, double>) {
        paths.shifted_exp(row, n, max_score);
      } else {
        paths.shifted_expf(row, n, max_score);
      }
      if constexpr (std::is_same_v<Acc, double>) {
        denominator[r] = RowSum(row, n);
      } else {
        // The emulation sums in order, as a plain float32 kernel does.
        Acc sum = 0;
        for (int64_t c = 0; c < n; ++c) sum += row[c];
        denominator[r] = sum;
      }
      if (p.sinks != nullptr) {
        denominator[r] += std::exp(static_cast<Acc>(p.sinks[item.head]) - max_score);
      }
      if (n == 0) denominator[r] = 1;  // no key: the row is written as 0
      if constexpr (!std::is_same_v<Acc, double>) {
        // The input dtype's rounding, inline (RoundToDType's bits).
        if (round_probabilities) {
          for (int64_t c = 0; c < n; ++c) row[c] = kernels::RoundFloatTo<In>(row[c]);
        }
      }
    }
    if (!windowed) {
      paths.gemm(scores, keys_padded, block, v_panels, keys, dv_padded, out, dv_padded);
    } else {
      // Each row's own keys only: a masked key's value (NaN, say) must not
      // reach the row through a zero weight.
      for (int r = 0; r < block; ++r) {
        const Acc* weights = scores + r * keys_padded;
        for (int64_t j = 0; j < dv; ++j) {
          const Acc* panel = v_panels + (j / kWidth) * keys * kWidth + j % kWidth;
          Acc sum = 0;
          for (int64_t c = ranges[r].first; c < ranges[r].last; ++c) {
            sum += weights[c] * panel[c * kWidth];
          }
          out[r * dv_padded + j] = sum;
        }
      }
    }
    if constexpr (std::is_same_v<Acc, double>) {
      if (measure) {
        // The logit rounding a float32 kernel's Q K^T carries whatever the
        // order of its sums.
        const double u = UnitRoundoff(DType::kFloat32);
        for (int r = 0; r < block; ++r) {
          *logit_rounding = std::max(
              *logit_rounding,
              u * paths.spread(scores + r * keys_padded, abs_scores + r * keys_padded, scale,
                               denominator[r], v_panels, out + r * dv_padded, keys, dv));
        }
      }
    }
    for (int r = 0; r < block; ++r) {
      for (int64_t j = 0; j < dv; ++j) {
        kernels::StoreFromDouble<Out>(p.o, o_base + (r0 + r) * p.o_token_stride + j,
                                      static_cast<double>(out[r * dv_padded + j] / denominator[r]));
      }
    }
  }
}

template <typename In, typename Out, typename Acc>
void AttendAll(const VarlenAttentionParams& p, bool round_probabilities, int threads,
               double* logit_rounding, OracleIsa isa) {
  std::vector<Item> items;
  for (int b = 0; b < p.batch; ++b) {
    if (SequenceAt(p, b).rows == 0) continue;
    for (int h = 0; h < p.num_heads_q; ++h) items.push_back({b, h});
  }
  const Paths<Acc> paths(isa);
  std::atomic<size_t> next{0};
  std::mutex merge;
  auto worker = [&] {
    std::vector<Acc> scratch;
    double worst = 0;
    for (size_t i = next++; i < items.size(); i = next++) {
      AttendHead<In, Out, Acc>(p, items[i], round_probabilities, paths, scratch,
                               logit_rounding != nullptr ? &worst : nullptr);
    }
    if (logit_rounding != nullptr) {
      std::lock_guard<std::mutex> lock(merge);
      *logit_rounding = std::max(*logit_rounding, worst);
    }
  };
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<size_t>(threads, std::max<size_t>(items.size(), 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

bool OracleIsaRuns(OracleIsa isa) {
  switch (isa) {
    case OracleIsa::kBest:
    case OracleIsa::kBaseline:
      return true;
#if defined(__x86_64__)
    case OracleIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case OracleIsa::kAvx512:
      return OracleIsaRuns(OracleIsa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
    default:
      return false;
  }
}

const char* OracleIsaName(OracleIsa isa) {
  switch (Resolved(isa)) {
    case OracleIsa::kAvx512:
      return "avx512";
    case OracleIsa::kAvx2:
      return "avx2";
    default:
      return "baseline";
  }
}

void ShiftedExp(double* x, int64_t n, double shift, OracleIsa isa) {
  if (isa == OracleIsa::kBest) {
    static const ExpFn best = PickShiftedExp(OracleIsa::kBest);
    return best(x, n, shift);
  }
  PickShiftedExp(isa)(x, n, shift);
}

void FastReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision,
                            int threads, double* logit_rounding, OracleIsa isa) {
  const bool float64 =
      precision == ReferencePrecision::kFloat64 || params.input_dtype == DType::kFloat64;
  if (logit_rounding != nullptr) *logit_rounding = 0;
  VARLEN_DISPATCH_FLOAT_TYPES(params.input_dtype, In, [&] {
    VARLEN_DISPATCH_FLOAT_TYPES(params.output_dtype, Out, [&] {
      if (float64) {
        AttendAll<In, Out, double>(params, /*round_probabilities=*/false, threads, logit_rounding,
                                   isa);
      } else {
        AttendAll<In, Out, float>(params, /*round_probabilities=*/true, threads, nullptr, isa);
      }
    });
  });
}

}  // namespace varlen
