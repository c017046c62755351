#include "sdpa_layout.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace varlen::cudnn_kernels {
namespace {

TensorView4d View(int64_t batch, int heads, int64_t rows, int head_dim, int64_t token_stride,
                  int64_t head_stride) {
  return {{batch, heads, rows, head_dim}, {rows * token_stride, head_stride, token_stride, 1}};
}

// cuDNN's tiles are 16-byte loads and stores.
constexpr int64_t kAlignmentBytes = 16;

}  // namespace

SdpaTensorViews ViewsFor(const SdpaGraphKey& k) {
  return {View(k.batch, k.heads_q, k.max_rows_q, k.head_dim_qk, k.q_token_stride, k.q_head_stride),
          View(k.batch, k.heads_kv, k.max_keys, k.head_dim_qk, k.k_token_stride, k.k_head_stride),
          View(k.batch, k.heads_kv, k.max_keys, k.head_dim_v, k.v_token_stride, k.v_head_stride),
          View(k.batch, k.heads_q, k.max_rows_q, k.head_dim_v, k.o_token_stride, k.o_head_stride)};
}

absl::StatusOr<RaggedArguments> RaggedArgumentsFor(const VarlenAttentionParams& p) {
  RaggedArguments args;
  const size_t batch = static_cast<size_t>(std::max(p.batch, 0));
  for (std::vector<int64_t>* offsets : {&args.q_offsets, &args.k_offsets, &args.v_offsets,
                                        &args.o_offsets, &args.seq_len_q, &args.seq_len_kv}) {
    offsets->reserve(batch + 1);
  }
  int64_t q_end = 0, k_end = 0, v_end = 0, o_end = 0;
  const int64_t element_bytes = static_cast<int64_t>(DTypeSize(p.input_dtype));
  for (int b = 0; b < p.batch; ++b) {
    const SequenceView s = SequenceAt(p, b);
    const struct {
      const char* tensor;
      int64_t offset;
    } starts[] = {{"q", s.q_offset}, {"k", s.k_offset}, {"v", s.v_offset}, {"o", s.o_offset}};
    for (const auto& start : starts) {
      if ((start.offset * element_bytes) % kAlignmentBytes != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", b, ": ", start.tensor, " offset ", start.offset, " elements (",
            start.offset * element_bytes, " bytes) is not a multiple of ", kAlignmentBytes,
            " bytes: cuDNN's ragged SDPA needs 16-byte aligned sequence starts"));
      }
    }
    args.q_offsets.push_back(s.q_offset);
    args.k_offsets.push_back(s.k_offset);
    args.v_offsets.push_back(s.v_offset);
    args.o_offsets.push_back(s.o_offset);
    args.seq_len_q.push_back(s.rows);
    args.seq_len_kv.push_back(s.keys);
    q_end = std::max(q_end, s.q_offset + s.rows * p.q_token_stride);
    o_end = std::max(o_end, s.o_offset + s.rows * p.o_token_stride);
    k_end = std::max(k_end, s.k_offset + s.keys * p.k_token_stride);
    v_end = std::max(v_end, s.v_offset + s.keys * p.v_token_stride);
  }
  args.q_offsets.push_back(q_end);
  args.k_offsets.push_back(k_end);
  args.v_offsets.push_back(v_end);
  args.o_offsets.push_back(o_end);
  return args;
}

std::vector<uint8_t> EncodeIntegers(const std::vector<int64_t>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kInt64) {
      std::memcpy(bytes.data() + 8 * i, &values[i], 8);
    } else {
      const int32_t narrow = static_cast<int32_t>(values[i]);
      std::memcpy(bytes.data() + 4 * i, &narrow, 4);
    }
  }
  return bytes;
}

}  // namespace varlen::cudnn_kernels
