#include "violation.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/report.h"

namespace varlen {

void ReportViolation(absl::string_view property, absl::string_view detail, const Case& c,
                     const Outcome* outcome) {
  std::string text = absl::StrCat(kViolationPrefix, property, "\n", detail, "\n", kCaseBegin, "\n",
                                  WriteCase(c), kCaseEnd, "\n");
  if (outcome != nullptr) absl::StrAppend(&text, FormatOutcomeText(c, "<decoded>", *outcome), "\n");
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace varlen
