// The blocked oracle. Its loops are written for the vectorizer: the right
// operand of both products (K^T, V) is packed into panels two vectors wide,
// and a tile of up to 6 rows x one panel stays in vector registers (GCC and
// clang vector types) over the whole depth. Compiled once for AVX2+FMA and
// once for the baseline, chosen at run time.

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/common/elements.h"
#include "reference_attention.h"

namespace varlen {
namespace {

// Rows of a register tile: 6 rows x 2 vectors = 12 accumulators, enough to
// hide the latency of fused multiply-adds among AVX2's 16 registers.
constexpr int kTileRows = 6;

// Columns of a panel: two 32-byte vectors of T.
template <typename T>
constexpr int64_t kPanel = 64 / sizeof(T);

template <typename T>
constexpr int64_t PaddedToPanels(int64_t n) {
  return (n + kPanel<T> - 1) / kPanel<T> * kPanel<T>;
}

// c[r][0..kPanel) = sum_i a[r][i] * panel[i][0..kPanel) for `Rows` rows of
// `a` (row stride lda): one register tile over the whole depth.
template <typename T, int Rows>
[[gnu::always_inline]] inline void PanelTile(const T* a, int64_t lda, const T* panel, int64_t depth,
                                             T* c, int64_t ldc) {
  typedef T Vec __attribute__((vector_size(32)));
  // An unaligned view of 32 bytes of T (loads straight into a register; a
  // memcpy through the stack would stall on store forwarding).
  typedef T UnalignedVec __attribute__((vector_size(32), aligned(alignof(T)), may_alias));
  constexpr int64_t kLanes = 32 / sizeof(T);
  Vec acc[Rows][2] = {};
  for (int64_t i = 0; i < depth; ++i) {
    const Vec b0 = *reinterpret_cast<const UnalignedVec*>(panel + i * kPanel<T>);
    const Vec b1 = *reinterpret_cast<const UnalignedVec*>(panel + i * kPanel<T> + kLanes);
    for (int r = 0; r < Rows; ++r) {
      const T ar = a[r * lda + i];
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  for (int r = 0; r < Rows; ++r) {
    *reinterpret_cast<UnalignedVec*>(c + r * ldc) = acc[r][0];
    *reinterpret_cast<UnalignedVec*>(c + r * ldc + kLanes) = acc[r][1];
  }
}

// c[r][j] = sum_i a[r][i] * b[i][j] for up to kTileRows rows of `a`, where
// b (depth x n) is packed as panels [n / kPanel][depth][kPanel] and n is a
// multiple of kPanel: the one product both Q K^T and P V run on.
template <typename T>
[[gnu::always_inline]] inline void GemmPanels(const T* a, int64_t lda, int rows, const T* panels,
                                              int64_t depth, int64_t n, T* c, int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += kPanel<T>) {
    const T* panel = panels + j0 * depth;
    switch (rows) {
      case 1:
        PanelTile<T, 1>(a, lda, panel, depth, c + j0, ldc);
        break;
      case 2:
        PanelTile<T, 2>(a, lda, panel, depth, c + j0, ldc);
        break;
      case 3:
        PanelTile<T, 3>(a, lda, panel, depth, c + j0, ldc);
        break;
      case 4:
        PanelTile<T, 4>(a, lda, panel, depth, c + j0, ldc);
        break;
      case 5:
        PanelTile<T, 5>(a, lda, panel, depth, c + j0, ldc);
        break;
      default:
        PanelTile<T, kTileRows>(a, lda, panel, depth, c + j0, ldc);
        break;
    }
  }
}

using GemmFn = void (*)(const void*, int64_t, int, const void*, int64_t, int64_t, void*, int64_t);

template <typename T>
void GemmBaseline(const void* a, int64_t lda, int rows, const void* panels, int64_t depth,
                  int64_t n, void* c, int64_t ldc) {
  GemmPanels(static_cast<const T*>(a), lda, rows, static_cast<const T*>(panels), depth, n,
             static_cast<T*>(c), ldc);
}

#if defined(__x86_64__)
template <typename T>
[[gnu::target("avx2,fma")]] void GemmAvx2(const void* a, int64_t lda, int rows, const void* panels,
                                          int64_t depth, int64_t n, void* c, int64_t ldc) {
  GemmPanels(static_cast<const T*>(a), lda, rows, static_cast<const T*>(panels), depth, n,
             static_cast<T*>(c), ldc);
}
#endif

template <typename T>
GemmFn PickGemm() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &GemmAvx2<T>;
#endif
  return &GemmBaseline<T>;
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
    const auto outside = (v < -708.0) | (v > 709.0) | (v != v);
    for (int lane = 0; lane < kLanes; ++lane) {
      if (outside[lane]) y[lane] = std::exp(v[lane]);
    }
    *reinterpret_cast<UnalignedVec*>(x + i) = y;
  }
  for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

typedef double Double4 __attribute__((vector_size(32)));
using ExpFn = void (*)(double*, int64_t, double);

void ShiftedExpBaseline(double* x, int64_t n, double shift) {
  ShiftedExpLanes<Double4>(x, n, shift);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void ShiftedExpAvx2(double* x, int64_t n, double shift) {
  ShiftedExpLanes<Double4>(x, n, shift);
}
#endif

ExpFn PickShiftedExp() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &ShiftedExpAvx2;
#endif
  return &ShiftedExpBaseline;
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

struct Item {
  int sequence;
  int head;
};

// For one query row: the largest over its output columns of
// sum_c p_c |v_cj - o_j| size_c, where p (unnormalized, divided by
// `denominator`) are its probabilities, size_c = |scale| sum_i |q_i k_ci|
// its logits' absolute sums (`abs_scores`, unscaled), o its output and v
// packed as in AttendHead. Non-finite columns do not count: the judge sees
// those by kind.
double LogitSizeWeightedSpread(const double* probabilities, const double* abs_scores, double scale,
                               double denominator, const double* v_panels, const double* out,
                               int64_t keys, int64_t dv) {
  constexpr int64_t kWidth = kPanel<double>;
  const double weight_scale = std::fabs(scale) / denominator;
  double worst = 0;
  for (int64_t j0 = 0; j0 < dv; j0 += kWidth) {
    double o[kWidth], spread[kWidth] = {};
    for (int64_t jj = 0; jj < kWidth; ++jj) o[jj] = out[j0 + jj] / denominator;
    const double* panel = v_panels + j0 * keys;
    for (int64_t c = 0; c < keys; ++c) {
      const double weight = weight_scale * probabilities[c] * abs_scores[c];
      for (int64_t jj = 0; jj < kWidth; ++jj) {
        spread[jj] += weight * std::fabs(panel[c * kWidth + jj] - o[jj]);
      }
    }
    for (int64_t jj = 0; jj < kWidth && j0 + jj < dv; ++jj) {
      if (std::isfinite(spread[jj])) worst = std::max(worst, spread[jj]);
    }
  }
  return worst;
}

// One (sequence, head): gather Q, and K^T and V packed as panels (columns
// past the end are zero); then per block of query rows S = Q K^T, softmax
// with the max subtracted, O = P V. Acc is the accumulation type; with
// `round_probabilities` P is rounded to the input dtype before P V. With
// `logit_rounding` (float64 only) also |Q| |K|^T, and the row's effect of
// float32 logit rounding raises *logit_rounding.
template <typename In, typename Out, typename Acc>
void AttendHead(const VarlenAttentionParams& p, const Item& item, bool round_probabilities,
                GemmFn gemm, ExpFn shifted_exp, std::vector<Acc>& scratch, double* logit_rounding) {
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
  const int64_t qk_size = rows * d + d * keys_padded + kTileRows * keys_padded;
  scratch.assign(
      static_cast<size_t>(qk_size * (measure ? 2 : 1) + keys * dv_padded + kTileRows * dv_padded),
      Acc{0});
  Acc* q = scratch.data();                           // [rows][d]
  Acc* k_panels = q + rows * d;                      // [keys_padded / kWidth][d][kWidth]
  Acc* scores = k_panels + d * keys_padded;          // [kTileRows][keys_padded]
  Acc* v_panels = scores + kTileRows * keys_padded;  // [dv_padded / kWidth][keys][kWidth]
  Acc* out = v_panels + keys * dv_padded;            // [kTileRows][dv_padded]
  // The same three for |q|, |k| and |Q| |K|^T, when measuring.
  Acc* abs_q = out + kTileRows * dv_padded;
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
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int block = static_cast<int>(std::min<int64_t>(kTileRows, rows - r0));
    gemm(q + r0 * d, d, block, k_panels, d, keys_padded, scores, keys_padded);
    if (measure)
      gemm(abs_q + r0 * d, d, block, abs_k_panels, d, keys_padded, abs_scores, keys_padded);
    Acc denominator[kTileRows];
    for (int r = 0; r < block; ++r) {
      Acc* row = scores + r * keys_padded;
      const Acc max_score = ScaleAndMax(row, keys, scale);
      if constexpr (std::is_same_v<Acc, double>) {
        shifted_exp(row, keys, max_score);
      } else {
        for (int64_t c = 0; c < keys; ++c) row[c] = std::exp(row[c] - max_score);
      }
      Acc sum = 0;
      for (int64_t c = 0; c < keys; ++c) {
        sum += row[c];
        if (round_probabilities) row[c] = static_cast<Acc>(RoundToDType(row[c], p.input_dtype));
      }
      denominator[r] = sum;
    }
    gemm(scores, keys_padded, block, v_panels, keys, dv_padded, out, dv_padded);
    if constexpr (std::is_same_v<Acc, double>) {
      if (measure) {
        // The logit rounding a float32 kernel's Q K^T carries whatever the
        // order of its sums.
        const double u = UnitRoundoff(DType::kFloat32);
        for (int r = 0; r < block; ++r) {
          *logit_rounding =
              std::max(*logit_rounding, u * LogitSizeWeightedSpread(scores + r * keys_padded,
                                                                    abs_scores + r * keys_padded,
                                                                    scale, denominator[r], v_panels,
                                                                    out + r * dv_padded, keys, dv));
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
               double* logit_rounding) {
  std::vector<Item> items;
  for (int b = 0; b < p.batch; ++b) {
    if (SequenceAt(p, b).rows == 0) continue;
    for (int h = 0; h < p.num_heads_q; ++h) items.push_back({b, h});
  }
  const GemmFn gemm = PickGemm<Acc>();
  const ExpFn shifted_exp = PickShiftedExp();
  std::atomic<size_t> next{0};
  std::mutex merge;
  auto worker = [&] {
    std::vector<Acc> scratch;
    double worst = 0;
    for (size_t i = next++; i < items.size(); i = next++) {
      AttendHead<In, Out, Acc>(p, items[i], round_probabilities, gemm, shifted_exp, scratch,
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

void ShiftedExp(double* x, int64_t n, double shift) {
  static const ExpFn shifted_exp = PickShiftedExp();
  shifted_exp(x, n, shift);
}

void FastReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision,
                            int threads, double* logit_rounding) {
  const bool float64 =
      precision == ReferencePrecision::kFloat64 || params.input_dtype == DType::kFloat64;
  if (logit_rounding != nullptr) *logit_rounding = 0;
  VARLEN_DISPATCH_FLOAT_TYPES(params.input_dtype, In, [&] {
    VARLEN_DISPATCH_FLOAT_TYPES(params.output_dtype, Out, [&] {
      if (float64) {
        AttendAll<In, Out, double>(params, /*round_probabilities=*/false, threads, logit_rounding);
      } else {
        AttendAll<In, Out, float>(params, /*round_probabilities=*/true, threads, nullptr);
      }
    });
  });
}

}  // namespace varlen
