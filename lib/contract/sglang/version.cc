#include "varlen/contract/sglang/version.h"

#include <utility>

#include "resolve_internal.h"
#include "varlen/contract/engine.h"

namespace varlen {
namespace {

constexpr SglangBehavior kBehavior0026249 = {
    .xpu_reads_metadata = true,
};

constexpr SglangBehavior kBehavior0_5_23 = {
    .triton_moves_derived_seq_lens = true,
    .layer_passes_strided_qkv = true,
    .sm103_defaults_to_fa4 = true,
    .xpu_defaults_to_xpu_attn = true,
    .ascend_unpads_padded_items = true,
    .fa4_reads_list = true,
};

}  // namespace

absl::string_view SglangVersionName(SglangVersion version) { return EngineVersion(version).name(); }

absl::StatusOr<SglangVersion> ParseSglangVersion(absl::string_view name) {
  absl::StatusOr<EngineVersion> version = EngineVersion::Parse(Engine::kSglang, name);
  if (!version.ok()) return version.status();
  return version->sglang();
}

const EngineModel& SglangModel() {
  // In the order of SglangVersion.
  static constexpr absl::string_view kNames[] = {"0026249", "0.5.23"};
  static constexpr std::pair<absl::string_view, int> kAliases[] = {
      {"00262495044993539b2740746aaa531e62f377ab", 0}};
  // VisionAMXAttention constructs on a CPU with AMX only.
  static constexpr Profile kHostProfiles[] = {Profile::kAmxAttn};
  static const EngineModel kModel = {.engine = Engine::kSglang,
                                     .name = "sglang",
                                     .title = "SGLang",
                                     .versions = kNames,
                                     .aliases = kAliases,
                                     .resolve = &internal::ResolveSglangCall,
                                     .backend_call = &internal::SglangBackendCall,
                                     .default_softmax_scale = &internal::SglangDefaultSoftmaxScale,
                                     .check_platform = &internal::SglangCheckPlatform,
                                     .host_profiles = kHostProfiles};
  return kModel;
}

const SglangBehavior& BehaviorOf(SglangVersion version) {
  return version == SglangVersion::k0026249 ? kBehavior0026249 : kBehavior0_5_23;
}

}  // namespace varlen
