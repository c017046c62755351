#include "varlen/contract/transformers/version.h"

#include "resolve_internal.h"
#include "varlen/contract/engine.h"

namespace varlen {

absl::string_view TransformersVersionName(TransformersVersion version) {
  return EngineVersion(version).name();
}

absl::StatusOr<TransformersVersion> ParseTransformersVersion(absl::string_view name) {
  absl::StatusOr<EngineVersion> version = EngineVersion::Parse(Engine::kTransformers, name);
  if (!version.ok()) return version.status();
  return version->transformers();
}

const TransformersBehavior& BehaviorOf(TransformersVersion version) {
  static constexpr TransformersBehavior k4_57_6 = {.substring_flash_gate = false,
                                                   .caller_max_wins = false,
                                                   .kernel_by_name = false,
                                                   .registers_flash_attention_4 = false,
                                                   .pads_value_to_query_head_dim = false,
                                                   .module_has_kv_groups = false,
                                                   .sdpa_empty_segment_raises = false,
                                                   .tower_takes_precomputed_cu_seqlens = false,
                                                   .tower_windows_from_vision_utils = false,
                                                   .packed_check_before_branches = true,
                                                   .packed_starts_at_min = false,
                                                   .packed_flattens_by_view = true,
                                                   .packed_max_item = true,
                                                   .sdpa_causal_needs_several_queries = false};
  static constexpr TransformersBehavior k5_14_1 = {.substring_flash_gate = true,
                                                   .caller_max_wins = false,
                                                   .kernel_by_name = true,
                                                   .registers_flash_attention_4 = true,
                                                   .pads_value_to_query_head_dim = false,
                                                   .sdpa_empty_segment_raises = false,
                                                   .packed_check_before_branches = true,
                                                   .packed_starts_at_min = false};
  static constexpr TransformersBehavior k5_25_0 = {};
  switch (version) {
    case TransformersVersion::k4_57_6:
      return k4_57_6;
    case TransformersVersion::k5_14_1:
      return k5_14_1;
    case TransformersVersion::k5_25_0:
      return k5_25_0;
  }
  return k5_25_0;
}

const EngineModel& TransformersModel() {
  // In the order of TransformersVersion.
  static constexpr absl::string_view kNames[] = {"4.57.6", "5.14.1", "5.25.0"};
  static const EngineModel kModel = {
      .engine = Engine::kTransformers,
      .name = "transformers",
      .title = "transformers",
      .versions = kNames,
      .aliases = {},
      .resolve = &internal::ResolveTransformersCall,
      .backend_call = &internal::TransformersBackendCall,
      .default_softmax_scale = &internal::TransformersDefaultSoftmaxScale,
      .function_calls = &internal::TransformersFunctionCalls,
      .check_platform = &internal::TransformersCheckPlatform};
  return kModel;
}

}  // namespace varlen
