// File: varlen/cases/case_json.h
// -----------------------------------------------------------------------------
//
// Reading and writing Cases as JSON (the format is documented in
// corpus/README.md).
//
// Loading is strict: an unknown field, a wrong type or an impossible value is
// an InvalidArgument error naming the file and the JSON path, e.g.
//   corpus/regressions/x.json: $.geometry.seq_lens[2]: -5 is negative:
//   sequence lengths must be >= 0
// Writing produces the canonical spelling, and ParseCase(WriteCase(c)) == c
// for every valid Case.

#ifndef VARLEN_CASES_CASE_JSON_H_
#define VARLEN_CASES_CASE_JSON_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "varlen/cases/case.h"

namespace varlen {

// Parses and validates one case from JSON text. `origin` (a file name)
// prefixes error messages.
absl::StatusOr<Case> ParseCase(absl::string_view json_text, absl::string_view origin = "<case>");

// Reads and parses the file at `path`.
absl::StatusOr<Case> LoadCaseFile(const std::string& path);

// Every *.json case under each argument (files are taken as they are,
// directories recursively, in sorted order). NotFound for a missing path.
absl::StatusOr<std::vector<std::string>> ListCaseFiles(const std::vector<std::string>& paths);

// Checks the semantic rules of a case (ranges, consistency, literal values
// fitting their dtypes). ParseCase calls it; generators may too.
absl::Status ValidateCase(const Case& c);

// The warmup call `patch` makes of `c`: the RFC 7386 merge patch applied to
// CaseToJson(c) without "warmup" and "expect", then read and validated like
// any case. Errors name the path in the patched case ("$.geometry.dtype: ...");
// ParseCase prefixes them with the patch's place ("$.warmup[0].geometry...").
absl::StatusOr<Case::Warmup> MakeWarmup(const Case& c, const nlohmann::ordered_json& patch);

// The canonical JSON of `c` (fields in a fixed, readable order).
nlohmann::ordered_json CaseToJson(const Case& c);
// CaseToJson(c) as text: two-space indentation, arrays of numbers on one line.
std::string WriteCase(const Case& c);

// JSON of a literal value, and of a tensor (as a case file would spell it,
// which is how reports print resolved arguments).
nlohmann::ordered_json ArgLiteralToJson(const ArgLiteral& value);
nlohmann::ordered_json TensorToJson(const Tensor& tensor);
// A contiguous tensor's values as a case file spells them (1-d unless
// another shape).
TensorLiteral LiteralOfTensor(const Tensor& tensor);

// The same compact pretty-printing WriteCase uses, for any JSON value.
std::string FormatJson(const nlohmann::ordered_json& value);

}  // namespace varlen

#endif  // VARLEN_CASES_CASE_JSON_H_
