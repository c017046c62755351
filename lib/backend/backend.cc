#include "varlen/backend/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  if ((params.window_left >= 0 || params.window_right >= 0) && !caps.windows) {
    return absl::UnimplementedError(absl::StrCat(name(), " does not compute windowed attention (",
                                                 params.window_left, ", ", params.window_right,
                                                 ")"));
  }
  if (params.sinks != nullptr && !caps.sinks) {
    return absl::UnimplementedError(absl::StrCat(name(), " does not compute attention sinks"));
  }
  const int64_t tokens = PackedTokens(params);
  if (caps.max_tokens > 0 && tokens > caps.max_tokens) {
    return absl::UnimplementedError(
        absl::StrCat(name(), " supports up to ", caps.max_tokens, " tokens, not ", tokens));
  }
  if (caps.max_sequences > 0 && params.batch > caps.max_sequences) {
    return absl::UnimplementedError(absl::StrCat(name(), " supports up to ", caps.max_sequences,
                                                 " sequences, not ", params.batch));
  }
  if (!caps.strided_inputs && !IsDense(params)) {
    return absl::UnimplementedError(absl::StrCat(
        name(),
        " needs dense q, k and v (token stride heads x head_dim, head stride head_dim); "
        "got token strides ",
        params.q_token_stride, "/", params.k_token_stride, "/", params.v_token_stride));
  }
  return absl::OkStatus();
}

absl::StatusOr<EngineCallResult> Backend::CallEngine(const AttentionCall&, Profile) const {
  return absl::UnimplementedError(absl::StrCat(name(),
                                               " is a kernel-level backend: it takes "
                                               "resolved launches, not whole calls"));
}

absl::Status RunSupported(const Backend& backend, const VarlenAttentionParams& params) {
  const absl::Status ran = backend.Run(params);
  if (absl::IsUnimplemented(ran)) {
    return absl::InternalError(
        absl::StrCat("Supports() accepted the call, then Run() answered: ", ran.message()));
  }
  return ran;
}

absl::Status SupportsProfile(const Backend& backend, Profile profile) {
  const std::vector<Profile> profiles = backend.capabilities().profiles;
  if (profiles.empty() || std::find(profiles.begin(), profiles.end(), profile) != profiles.end()) {
    return absl::OkStatus();
  }
  std::vector<absl::string_view> names;
  for (Profile p : profiles) names.push_back(ProfileName(p));
  return absl::UnimplementedError(absl::StrCat(backend.name(), " consumes the kernel arguments of ",
                                               absl::StrJoin(names, ", "), ", not ",
                                               ProfileName(profile)));
}

EngineVersion EngineVersionOfBackend(const Backend& backend, Profile profile) {
  const std::optional<EngineVersion> version = backend.engine_version();
  return version.has_value() && version->engine() == EngineOf(profile)
             ? *version
             : EngineVersion::Latest(EngineOf(profile));
}

}  // namespace varlen
