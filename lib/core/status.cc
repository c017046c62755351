#include "varlen/core/status.h"

#include <array>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varlen {
namespace {

constexpr absl::string_view kPythonKindPayload = "varlen/python-error-kind";

struct KindName {
  PyErrorKind kind;
  absl::string_view name;
  absl::StatusCode code;
};

constexpr std::array<KindName, 12> kKinds = {{
    {PyErrorKind::kRuntimeError, "RuntimeError", absl::StatusCode::kFailedPrecondition},
    {PyErrorKind::kTypeError, "TypeError", absl::StatusCode::kInvalidArgument},
    {PyErrorKind::kValueError, "ValueError", absl::StatusCode::kInvalidArgument},
    {PyErrorKind::kAssertionError, "AssertionError", absl::StatusCode::kFailedPrecondition},
    {PyErrorKind::kAttributeError, "AttributeError", absl::StatusCode::kInvalidArgument},
    {PyErrorKind::kOverflowError, "OverflowError", absl::StatusCode::kOutOfRange},
    {PyErrorKind::kIndexError, "IndexError", absl::StatusCode::kOutOfRange},
    {PyErrorKind::kZeroDivisionError, "ZeroDivisionError", absl::StatusCode::kInvalidArgument},
    {PyErrorKind::kNotImplementedError, "NotImplementedError", absl::StatusCode::kInvalidArgument},
    {PyErrorKind::kException, "Exception", absl::StatusCode::kUnavailable},
    {PyErrorKind::kKeyError, "KeyError", absl::StatusCode::kNotFound},
    {PyErrorKind::kDslRuntimeError, "DSLRuntimeError", absl::StatusCode::kFailedPrecondition},
}};

const KindName& Lookup(PyErrorKind kind) {
  for (const KindName& k : kKinds) {
    if (k.kind == kind) return k;
  }
  return kKinds[0];
}

}  // namespace

absl::string_view PyErrorKindName(PyErrorKind kind) { return Lookup(kind).name; }

std::optional<PyErrorKind> ParsePyErrorKind(absl::string_view name) {
  for (const KindName& k : kKinds) {
    if (k.name == name) return k.kind;
  }
  return std::nullopt;
}

std::string PyErrorKindNames() {
  return absl::StrJoin(kKinds, ", ",
                       [](std::string* out, const KindName& k) { absl::StrAppend(out, k.name); });
}

absl::Status PythonError(PyErrorKind kind, absl::string_view message) {
  const KindName& k = Lookup(kind);
  absl::Status status(k.code, message);
  status.SetPayload(kPythonKindPayload, absl::Cord(k.name));
  return status;
}

std::optional<PyErrorKind> PythonErrorKindOf(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  auto payload = status.GetPayload(kPythonKindPayload);
  if (!payload.has_value()) return std::nullopt;
  return ParsePyErrorKind(std::string(*payload));
}

std::string FormatPythonError(const absl::Status& status) {
  if (status.ok()) return "OK";
  if (std::optional<PyErrorKind> kind = PythonErrorKindOf(status)) {
    // Python prints a bare class name for an exception without a message.
    if (status.message().empty()) return std::string(PyErrorKindName(*kind));
    return absl::StrCat(PyErrorKindName(*kind), ": ", status.message());
  }
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

}  // namespace varlen
