#include "varlen/backend/params.h"

#include <limits>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"

namespace varlen {
namespace {

// The elements [first, last] a sequence of `count` rows starting at `offset`
// touches over all heads and dims, checked against [0, numel).
absl::Status CheckRange(int b, absl::string_view tensor, int64_t offset, int64_t count,
                        int64_t token_stride, int64_t head_stride, int heads, int dim,
                        int64_t numel) {
  if (count == 0) return absl::OkStatus();
  // 128-bit: offsets and counts come from unvalidated (faithful) arguments.
  const absl::int128 last = static_cast<absl::int128>(offset) +
                            static_cast<absl::int128>(count - 1) * token_stride +
                            static_cast<absl::int128>(heads - 1) * head_stride + dim - 1;
  if (offset < 0 || last >= numel) {
    const std::string end = last < std::numeric_limits<int64_t>::max()
                                ? absl::StrCat(static_cast<int64_t>(last) + 1)
                                : "beyond 2^63";
    return absl::OutOfRangeError(absl::StrCat("sequence ", b, " touches ", tensor, " elements [",
                                              offset, ", ", end, ") outside the buffer of ", numel,
                                              " elements: a GPU kernel would read or write "
                                              "foreign memory or fault"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckKernelBounds(const VarlenAttentionParams& p) {
  for (int b = 0; b < p.batch; ++b) {
    const SequenceView s = SequenceAt(p, b);
    const int64_t keys = s.rows == 0 ? 0 : s.keys;  // no rows, no key reads
    absl::Status status = CheckRange(b, "q", s.q_offset, s.rows, p.q_token_stride, p.q_head_stride,
                                     p.num_heads_q, p.head_dim_qk, p.q_numel);
    if (status.ok()) {
      status = CheckRange(b, "k", s.k_offset, keys, p.k_token_stride, p.k_head_stride,
                          p.num_heads_kv, p.head_dim_qk, p.k_numel);
    }
    if (status.ok()) {
      status = CheckRange(b, "v", s.v_offset, keys, p.v_token_stride, p.v_head_stride,
                          p.num_heads_kv, p.head_dim_v, p.v_numel);
    }
    if (status.ok()) {
      status = CheckRange(b, "o", s.o_offset, s.rows, p.o_token_stride, p.o_head_stride,
                          p.num_heads_q, p.head_dim_v, p.o_numel);
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

bool IsDense(const VarlenAttentionParams& p) {
  return p.q_head_stride == p.head_dim_qk && p.q_token_stride == p.num_heads_q * p.head_dim_qk &&
         p.k_head_stride == p.head_dim_qk && p.k_token_stride == p.num_heads_kv * p.head_dim_qk &&
         p.v_head_stride == p.head_dim_v && p.v_token_stride == p.num_heads_kv * p.head_dim_v;
}

int64_t PackedTokens(const VarlenAttentionParams& p) {
  if (p.q_token_stride <= 0) return 0;
  return (p.q_numel + p.q_token_stride - 1) / p.q_token_stride;
}

}  // namespace varlen
