#include "varlen/contract/vllm/version.h"

#include <utility>

#include "resolve_internal.h"
#include "varlen/contract/engine.h"

namespace varlen {

absl::string_view VllmVersionName(VllmVersion version) { return EngineVersion(version).name(); }

absl::StatusOr<VllmVersion> ParseVllmVersion(absl::string_view name) {
  absl::StatusOr<EngineVersion> version = EngineVersion::Parse(Engine::kVllm, name);
  if (!version.ok()) return version.status();
  return version->vllm();
}

const EngineModel& VllmModel() {
  // In the order of VllmVersion.
  static constexpr absl::string_view kNames[] = {"0.33.0"};
  static const EngineModel kModel = {.engine = Engine::kVllm,
                                     .name = "vllm",
                                     .title = "vLLM",
                                     .versions = kNames,
                                     .aliases = {},
                                     .resolve = &internal::ResolveVllmCall,
                                     .backend_call = &internal::VllmBackendCall,
                                     .default_softmax_scale = &internal::VllmDefaultSoftmaxScale,
                                     .check_platform = &internal::VllmCheckPlatform};
  return kModel;
}

}  // namespace varlen
