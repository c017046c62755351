#include "flash_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "kernels/common/elements.h"

namespace varlen {
namespace {

using kernels::LoadAsFloat;
using kernels::RoundFloatTo;
using kernels::StoreFromDouble;

// One thread block of a GPU kernel: a tile of query rows of one head of one
// sequence.
struct WorkItem {
  int sequence;
  int head;
  int64_t first_row;
};

// Per-thread buffers, in float32 like a kernel's shared memory and registers.
struct Scratch {
  std::vector<float> q;        // [rows][d]
  std::vector<float> k_t;      // [d][keys], transposed so rows of scores vectorize
  std::vector<float> v;        // [keys][dv]
  std::vector<float> scores;   // [rows][keys]
  std::vector<float> row_max;  // [rows]
  std::vector<float> row_sum;  // [rows]
  std::vector<float> acc;      // [rows][dv], the unnormalized output
};

template <typename In, typename Out>
void RunTile(const VarlenAttentionParams& p, const WorkItem& w, Scratch& s) {
  const SequenceView view = SequenceAt(p, w.sequence);
  const int64_t rows = std::min<int64_t>(kFlashTileRows, view.rows - w.first_row);
  const int kv_head = KvHeadFor(p, w.head);
  const int d = p.head_dim_qk, dv = p.head_dim_v;
  const float scale = static_cast<float>(p.softmax_scale);

  const int64_t q_base = view.q_offset + w.first_row * p.q_token_stride + w.head * p.q_head_stride;
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < d; ++i) {
      s.q[r * d + i] = LoadAsFloat<In>(p.q, q_base + r * p.q_token_stride + i);
    }
  }
  std::fill_n(s.row_max.begin(), rows, -std::numeric_limits<float>::infinity());
  std::fill_n(s.row_sum.begin(), rows, 0.0f);
  std::fill_n(s.acc.begin(), rows * dv, 0.0f);

  const int64_t k_base = view.k_offset + kv_head * p.k_head_stride;
  const int64_t v_base = view.v_offset + kv_head * p.v_head_stride;
  for (int64_t first_key = 0; first_key < view.keys; first_key += kFlashTileKeys) {
    const int64_t keys = std::min<int64_t>(kFlashTileKeys, view.keys - first_key);
    for (int64_t c = 0; c < keys; ++c) {
      const int64_t k_row = k_base + (first_key + c) * p.k_token_stride;
      const int64_t v_row = v_base + (first_key + c) * p.v_token_stride;
      for (int i = 0; i < d; ++i) {
        s.k_t[i * kFlashTileKeys + c] = LoadAsFloat<In>(p.k, k_row + i);
      }
      for (int j = 0; j < dv; ++j) {
        s.v[c * dv + j] = LoadAsFloat<In>(p.v, v_row + j);
      }
    }
    // S = Q K^T, accumulated in float32.
    for (int64_t r = 0; r < rows; ++r) {
      float* score = &s.scores[r * kFlashTileKeys];
      std::fill_n(score, keys, 0.0f);
      for (int i = 0; i < d; ++i) {
        const float q = s.q[r * d + i];
        const float* k = &s.k_t[i * kFlashTileKeys];
        for (int64_t c = 0; c < keys; ++c) score[c] += q * k[c];
      }
    }
    // Online softmax: rescale what was accumulated when the maximum grows.
    for (int64_t r = 0; r < rows; ++r) {
      float* score = &s.scores[r * kFlashTileKeys];
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < keys; ++c) {
        score[c] *= scale;
        tile_max = std::max(tile_max, score[c]);
      }
      const float new_max = std::max(s.row_max[r], tile_max);
      // Both -inf only if every logit so far is -inf: nothing to rescale.
      const float correction = new_max == -std::numeric_limits<float>::infinity()
                                   ? 1.0f
                                   : std::exp(s.row_max[r] - new_max);
      float sum = 0.0f;
      float* acc = &s.acc[r * dv];
      for (int j = 0; j < dv; ++j) acc[j] *= correction;
      for (int64_t c = 0; c < keys; ++c) {
        const float probability = std::exp(score[c] - new_max);
        sum += probability;
        const float rounded = RoundFloatTo<In>(probability);  // P in the input dtype before P V
        const float* v = &s.v[c * dv];
        for (int j = 0; j < dv; ++j) acc[j] += rounded * v[j];
      }
      s.row_sum[r] = s.row_sum[r] * correction + sum;
      s.row_max[r] = new_max;
    }
  }

  const int64_t o_base = view.o_offset + w.first_row * p.o_token_stride + w.head * p.o_head_stride;
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < dv; ++j) {
      const double value = view.keys == 0 ? 0.0 : s.acc[r * dv + j] / s.row_sum[r];
      StoreFromDouble<Out>(p.o, o_base + r * p.o_token_stride + j, value);
    }
  }
}

template <typename In, typename Out>
void RunAll(const VarlenAttentionParams& p, const std::vector<WorkItem>& items, int threads) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    Scratch s;
    s.q.resize(static_cast<size_t>(kFlashTileRows) * p.head_dim_qk);
    s.k_t.resize(static_cast<size_t>(p.head_dim_qk) * kFlashTileKeys);
    s.v.resize(static_cast<size_t>(kFlashTileKeys) * p.head_dim_v);
    s.scores.resize(static_cast<size_t>(kFlashTileRows) * kFlashTileKeys);
    s.row_max.resize(kFlashTileRows);
    s.row_sum.resize(kFlashTileRows);
    s.acc.resize(static_cast<size_t>(kFlashTileRows) * p.head_dim_v);
    for (size_t i = next++; i < items.size(); i = next++) RunTile<In, Out>(p, items[i], s);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

void FlashAttention(const VarlenAttentionParams& params, int threads) {
  std::vector<WorkItem> items;
  for (int b = 0; b < params.batch; ++b) {
    const SequenceView view = SequenceAt(params, b);
    for (int h = 0; h < params.num_heads_q; ++h) {
      for (int64_t row = 0; row < view.rows; row += kFlashTileRows) items.push_back({b, h, row});
    }
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<size_t>(threads, std::max<size_t>(items.size(), 1)));
  VARLEN_DISPATCH_FLOAT_TYPES(params.input_dtype, In, [&] {
    VARLEN_DISPATCH_FLOAT_TYPES(params.output_dtype, Out,
                                [&] { RunAll<In, Out>(params, items, threads); });
  });
}

}  // namespace varlen
