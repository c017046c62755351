// File: varlen/core/status.h
// -----------------------------------------------------------------------------
//
// varlen reports every failure as an absl::Status. This header adds the two
// things the harness needs on top of Abseil:
//
//   * Python error kinds. Faithful mode reproduces SGLang's exceptions, so a
//     status can carry the Python exception class (RuntimeError, TypeError,
//     ...) as a payload. FormatPythonError() prints it the way Python would
//     ("RuntimeError: sequence_lengths should be prepared ...").
//   * VARLEN_RETURN_IF_ERROR / VARLEN_ASSIGN_OR_RETURN, the usual early-return
//     macros (Debian's Abseil predates the public status macros).
//
// "Not supported" is absl::UnimplementedError and is never a Python error:
// the harness counts it as its own outcome, neither pass nor fail.

#ifndef VARLEN_CORE_STATUS_H_
#define VARLEN_CORE_STATUS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varlen {

// The Python exception classes the engines' resolution code (and torch on
// the way) can raise.
enum class PyErrorKind {
  kRuntimeError,
  kTypeError,
  kValueError,
  kAssertionError,
  kAttributeError,
  kOverflowError,
  kIndexError,
  kZeroDivisionError,
  kNotImplementedError,  // torch's TORCH_CHECK_NOT_IMPLEMENTED
  kException,            // a bare `raise Exception(...)`
  kKeyError,             // a name missing from a registry (transformers' AttentionInterface)
  kDslRuntimeError,      // the CuTe DSL's argument conversion (FlashAttention 4)
};

// "RuntimeError", "TypeError", ...
absl::string_view PyErrorKindName(PyErrorKind kind);

// Parses the name printed by PyErrorKindName(); nullopt for anything else.
std::optional<PyErrorKind> ParsePyErrorKind(absl::string_view name);

// Every modelled name, comma separated, for error messages.
std::string PyErrorKindNames();

// Returns a non-OK status that stands for `raise <kind>(message)`.
absl::Status PythonError(PyErrorKind kind, absl::string_view message);

// The Python kind carried by `status`, or nullopt when it carries none (OK
// statuses, "not supported", internal errors).
std::optional<PyErrorKind> PythonErrorKindOf(const absl::Status& status);

// "RuntimeError: <message>" for Python errors ("AssertionError" alone for an
// empty message, as Python prints it); otherwise the status code name
// and message ("UNIMPLEMENTED: <message>"). "OK" for an OK status.
std::string FormatPythonError(const absl::Status& status);

}  // namespace varlen

#define VARLEN_STATUS_CONCAT_INNER_(a, b) a##b
#define VARLEN_STATUS_CONCAT_(a, b) VARLEN_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define VARLEN_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status varlen_status_ = (expr);          \
    if (!varlen_status_.ok()) return varlen_status_; \
  } while (0)

// `lhs` = the value of `rexpr` (an absl::StatusOr<T>), or returns its error.
#define VARLEN_ASSIGN_OR_RETURN(lhs, rexpr) \
  VARLEN_ASSIGN_OR_RETURN_IMPL_(VARLEN_STATUS_CONCAT_(varlen_statusor_, __LINE__), lhs, rexpr)
#define VARLEN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // VARLEN_CORE_STATUS_H_
