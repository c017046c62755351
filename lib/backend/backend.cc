#include "varlen/backend/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace varlen {

absl::Status Backend::Supports(const VarlenAttentionParams& params) const {
  const BackendCapabilities caps = capabilities();
  if (std::find(caps.input_dtypes.begin(), caps.input_dtypes.end(), params.input_dtype) ==
      caps.input_dtypes.end()) {
    return absl::UnimplementedError(
        absl::StrCat(name(), " does not support dtype ", DTypeName(params.input_dtype)));
  }
  const int head_dim = std::max(params.head_dim_qk, params.head_dim_v);
  if (head_dim > caps.max_head_dim) {
    return absl::UnimplementedError(
        absl::StrCat(name(), " supports head_dim up to ", caps.max_head_dim, ", not ", head_dim));
  }
  if (params.num_heads_kv != params.num_heads_q && !caps.grouped_query_attention) {
    return absl::UnimplementedError(
        absl::StrCat(name(), " does not support grouped-query attention (", params.num_heads_q,
                     " query heads, ", params.num_heads_kv, " key/value heads)"));
  }
  if (params.head_dim_v != params.head_dim_qk && !caps.distinct_value_head_dim) {
    return absl::UnimplementedError(absl::StrCat(name(), " needs head_dim_v == head_dim (",
                                                 params.head_dim_v, " != ", params.head_dim_qk,
                                                 ")"));
  }
  return absl::OkStatus();
}

}  // namespace varlen
