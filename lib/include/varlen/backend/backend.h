// File: varlen/backend/backend.h
// -----------------------------------------------------------------------------
//
// A Backend is an attention implementation under test: it receives one
// VarlenAttentionParams and fills the output. It declares what it can run;
// anything outside that is "not supported", an outcome of its own that is
// neither a pass nor a fail.
//
// Adding a backend: one folder under kernels/, a class implementing this
// interface, one VARLEN_BACKEND(name, Class) line in it, and one
// varlen_backend() line in kernels/CMakeLists.txt (which adds its CMake
// option). Embedders can also register a backend at run time with
// RegisterBackend() (registry.h).
//
// Thread model: Run() may be called from several threads at once.

#ifndef VARLEN_BACKEND_BACKEND_H_
#define VARLEN_BACKEND_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/backend/params.h"
#include "varlen/contract/call.h"
#include "varlen/contract/resolve.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/dtype.h"
#include "varlen/core/tensor.h"

namespace varlen {

// What a backend declares it runs. A case outside it is "not supported",
// never passed or failed; a backend that accepts a case and then answers
// Unimplemented from Run() fails it.
struct BackendCapabilities {
  std::vector<DType> input_dtypes;  // for q, k and v
  int max_head_dim = 0;             // head_dim_qk and head_dim_v up to this
  bool grouped_query_attention = false;
  bool distinct_value_head_dim = false;  // head_dim_v != head_dim_qk
  // q, k and v whose token or head stride is not the dense one (views of a
  // fused qkv projection). Without it such calls are not supported.
  bool strided_inputs = false;
  // The attention variants of VarlenAttentionParams: a sliding window (and
  // causal attention, its right bound at 0), and attention sinks. A kernel
  // without them computes full attention; handed one, it is not supported.
  bool windows = false;
  bool sinks = false;
  // The calling conventions whose kernel arguments it consumes (the kernel
  // an SGLang profile binds); empty: every profile.
  std::vector<Profile> profiles = {};
  int64_t max_tokens = 0;      // rows of q; 0: no limit
  int64_t max_sequences = 0;   // entries of the batch; 0: no limit
  std::string device = "cpu";  // or "cuda"
};

// What an engine's own backend object did with one whole call (call level,
// Backend::CallEngine).
struct EngineCallResult {
  // Set when forward raised: the exception's type ("RuntimeError") and its
  // message.
  std::optional<std::string> raised_type;
  std::string raised_message;
  // What forward returned, copied to the host (contiguous): [T, Hq, Dv] or
  // the caller's 4-d shape. Unset when it raised.
  std::optional<Tensor> output;
  // Host syncs and copies seen during the call; unset where they cannot be
  // observed.
  std::optional<DeviceEventCounts> device_events;
};

// A count a backend keeps across runs, for reports (a graph cache's builds
// and hits).
struct BackendCounter {
  std::string name;  // lower_snake_case: "graph_builds"
  int64_t value = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // A stable, lower_snake_case name ("cpu_reference").
  virtual absl::string_view name() const = 0;
  // One line for `varlen backends`.
  virtual absl::string_view description() const = 0;
  virtual BackendCapabilities capabilities() const = 0;

  // OK when this build and machine can run the backend (a GPU backend on a
  // machine without a GPU returns Unavailable with the reason).
  virtual absl::Status Available() const { return absl::OkStatus(); }

  // OK, or Unimplemented naming what is outside the capabilities. The
  // default checks `params` against capabilities() (everything but the
  // profile, which SupportsProfile checks).
  virtual absl::Status Supports(const VarlenAttentionParams& params) const;

  // Turns a caller's arguments into this backend's kernel arguments. SGLang's
  // vision backends each resolve their own; the default is the contract's
  // Resolve(). A backend that brings its own argument handling overrides it,
  // and the suite checks that handling as it checks the kernel.
  virtual Resolution ResolveCall(const AttentionCall& call, Profile profile, Mode mode) const {
    return Resolve(call, profile, mode);
  }
  // Computes the attention described by `params` into params.o.
  // REQUIRES: Supports(params).ok() and CheckKernelBounds(params).ok().
  virtual absl::Status Run(const VarlenAttentionParams& params) const = 0;

  // Asked after every call in a worker process (varlen/run/isolation.h):
  // OK while the device can take more calls, else the error that leaves it
  // unusable for every later call of the process (a CUDA context after an
  // illegal address or a device-side assert). The call just made is then
  // charged with a CRASH and the worker replaced, so no later case inherits
  // the error. A GPU backend synchronizes here, so that a fault surfacing
  // late is charged to the call that launched it.
  virtual absl::Status DeviceHealth() const { return absl::OkStatus(); }

  // What it counted since it was created (`varlen repro --json` reports
  // them); none by default.
  virtual std::vector<BackendCounter> counters() const { return {}; }

  // Call level: a backend that is an engine's own backend class (argument
  // handling and kernel in one) takes the caller's whole call. The executor
  // hands it the call built from a case and judges what it raises or
  // returns against what faithful mode predicts for engine_version() (unset:
  // the latest version of the profile's engine); its ResolveCall is never
  // used. Kernel-level backends (the default) answer false.
  virtual bool call_level() const { return false; }
  virtual std::optional<EngineVersion> engine_version() const { return std::nullopt; }
  // REQUIRES: call_level(). An error status is the harness's own failure to
  // make the call (never the backend's exception, which the result holds).
  virtual absl::StatusOr<EngineCallResult> CallEngine(const AttentionCall& call,
                                                      Profile profile) const;
};

// Runs `backend` on params it said it supports. An Unimplemented answer at
// this point is a failure (Internal, naming what Run() said), never "not
// supported": the backend already claimed the call.
absl::Status RunSupported(const Backend& backend, const VarlenAttentionParams& params);

// OK when `backend` consumes the kernel arguments of `profile`, else
// Unimplemented naming the profiles it does.
absl::Status SupportsProfile(const Backend& backend, Profile profile);

// The engine version whose code a call-level backend runs, when it is a
// version of `profile`'s engine; else that engine's latest.
EngineVersion EngineVersionOfBackend(const Backend& backend, Profile profile);

}  // namespace varlen

namespace varlen::internal {
// Used by VARLEN_BACKEND; see kernels/CMakeLists.txt.
using BackendFactory = std::unique_ptr<Backend> (*)();
}  // namespace varlen::internal

// Defines the factory that kernels/CMakeLists.txt's generated registration
// calls for backend `name`. Place it once, in the backend's own folder.
#define VARLEN_BACKEND(name, Class)                                 \
  std::unique_ptr<::varlen::Backend> VarlenCreateBackend_##name() { \
    return std::make_unique<Class>();                               \
  }

#endif  // VARLEN_BACKEND_BACKEND_H_
