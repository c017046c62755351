#include "varlen/backend/registry.h"

#include <mutex>

#include "absl/strings/str_cat.h"

namespace varlen {
namespace internal {
std::vector<BackendFactory> BuiltinBackendFactories();  // generated
}  // namespace internal

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Backend>> backends;
};

Registry& GlobalRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    for (internal::BackendFactory factory : internal::BuiltinBackendFactories()) {
      r->backends.push_back(factory());
    }
    return r;
  }();
  return *registry;
}

}  // namespace

std::vector<const Backend*> AllBackends() {
  Registry& registry = GlobalRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<const Backend*> out;
  for (const auto& backend : registry.backends) out.push_back(backend.get());
  return out;
}

const Backend* FindBackend(absl::string_view name) {
  for (const Backend* backend : AllBackends()) {
    if (backend->name() == name) return backend;
  }
  return nullptr;
}

absl::Status RegisterBackend(std::unique_ptr<Backend> backend) {
  Registry& registry = GlobalRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (const auto& existing : registry.backends) {
    if (existing->name() == backend->name()) {
      return absl::AlreadyExistsError(
          absl::StrCat("a backend named \"", backend->name(), "\" is already registered"));
    }
  }
  registry.backends.push_back(std::move(backend));
  return absl::OkStatus();
}

}  // namespace varlen
