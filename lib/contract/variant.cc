#include "varlen/contract/variant.h"

#include "absl/strings/str_cat.h"

namespace varlen {

std::string AttentionVariant::Describe() const {
  std::string text = causal()     ? "causal"
                     : windowed() ? absl::StrCat("window (", window_left, ", ", window_right, ")")
                                  : "full attention";
  if (!sinks.empty()) absl::StrAppend(&text, " + sinks");
  return text;
}

}  // namespace varlen
