// The key and the cache of built cuDNN SDPA graphs.
//
// A cuDNN graph is built for fixed shapes, dtypes, strides and scale, and a
// built graph is expensive (tens of milliseconds to seconds), so callers
// cache them. FlashInfer's cache keyed its graphs on too few fields, and a
// later call with a different value of a missing field silently replayed a
// graph built for the first call:
//
//   #4014  the softmax scale was not in the key (stale scale);
//   #4146, #4270  strides and the dtype were not in the key (a graph built
//          for one layout or for bfloat16 read another);
//   #4625  the dtype of the sequence-length and offset tensors was baked in
//          (int64 read as int32).
//
// SdpaGraphKey holds everything that changes the graph, and GraphCache
// counts builds and hits so a report can show what was reused. Plain C++:
// tested without cuDNN or a GPU.

#ifndef VARLEN_KERNELS_CUDNN_GRAPH_CACHE_H_
#define VARLEN_KERNELS_CUDNN_GRAPH_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "varlen/backend/params.h"
#include "varlen/core/dtype.h"

namespace varlen::cudnn_kernels {

struct SdpaGraphKey {
  int64_t batch = 0;       // the graph's B (SGLang buckets it)
  int64_t max_rows_q = 0;  // max_token_per_sequence (bucketed): the graph's S_q
  int64_t max_keys = 0;    // max_sequence_kv: the graph's S_kv
  int heads_q = 0, heads_kv = 0, head_dim_qk = 0, head_dim_v = 0;
  DType dtype = DType::kBFloat16;                 // q, k, v and o (#4146, #4270)
  uint64_t scale_bits = 0;                        // the softmax scale, bit for bit (#4014)
  DType offset_dtype = DType::kInt32;             // the ragged offsets (#4625)
  DType seq_len_dtype = DType::kInt32;            // the sequence lengths (#4625)
  int64_t q_token_stride = 0, q_head_stride = 0;  // strides (#4146, #4270)
  int64_t k_token_stride = 0, k_head_stride = 0;
  int64_t v_token_stride = 0, v_head_stride = 0;
  int64_t o_token_stride = 0, o_head_stride = 0;
  int device = 0;  // graphs are built for one device's architecture

  friend bool operator==(const SdpaGraphKey&, const SdpaGraphKey&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const SdpaGraphKey& k) {
    return H::combine(std::move(h), k.batch, k.max_rows_q, k.max_keys, k.heads_q, k.heads_kv,
                      k.head_dim_qk, k.head_dim_v, k.dtype, k.scale_bits, k.offset_dtype,
                      k.seq_len_dtype, k.q_token_stride, k.q_head_stride, k.k_token_stride,
                      k.k_head_stride, k.v_token_stride, k.v_head_stride, k.o_token_stride,
                      k.o_head_stride, k.device);
  }
};

// The key of the graph that runs `params` on `device`. Offsets are int64
// when an element offset of q, k, v or o can reach 2^31 (int32 would wrap),
// int32 otherwise; sequence lengths are int32.
SdpaGraphKey KeyFor(const VarlenAttentionParams& params, int device);

// "B=4 S_q=1024 S_kv=1024 H=16/16 D=80/80 bfloat16 scale=0.111803 offsets=int32 ..."
std::string DescribeKey(const SdpaGraphKey& key);

struct CacheCounters {
  int64_t builds = 0;
  int64_t hits = 0;
};

// Built graphs by key. Thread-safe; a failed build is not cached.
template <typename Graph>
class GraphCache {
 public:
  using Builder = std::function<absl::StatusOr<std::shared_ptr<Graph>>(const SdpaGraphKey&)>;

  explicit GraphCache(Builder build) : build_(std::move(build)) {}

  absl::StatusOr<std::shared_ptr<Graph>> Get(const SdpaGraphKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = graphs_.find(key); it != graphs_.end()) {
      ++counters_.hits;
      return it->second;
    }
    absl::StatusOr<std::shared_ptr<Graph>> built = build_(key);
    if (!built.ok()) return built.status();
    ++counters_.builds;
    graphs_.emplace(key, *built);
    return *built;
  }

  CacheCounters counters() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counters_;
  }

 private:
  Builder build_;
  mutable std::mutex mutex_;
  absl::flat_hash_map<SdpaGraphKey, std::shared_ptr<Graph>> graphs_;
  CacheCounters counters_;
};

}  // namespace varlen::cudnn_kernels

#endif  // VARLEN_KERNELS_CUDNN_GRAPH_CACHE_H_
