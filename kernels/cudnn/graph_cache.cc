#include "graph_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace varlen::cudnn_kernels {

SdpaGraphKey KeyFor(const VarlenAttentionParams& p, int device) {
  SdpaGraphKey key;
  key.batch = p.batch;
  key.max_rows_q = p.max_rows_q;
  key.max_keys = p.max_keys;
  key.heads_q = p.num_heads_q;
  key.heads_kv = p.num_heads_kv;
  key.head_dim_qk = p.head_dim_qk;
  key.head_dim_v = p.head_dim_v;
  key.dtype = p.input_dtype;
  std::memcpy(&key.scale_bits, &p.softmax_scale, sizeof key.scale_bits);
  const int64_t largest = std::max({p.q_numel, p.k_numel, p.v_numel, p.o_numel});
  key.offset_dtype = largest > std::numeric_limits<int32_t>::max() ? DType::kInt64 : DType::kInt32;
  key.seq_len_dtype = DType::kInt32;
  key.q_token_stride = p.q_token_stride, key.q_head_stride = p.q_head_stride;
  key.k_token_stride = p.k_token_stride, key.k_head_stride = p.k_head_stride;
  key.v_token_stride = p.v_token_stride, key.v_head_stride = p.v_head_stride;
  key.o_token_stride = p.o_token_stride, key.o_head_stride = p.o_head_stride;
  key.device = device;
  return key;
}

std::string DescribeKey(const SdpaGraphKey& k) {
  double scale;
  std::memcpy(&scale, &k.scale_bits, sizeof scale);
  return absl::StrCat("B=", k.batch, " S_q=", k.max_rows_q, " S_kv=", k.max_keys, " H=", k.heads_q,
                      "/", k.heads_kv, " D=", k.head_dim_qk, "/", k.head_dim_v, " ",
                      DTypeName(k.dtype), " scale=", scale, " offsets=", DTypeName(k.offset_dtype),
                      " seq_lens=", DTypeName(k.seq_len_dtype), " strides q ", k.q_token_stride,
                      "/", k.q_head_stride, " k ", k.k_token_stride, "/", k.k_head_stride, " v ",
                      k.v_token_stride, "/", k.v_head_stride, " o ", k.o_token_stride, "/",
                      k.o_head_stride, " device ", k.device);
}

}  // namespace varlen::cudnn_kernels
