#include "fuzzed_backends.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_join.h"
#include "varlen/backend/registry.h"

#if VARLEN_FUZZ_PLANTED_BUGS
#include "mutants.h"
#endif

namespace varlen {
namespace {

[[noreturn]] void Refuse(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(2);
}

// The mutant VARLEN_PLANTED_BUG names; null when the variable is unset.
const Backend* PlantedBug() {
  static const Backend* const planted = []() -> const Backend* {
    const char* name = std::getenv("VARLEN_PLANTED_BUG");
    if (name == nullptr || *name == '\0') return nullptr;
#if VARLEN_FUZZ_PLANTED_BUGS
    static const std::vector<Mutant>* const mutants = new std::vector<Mutant>(AllMutants());
    std::vector<std::string> names;
    for (const Mutant& mutant : *mutants) {
      if (mutant.name == name) return mutant.backend.get();
      names.push_back(mutant.name);
    }
    Refuse(std::string("VARLEN_PLANTED_BUG=") + name + ": no such mutant; the planted bugs are " +
           absl::StrJoin(names, ", "));
#else
    Refuse(std::string("VARLEN_PLANTED_BUG=") + name +
           ": this build has no planted bugs (configure with -DVARLEN_FUZZ_PLANTED_BUGS=ON, as "
           "the fuzz preset is)");
#endif
  }();
  return planted;
}

}  // namespace

const Backend& FuzzedBackend(absl::string_view name) {
  if (const Backend* planted = PlantedBug()) return *planted;
  const Backend* backend = FindBackend(name);
  if (backend == nullptr) Refuse(std::string("fuzz target: no backend named ") + std::string(name));
  return *backend;
}

std::vector<const Backend*> FuzzedBackends() {
  if (const Backend* planted = PlantedBug()) return {planted};
  std::vector<const Backend*> available;
  for (const Backend* backend : AllBackends()) {
    if (backend->Available().ok()) available.push_back(backend);
  }
  return available;
}

}  // namespace varlen
