#include "varlen/contract/sglang_version.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varlen {
namespace {

constexpr SglangVersion kVersions[] = {SglangVersion::k0026249, SglangVersion::k0_5_23};

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

absl::Span<const SglangVersion> ModelledSglangVersions() { return kVersions; }

absl::string_view SglangVersionName(SglangVersion version) {
  switch (version) {
    case SglangVersion::k0026249:
      return "0026249";
    case SglangVersion::k0_5_23:
      return "0.5.23";
  }
  return "?";
}

absl::StatusOr<SglangVersion> ParseSglangVersion(absl::string_view name) {
  if (name == "00262495044993539b2740746aaa531e62f377ab") return SglangVersion::k0026249;
  for (SglangVersion version : kVersions) {
    if (name == SglangVersionName(version)) return version;
  }
  std::vector<std::string> names;
  for (SglangVersion version : kVersions) names.emplace_back(SglangVersionName(version));
  return absl::InvalidArgumentError(
      absl::StrCat("SGLang version \"", name,
                   "\" is not modelled (modelled: ", absl::StrJoin(names, ", "), ")"));
}

const SglangBehavior& BehaviorOf(SglangVersion version) {
  return version == SglangVersion::k0026249 ? kBehavior0026249 : kBehavior0_5_23;
}

}  // namespace varlen
