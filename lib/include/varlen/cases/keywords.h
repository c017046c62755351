// File: varlen/cases/keywords.h
// -----------------------------------------------------------------------------
//
// Which keywords each profile reads, as faithful mode resolves a correct
// call: the table a user consults to write a bug report's call as a case
// (docs/bug-report-to-case.md). Each keyword a caller of any engine might
// pass is added, as None, to the correct call of every engine, version,
// profile and entry, and the resolution says what became of it: read (the
// path looked it up), ignored (it was passed on and nothing read it), or
// refused (the call raised). A value other than None may take another
// path, which may read more: the table describes the correct call's path.

#ifndef VARLEN_CASES_KEYWORDS_H_
#define VARLEN_CASES_KEYWORDS_H_

#include <string>
#include <vector>

#include "varlen/contract/call.h"
#include "varlen/contract/engine.h"

namespace varlen {

// The keywords probed, in the order the table lists them.
const std::vector<std::string>& ProbedKeywords();

// What one profile's entry did with every probed keyword, for the versions
// (of its engine) on which it did the same.
struct KeywordUse {
  Profile profile;
  Entry entry;
  std::vector<EngineVersion> versions;  // oldest first
  std::vector<std::string> read, ignored;
  std::vector<std::string> refused;  // "is_causal (TypeError)"
};

// Every engine's profiles and entries (direct; layer where the engine has
// one), in the engines' order.
std::vector<KeywordUse> KeywordUses();

// KeywordUses() as one markdown table per engine.
std::string KeywordTableMarkdown();

}  // namespace varlen

#endif  // VARLEN_CASES_KEYWORDS_H_
