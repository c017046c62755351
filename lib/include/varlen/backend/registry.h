// File: varlen/backend/registry.h
// -----------------------------------------------------------------------------
//
// The process-wide list of backends: those compiled in (one registration
// line each, generated from kernels/CMakeLists.txt) plus any an embedder
// registers at run time. Lookup is by name.
//
// Thread model: register before running cases from several threads;
// lookups are then safe from any thread.
//
// Declared with the backend interface, implemented by varlen::backends
// (kernels/registry.cc), which also compiles in every enabled backend: link
// varlen::backends to use these functions.

#ifndef VARLEN_BACKEND_REGISTRY_H_
#define VARLEN_BACKEND_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/backend/backend.h"

namespace varlen {

// Every registered backend, built-in ones first, in registration order.
std::vector<const Backend*> AllBackends();

// The backend called `name`, or nullptr.
const Backend* FindBackend(absl::string_view name);

// Adds `backend`; AlreadyExists if its name is taken.
absl::Status RegisterBackend(std::unique_ptr<Backend> backend);

// Loads a shared library made with VARLEN_BACKEND_PLUGIN
// (varlen/backend/plugin.h) and registers its backends; returns their
// names. The program must export its symbols (CMake: ENABLE_EXPORTS).
// Errors name the file and say what is wrong: not loadable (with the
// loader's message), not a plugin, built against other headers, a name
// already taken.
absl::StatusOr<std::vector<std::string>> LoadBackendPlugin(const std::string& path);

}  // namespace varlen

#endif  // VARLEN_BACKEND_REGISTRY_H_
