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

constexpr std::array<std::pair<Profile, absl::string_view>, 14> kProfiles = {{
    {Profile::kFlashinferCudnn, "flashinfer_cudnn"},
    {Profile::kFa3, "fa3"},
    {Profile::kTritonAttn, "triton_attn"},
    {Profile::kSdpa, "sdpa"},
    {Profile::kFa4, "fa4"},
    {Profile::kAiterAttn, "aiter_attn"},
    {Profile::kAscendAttn, "ascend_attn"},
    {Profile::kAmxAttn, "amx_attn"},
    {Profile::kXpuAttn, "xpu_attn"},
    {Profile::kVllmFlashAttnFa2, "FLASH_ATTN/fa2"},
    {Profile::kVllmFlashAttnFa3, "FLASH_ATTN/fa3"},
    {Profile::kVllmTritonAttn, "TRITON_ATTN"},
    {Profile::kVllmTorchSdpa, "TORCH_SDPA"},
    {Profile::kVllmFlashinfer, "FLASHINFER"},
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

Engine EngineOf(Profile profile) {
  return static_cast<int>(profile) >= static_cast<int>(Profile::kVllmFlashAttnFa2)
             ? Engine::kVllm
             : Engine::kSglang;
}

absl::Span<const Profile> AllProfiles() {
  static const auto* const all = [] {
    auto* profiles = new std::vector<Profile>;
    for (const auto& [profile, name] : kProfiles) profiles->push_back(profile);
    return profiles;
  }();
  return *all;
}

absl::Span<const Profile> ProfilesOf(Engine engine) {
  static const auto* const by_engine = [] {
    auto* profiles = new std::vector<std::vector<Profile>>(AllEngines().size());
    for (const auto& [profile, name] : kProfiles) {
      (*profiles)[static_cast<size_t>(EngineOf(profile))].push_back(profile);
    }
    return profiles;
  }();
  return (*by_engine)[static_cast<size_t>(engine)];
}

absl::string_view ProfileName(Profile profile) { return NameOf(kProfiles, profile); }

std::string QualifiedProfileName(Profile profile) {
  return absl::StrCat(EngineName(EngineOf(profile)), ":", ProfileName(profile));
}

absl::StatusOr<Profile> ParseProfile(absl::string_view name, Engine engine) {
  std::vector<absl::string_view> names;
  for (const auto& [profile, spelled] : kProfiles) {
    if (EngineOf(profile) != engine) continue;
    if (spelled == name) return profile;
    names.push_back(spelled);
  }
  std::string other;
  if (absl::StatusOr<Profile> any = ParseAnyProfile(name); any.ok()) {
    other = absl::StrCat(" (it is ", EngineName(EngineOf(*any)), "'s: name the engine)");
  }
  return absl::InvalidArgumentError(absl::StrCat("profile \"", name, "\" is not one of ",
                                                 EngineName(engine), "'s ",
                                                 absl::StrJoin(names, ", "), other));
}

absl::StatusOr<Profile> ParseAnyProfile(absl::string_view name) {
  for (const auto& [profile, spelled] : kProfiles) {
    if (name == spelled || name == QualifiedProfileName(profile)) return profile;
  }
  std::vector<std::string> names;
  for (const auto& [profile, spelled] : kProfiles) names.push_back(QualifiedProfileName(profile));
  return absl::InvalidArgumentError(
      absl::StrCat("profile \"", name, "\" is not one of ", absl::StrJoin(names, ", ")));
}

absl::string_view ModeName(Mode mode) { return NameOf(kModes, mode); }
absl::StatusOr<Mode> ParseMode(absl::string_view name) { return ParseName(kModes, "mode", name); }
absl::string_view EntryName(Entry entry) { return NameOf(kEntries, entry); }
absl::StatusOr<Entry> ParseEntry(absl::string_view name) {
  return ParseName(kEntries, "entry", name);
}

}  // namespace varlen
