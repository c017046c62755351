#include "varlen/backend/fault.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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

std::string FaultSignature(const Fault& fault) {
  std::string signature(FaultKindName(fault.kind));
  if (fault.kind == FaultKind::kCrash) absl::StrAppend(&signature, ": ", fault.summary);
  std::string frame, python_frame, exception;
  for (absl::string_view line : absl::StrSplit(fault.log_tail, '\n', absl::SkipWhitespace())) {
    const absl::string_view text = absl::StripLeadingAsciiWhitespace(line);
    if (frame.empty() && absl::StartsWith(text, "#0 ")) {
      // "#0 0x55d1 in Kernel(...) file.cc:12:3": the function and place,
      // without the address, which moves from build to build.
      const size_t in = text.find(" in ");
      frame = std::string(in == absl::string_view::npos ? text : text.substr(in + 4));
    } else if (absl::StartsWith(text, "File \"")) {
      python_frame = std::string(text);
      exception.clear();
    } else if (!python_frame.empty() && exception.empty()) {
      // "ValueError: ..." after the innermost frame: the type only, its
      // message varies from case to case.
      const absl::string_view type = text.substr(0, text.find(':'));
      if (type.size() < text.size() && type.find(' ') == absl::string_view::npos &&
          (absl::EndsWith(type, "Error") || absl::EndsWith(type, "Exception"))) {
        exception = std::string(type);
      }
    }
  }
  if (frame.empty()) frame = python_frame;
  if (!frame.empty()) absl::StrAppend(&signature, " at ", frame);
  if (!exception.empty()) absl::StrAppend(&signature, " (", exception, ")");
  return signature;
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
