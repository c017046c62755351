#include "varlen/contract/platform.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace varlen {
namespace {

struct KindName {
  Platform::Kind kind;
  absl::string_view name;
  bool has_capability;
  absl::string_view flag;  // the one flag this kind may carry
};

constexpr KindName kKinds[] = {
    {Platform::Kind::kCuda, "cuda", true, "flash_attn_disable_uneven_k"},
    {Platform::Kind::kMusa, "musa", true, ""},
    {Platform::Kind::kHip, "hip", true, "aiter"},
    {Platform::Kind::kNpu, "npu", false, ""},
    {Platform::Kind::kXpu, "xpu", false, "intel_xpu_backend"},
    {Platform::Kind::kCpu, "cpu", false, "amx"},
    {Platform::Kind::kOther, "other", false, ""},
};

const KindName& KindOf(Platform::Kind kind) {
  for (const KindName& k : kKinds) {
    if (k.kind == kind) return k;
  }
  return kKinds[0];
}

bool HasFlag(const Platform& p) {
  switch (p.kind) {
    case Platform::Kind::kHip:
      return p.use_aiter;
    case Platform::Kind::kXpu:
      return p.intel_xpu_backend;
    case Platform::Kind::kCpu:
      return p.cpu_amx;
    case Platform::Kind::kCuda:
      return p.fa2_disable_uneven_k;
    default:
      return false;
  }
}

absl::Status Invalid(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("platform \"", name, "\": ", why,
                   " (one of cuda:MAJOR.MINOR[+flash_attn_disable_uneven_k], musa:MAJOR.MINOR, "
                   "hip:MAJOR.MINOR[+aiter], npu, xpu[+intel_xpu_backend], cpu[+amx], other)"));
}

}  // namespace

std::string PlatformName(const Platform& p) {
  const KindName& k = KindOf(p.kind);
  std::string name(k.name);
  if (k.has_capability) absl::StrAppend(&name, ":", p.major, ".", p.minor);
  if (HasFlag(p)) absl::StrAppend(&name, "+", k.flag);
  return name;
}

absl::StatusOr<Platform> ParsePlatform(absl::string_view name) {
  const std::vector<absl::string_view> parts = absl::StrSplit(name, '+');
  if (parts.size() > 2) return Invalid(name, "at most one +FLAG");
  const std::vector<absl::string_view> base = absl::StrSplit(parts[0], absl::MaxSplits(':', 1));
  for (const KindName& k : kKinds) {
    if (base[0] != k.name) continue;
    Platform p;
    p.kind = k.kind;
    if (k.has_capability) {
      const std::vector<absl::string_view> version =
          base.size() == 2 ? absl::StrSplit(base[1], '.') : std::vector<absl::string_view>{};
      if (version.size() != 2 || !absl::SimpleAtoi(version[0], &p.major) ||
          !absl::SimpleAtoi(version[1], &p.minor) || p.major < 0 || p.minor < 0) {
        return Invalid(name, absl::StrCat(k.name, " needs its device capability, MAJOR.MINOR"));
      }
    } else if (base.size() == 2) {
      return Invalid(name, absl::StrCat(k.name, " has no device capability"));
    }
    if (parts.size() == 2) {
      if (k.flag.empty() || parts[1] != k.flag) {
        return Invalid(name, k.flag.empty() ? absl::StrCat(k.name, " takes no flag")
                                            : absl::StrCat(k.name, "'s one flag is +", k.flag));
      }
      p.use_aiter = p.kind == Platform::Kind::kHip;
      p.intel_xpu_backend = p.kind == Platform::Kind::kXpu;
      p.cpu_amx = p.kind == Platform::Kind::kCpu;
      p.fa2_disable_uneven_k = p.kind == Platform::Kind::kCuda;
    }
    return p;
  }
  return Invalid(name, "unknown kind");
}

}  // namespace varlen
