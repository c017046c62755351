// The blocked oracle. Its loops are written for the vectorizer: fixed-size
// register tiles of 4 rows x 8 columns that GCC and clang keep in vector
// registers, compiled once for AVX2+FMA and once for the baseline, chosen at
// run time.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "kernels/common/elements.h"
#include "reference_attention.h"

namespace varlen {
namespace {

constexpr int kTileRows = 4;
constexpr int kTileCols = 8;

// c[r][j] = sum_i a[r][i] * b[i][j] for a block of up to 4 rows of `a` (row
// stride lda), `b` with row stride ldb, over columns [0, n): the one
// micro-kernel both Q K^T (b = K^T) and P V (b = V) run on. A 4 x 8 tile of
// c stays in vector registers (GCC/clang vector types, 32 bytes: AVX
// registers where compiled for them, pairs of SSE registers otherwise) while
// i runs over the whole depth.
template <typename T>
[[gnu::always_inline]] inline void Gemm4(const T* a, int64_t lda, int rows, const T* b, int64_t ldb,
                                         int64_t depth, int64_t n, T* c, int64_t ldc) {
  typedef T Vec __attribute__((vector_size(32)));
  // An unaligned view of 32 bytes of T (loads straight into a register; a
  // memcpy through the stack would stall on store forwarding).
  typedef T UnalignedVec __attribute__((vector_size(32), aligned(alignof(T)), may_alias));
  constexpr int kLanes = static_cast<int>(32 / sizeof(T));
  constexpr int kVecs = kTileCols / kLanes;
  int64_t j0 = 0;
  if (rows == kTileRows) {
    for (; j0 + kTileCols <= n; j0 += kTileCols) {
      Vec acc[kTileRows][kVecs] = {};
      for (int64_t i = 0; i < depth; ++i) {
        Vec bi[kVecs];
        for (int v = 0; v < kVecs; ++v) {
          bi[v] = *reinterpret_cast<const UnalignedVec*>(b + i * ldb + j0 + v * kLanes);
        }
        for (int r = 0; r < kTileRows; ++r) {
          const T ar = a[r * lda + i];
          for (int v = 0; v < kVecs; ++v) acc[r][v] += ar * bi[v];
        }
      }
      for (int r = 0; r < kTileRows; ++r) {
        for (int v = 0; v < kVecs; ++v) {
          *reinterpret_cast<UnalignedVec*>(c + r * ldc + j0 + v * kLanes) = acc[r][v];
        }
      }
    }
  }
  for (int r = 0; r < rows; ++r) {  // the remainder, column by column
    for (int64_t j = j0; j < n; ++j) {
      T sum = 0;
      for (int64_t i = 0; i < depth; ++i) sum += a[r * lda + i] * b[i * ldb + j];
      c[r * ldc + j] = sum;
    }
  }
}

using GemmFn = void (*)(const void*, int64_t, int, const void*, int64_t, int64_t, int64_t, void*,
                        int64_t);

template <typename T>
void GemmBaseline(const void* a, int64_t lda, int rows, const void* b, int64_t ldb, int64_t depth,
                  int64_t n, void* c, int64_t ldc) {
  Gemm4(static_cast<const T*>(a), lda, rows, static_cast<const T*>(b), ldb, depth, n,
        static_cast<T*>(c), ldc);
}

#if defined(__x86_64__)
template <typename T>
[[gnu::target("avx2,fma")]] void GemmAvx2(const void* a, int64_t lda, int rows, const void* b,
                                          int64_t ldb, int64_t depth, int64_t n, void* c,
                                          int64_t ldc) {
  Gemm4(static_cast<const T*>(a), lda, rows, static_cast<const T*>(b), ldb, depth, n,
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

struct Item {
  int sequence;
  int head;
};

// One (sequence, head): gather, then per block of 4 query rows S = Q K^T,
// softmax with the max subtracted, O = P V. Acc is the accumulation type;
// with `round_probabilities` P is rounded to the input dtype before P V.
template <typename In, typename Out, typename Acc>
void AttendHead(const VarlenAttentionParams& p, const Item& item, bool round_probabilities,
                GemmFn gemm, std::vector<Acc>& scratch) {
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
  scratch.resize(
      static_cast<size_t>(rows * d + d * keys + keys * dv + kTileRows * keys + kTileRows * dv));
  Acc* q = scratch.data();      // [rows][d]
  Acc* k_t = q + rows * d;      // [d][keys]
  Acc* v = k_t + d * keys;      // [keys][dv]
  Acc* scores = v + keys * dv;  // [4][keys]
  Acc* out = scores + kTileRows * keys;
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
    for (int64_t i = 0; i < d; ++i)
      k_t[i * keys + c] = load(p.k, k_base + c * p.k_token_stride + i);
    for (int64_t j = 0; j < dv; ++j) v[c * dv + j] = load(p.v, v_base + c * p.v_token_stride + j);
  }
  const Acc scale = static_cast<Acc>(p.softmax_scale);
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int block = static_cast<int>(std::min<int64_t>(kTileRows, rows - r0));
    gemm(q + r0 * d, d, block, k_t, keys, d, keys, scores, keys);
    Acc denominator[kTileRows];
    for (int r = 0; r < block; ++r) {
      Acc* row = scores + r * keys;
      Acc max_score = -std::numeric_limits<Acc>::infinity();
      for (int64_t c = 0; c < keys; ++c) {
        row[c] *= scale;
        max_score = std::max(max_score, row[c]);
      }
      Acc sum = 0;
      for (int64_t c = 0; c < keys; ++c) {
        row[c] = std::exp(row[c] - max_score);
        sum += row[c];
        if (round_probabilities) row[c] = static_cast<Acc>(RoundToDType(row[c], p.input_dtype));
      }
      denominator[r] = sum;
    }
    gemm(scores, keys, block, v, dv, keys, dv, out, dv);
    for (int r = 0; r < block; ++r) {
      for (int64_t j = 0; j < dv; ++j) {
        kernels::StoreFromDouble<Out>(p.o, o_base + (r0 + r) * p.o_token_stride + j,
                                      static_cast<double>(out[r * dv + j] / denominator[r]));
      }
    }
  }
}

template <typename In, typename Out, typename Acc>
void AttendAll(const VarlenAttentionParams& p, bool round_probabilities, int threads) {
  std::vector<Item> items;
  for (int b = 0; b < p.batch; ++b) {
    if (SequenceAt(p, b).rows == 0) continue;
    for (int h = 0; h < p.num_heads_q; ++h) items.push_back({b, h});
  }
  const GemmFn gemm = PickGemm<Acc>();
  std::atomic<size_t> next{0};
  auto worker = [&] {
    std::vector<Acc> scratch;
    for (size_t i = next++; i < items.size(); i = next++) {
      AttendHead<In, Out, Acc>(p, items[i], round_probabilities, gemm, scratch);
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

void FastReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision,
                            int threads) {
  VARLEN_DISPATCH_FLOAT_TYPES(params.input_dtype, In, [&] {
    VARLEN_DISPATCH_FLOAT_TYPES(params.output_dtype, Out, [&] {
      if (precision == ReferencePrecision::kFloat64 || params.input_dtype == DType::kFloat64) {
        AttendAll<In, Out, double>(params, /*round_probabilities=*/false, threads);
      } else {
        AttendAll<In, Out, float>(params, /*round_probabilities=*/true, threads);
      }
    });
  });
}

}  // namespace varlen
