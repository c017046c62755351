#include "varlen/contract/vllm_version.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varlen {
namespace {

constexpr VllmVersion kVersions[] = {VllmVersion::k0_33_0};

}  // namespace

absl::Span<const VllmVersion> ModelledVllmVersions() { return kVersions; }

absl::string_view VllmVersionName(VllmVersion version) {
  switch (version) {
    case VllmVersion::k0_33_0:
      return "0.33.0";
  }
  return "?";
}

absl::StatusOr<VllmVersion> ParseVllmVersion(absl::string_view name) {
  for (VllmVersion version : kVersions) {
    if (name == VllmVersionName(version)) return version;
  }
  std::vector<std::string> names;
  for (VllmVersion version : kVersions) names.emplace_back(VllmVersionName(version));
  return absl::InvalidArgumentError(absl::StrCat(
      "vLLM version \"", name, "\" is not modelled (modelled: ", absl::StrJoin(names, ", "), ")"));
}

}  // namespace varlen
