#include "varlen/backend/registry.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "varlen/backend/plugin.h"

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

absl::StatusOr<std::vector<std::string>> LoadBackendPlugin(const std::string& path) {
  // Never unloaded: its backends live as long as the registry.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot load the plugin: ", dlerror()));
  }
  const auto version = reinterpret_cast<int (*)()>(dlsym(library, "varlen_backend_plugin_version"));
  const auto params_size =
      reinterpret_cast<size_t (*)()>(dlsym(library, "varlen_backend_plugin_params_size"));
  const auto create =
      reinterpret_cast<void (*)(void*)>(dlsym(library, "varlen_backend_plugin_create"));
  if (version == nullptr || params_size == nullptr || create == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not a varlen backend plugin (it defines no varlen_backend_plugin_* functions; "
        "a plugin ends with VARLEN_BACKEND_PLUGIN(YourBackend), varlen/backend/plugin.h)"));
  }
  if (version() != kBackendPluginVersion || params_size() != sizeof(VarlenAttentionParams)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": built for plugin interface ", version(), " with a ", params_size(),
        "-byte params struct; this program has interface ", kBackendPluginVersion, " and ",
        sizeof(VarlenAttentionParams), " bytes: rebuild the plugin against this varlen's headers"));
  }
  std::vector<std::unique_ptr<Backend>> backends;
  create(&backends);
  std::vector<std::string> names;
  for (std::unique_ptr<Backend>& backend : backends) {
    const std::string name(backend->name());
    if (absl::Status added = RegisterBackend(std::move(backend)); !added.ok()) {
      return absl::AlreadyExistsError(absl::StrCat(path, ": ", added.message()));
    }
    names.push_back(name);
  }
  return names;
}

}  // namespace varlen
