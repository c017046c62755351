// File: varlen/backend/plugin.h
// -----------------------------------------------------------------------------
//
// A backend built as a shared library, for `varlen check --load=libmine.so`
// and `varlen repro --load=...`: the whole harness on a new backend with no
// program of the author's own.
//
//   // my_backend.cc, built by varlen_add_backend_plugin(my_backend my_backend.cc)
//   #include "varlen/backend/plugin.h"
//   class MyBackend final : public varlen::Backend { ... };
//   VARLEN_BACKEND_PLUGIN(MyBackend)  // one or more classes
//
// The library is loaded into the varlen program and uses that program's
// own copy of varlen and Abseil (as a PostgreSQL extension uses the
// server's): it is compiled against the same varlen headers and links none
// of varlen's libraries. Before registering anything, the loader checks the
// plugin interface's version and the size of the params struct the plugin
// was compiled with, so a plugin built against other headers is refused
// with a message, not run.

#ifndef VARLEN_BACKEND_PLUGIN_H_
#define VARLEN_BACKEND_PLUGIN_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "varlen/backend/backend.h"
#include "varlen/backend/params.h"

namespace varlen {

// Raised whenever Backend, its params struct or this protocol changes.
inline constexpr int kBackendPluginVersion = 2;

namespace plugin_internal {
template <typename... Backends>
void AddBackends(void* out) {
  auto* backends = static_cast<std::vector<std::unique_ptr<Backend>>*>(out);
  (backends->push_back(std::make_unique<Backends>()), ...);
}
}  // namespace plugin_internal

}  // namespace varlen

#define VARLEN_BACKEND_PLUGIN(...)                                                               \
  extern "C" __attribute__((visibility("default"))) int varlen_backend_plugin_version() {        \
    return ::varlen::kBackendPluginVersion;                                                      \
  }                                                                                              \
  extern "C" __attribute__((visibility("default"))) size_t varlen_backend_plugin_params_size() { \
    return sizeof(::varlen::VarlenAttentionParams);                                              \
  }                                                                                              \
  extern "C" __attribute__((visibility("default"))) void varlen_backend_plugin_create(           \
      void* backends) {                                                                          \
    ::varlen::plugin_internal::AddBackends<__VA_ARGS__>(backends);                               \
  }

#endif  // VARLEN_BACKEND_PLUGIN_H_
