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

struct ProfileEntry {
  Profile profile;
  Engine engine;
  absl::string_view name;
};
constexpr std::array<ProfileEntry, 20> kProfiles = {{
    {Profile::kFlashinferCudnn, Engine::kSglang, "flashinfer_cudnn"},
    {Profile::kFa3, Engine::kSglang, "fa3"},
    {Profile::kTritonAttn, Engine::kSglang, "triton_attn"},
    {Profile::kSdpa, Engine::kSglang, "sdpa"},
    {Profile::kFa4, Engine::kSglang, "fa4"},
    {Profile::kAiterAttn, Engine::kSglang, "aiter_attn"},
    {Profile::kAscendAttn, Engine::kSglang, "ascend_attn"},
    {Profile::kAmxAttn, Engine::kSglang, "amx_attn"},
    {Profile::kXpuAttn, Engine::kSglang, "xpu_attn"},
    {Profile::kVllmFlashAttnFa2, Engine::kVllm, "FLASH_ATTN/fa2"},
    {Profile::kVllmFlashAttnFa3, Engine::kVllm, "FLASH_ATTN/fa3"},
    {Profile::kVllmTritonAttn, Engine::kVllm, "TRITON_ATTN"},
    {Profile::kVllmTorchSdpa, Engine::kVllm, "TORCH_SDPA"},
    {Profile::kVllmFlashinfer, Engine::kVllm, "FLASHINFER"},
    {Profile::kTfFlashAttention2, Engine::kTransformers, "flash_attention_2"},
    {Profile::kTfFlashAttention3, Engine::kTransformers, "flash_attention_3"},
    {Profile::kTfFlashAttention4, Engine::kTransformers, "flash_attention_4"},
    {Profile::kTfHubFlashAttn2, Engine::kTransformers, "kernels-community/flash-attn2"},
    {Profile::kTfSdpa, Engine::kTransformers, "sdpa"},
    {Profile::kTfEager, Engine::kTransformers, "eager"},
}};

const ProfileEntry& EntryOf(Profile profile) {
  for (const ProfileEntry& entry : kProfiles) {
    if (entry.profile == profile) return entry;
  }
  return kProfiles[0];
}
constexpr std::array<std::pair<Mode, absl::string_view>, 2> kModes = {{
    {Mode::kFaithful, "faithful"},
    {Mode::kHardened, "hardened"},
}};
constexpr std::array<std::pair<Entry, absl::string_view>, 3> kEntries = {{
    {Entry::kDirect, "direct"},
    {Entry::kLayer, "layer"},
    {Entry::kTower, "tower"},
}};

}  // namespace

Engine EngineOf(Profile profile) { return EntryOf(profile).engine; }

absl::Span<const Profile> AllProfiles() {
  static const auto* const all = [] {
    auto* profiles = new std::vector<Profile>;
    for (const ProfileEntry& entry : kProfiles) profiles->push_back(entry.profile);
    return profiles;
  }();
  return *all;
}

absl::Span<const Profile> ProfilesOf(Engine engine) {
  static const auto* const by_engine = [] {
    auto* profiles = new std::vector<std::vector<Profile>>(AllEngines().size());
    for (const ProfileEntry& entry : kProfiles) {
      (*profiles)[static_cast<size_t>(entry.engine)].push_back(entry.profile);
    }
    return profiles;
  }();
  return (*by_engine)[static_cast<size_t>(engine)];
}

absl::string_view ProfileName(Profile profile) { return EntryOf(profile).name; }

std::string QualifiedProfileName(Profile profile) {
  return absl::StrCat(EngineName(EngineOf(profile)), ":", ProfileName(profile));
}

absl::StatusOr<Profile> ParseProfile(absl::string_view name, Engine engine) {
  std::vector<absl::string_view> names;
  for (const ProfileEntry& entry : kProfiles) {
    if (entry.engine != engine) continue;
    if (entry.name == name) return entry.profile;
    names.push_back(entry.name);
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
  // Qualified names first, then names alone in the table's order (SGLang's
  // first).
  for (const ProfileEntry& entry : kProfiles) {
    if (name == QualifiedProfileName(entry.profile)) return entry.profile;
  }
  for (const ProfileEntry& entry : kProfiles) {
    if (name == entry.name) return entry.profile;
  }
  std::vector<std::string> names;
  for (const ProfileEntry& entry : kProfiles) names.push_back(QualifiedProfileName(entry.profile));
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
