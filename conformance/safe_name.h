// Names for GoogleTest and for files (internal to the suite): letters,
// digits and underscores, every other character written as '_'.

#ifndef VARLEN_CONFORMANCE_SAFE_NAME_H_
#define VARLEN_CONFORMANCE_SAFE_NAME_H_

#include <cctype>
#include <string>

#include "absl/strings/string_view.h"

namespace varlen::internal {

inline std::string SafeName(absl::string_view name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace varlen::internal

#endif  // VARLEN_CONFORMANCE_SAFE_NAME_H_
