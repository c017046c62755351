#include "varlen/backend/fault.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace varlen {
namespace {

constexpr char kFaultPayload[] = "varlen/fault";
constexpr FaultKind kAllKinds[] = {FaultKind::kCrash,        FaultKind::kTimeout,
                                   FaultKind::kOom,          FaultKind::kVanished,
                                   FaultKind::kWriteOutside, FaultKind::kInputChanged};

}  // namespace

absl::string_view FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kCrash:
      return "CRASH";
    case FaultKind::kTimeout:
      return "TIMEOUT";
    case FaultKind::kOom:
      return "OOM";
    case FaultKind::kVanished:
      return "VANISHED";
    case FaultKind::kWriteOutside:
      return "WRITE_OUTSIDE";
    case FaultKind::kInputChanged:
      return "INPUT_CHANGED";
  }
  return "?";
}

std::optional<FaultKind> ParseFaultKind(absl::string_view name) {
  for (FaultKind kind : kAllKinds) {
    if (FaultKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

std::string DescribeFault(const Fault& fault) {
  std::string text = absl::StrCat(FaultKindName(fault.kind), ": ", fault.summary);
  if (!fault.log_tail.empty()) {
    absl::StrAppend(&text, "\n    the worker's last output:");
    for (absl::string_view line : absl::StrSplit(fault.log_tail, '\n')) {
      absl::StrAppend(&text, "\n    | ", line);
    }
  }
  return text;
}

absl::Status FaultStatus(const Fault& fault) {
  absl::Status status =
      absl::InternalError(absl::StrCat(FaultKindName(fault.kind), ": ", fault.summary));
  // kind, NUL, summary, NUL, log tail: neither of the first two holds a NUL.
  status.SetPayload(kFaultPayload,
                    absl::Cord(absl::StrCat(FaultKindName(fault.kind), std::string(1, '\0'),
                                            fault.summary, std::string(1, '\0'), fault.log_tail)));
  return status;
}

std::optional<Fault> FaultOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kFaultPayload);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('\0', 2));
  if (parts.size() != 3) return std::nullopt;
  const std::optional<FaultKind> kind = ParseFaultKind(parts[0]);
  if (!kind.has_value()) return std::nullopt;
  return Fault{*kind, parts[1], parts[2]};
}

}  // namespace varlen
