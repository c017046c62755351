#include "varlen/contract/call.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varlen {
namespace {

// Name tables for the small enums; parse errors list every accepted name.
template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseName(const std::array<std::pair<Enum, absl::string_view>, N>& table,
                               absl::string_view what, absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const auto& [value, spelled] : table) {
    if (spelled == name) return value;
    names.push_back(spelled);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " \"", name, "\" is not one of ", absl::StrJoin(names, ", ")));
}

template <typename Enum, size_t N>
absl::string_view NameOf(const std::array<std::pair<Enum, absl::string_view>, N>& table,
                         Enum value) {
  for (const auto& [v, spelled] : table) {
    if (v == value) return spelled;
  }
  return "?";
}

constexpr std::array<std::pair<Profile, absl::string_view>, 9> kProfiles = {{
    {Profile::kFlashinferCudnn, "flashinfer_cudnn"},
    {Profile::kFa3, "fa3"},
    {Profile::kTritonAttn, "triton_attn"},
    {Profile::kSdpa, "sdpa"},
    {Profile::kFa4, "fa4"},
    {Profile::kAiterAttn, "aiter_attn"},
    {Profile::kAscendAttn, "ascend_attn"},
    {Profile::kAmxAttn, "amx_attn"},
    {Profile::kXpuAttn, "xpu_attn"},
}};
constexpr std::array<std::pair<Mode, absl::string_view>, 2> kModes = {{
    {Mode::kFaithful, "faithful"},
    {Mode::kHardened, "hardened"},
}};
constexpr std::array<std::pair<Entry, absl::string_view>, 2> kEntries = {{
    {Entry::kDirect, "direct"},
    {Entry::kLayer, "layer"},
}};

}  // namespace

absl::Span<const Profile> AllProfiles() {
  static const auto* const all = [] {
    auto* profiles = new std::vector<Profile>;
    for (const auto& [profile, name] : kProfiles) profiles->push_back(profile);
    return profiles;
  }();
  return *all;
}

absl::string_view ProfileName(Profile profile) { return NameOf(kProfiles, profile); }
absl::StatusOr<Profile> ParseProfile(absl::string_view name) {
  return ParseName(kProfiles, "profile", name);
}
absl::string_view ModeName(Mode mode) { return NameOf(kModes, mode); }
absl::StatusOr<Mode> ParseMode(absl::string_view name) { return ParseName(kModes, "mode", name); }
absl::string_view EntryName(Entry entry) { return NameOf(kEntries, entry); }
absl::StatusOr<Entry> ParseEntry(absl::string_view name) {
  return ParseName(kEntries, "entry", name);
}

}  // namespace varlen
