// A backend written in Python, seen by the C++ suite as any other Backend.
//
// Kernel level: Run() hands the Python adapter the launch as tensors (views
// of the harness's buffers, no copies) with cu_seqlens, the max lengths and
// the scale. Call level: CallEngine() hands it the caller's whole call, each
// argument described in its case form, and reads back what forward raised
// or returned; Run() still serves the properties that launch the ground
// truth directly (the adapter turns a launch into the engine's plain call).
//
// The adapter is a Python object (varlen._bridge) with
//   available() -> str           "" when it can run here, else why not
//   run_launch(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
//              max_seqlen_k, softmax_scale) -> None
//   call(description: dict) -> dict        (call level)
// Every call into Python holds the GIL, so Run() may come from any thread.

#ifndef VARLEN_PYTHON_SRC_PYTHON_BACKEND_H_
#define VARLEN_PYTHON_SRC_PYTHON_BACKEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nanobind/nanobind.h"
#include "nanobind/ndarray.h"
#include "varlen/backend/backend.h"
#include "varlen/core/tensor.h"

namespace varlen::python {

// A launch as a Python kernel takes it: int32 token offsets shared by q, k,
// v and o, every sequence computed whole. Not every launch can be said so
// (element offsets inside a token, sequences out of order, a max_seqlen that
// truncates, keys other than the queries): those are unsupported.
struct CuSeqlensLaunch {
  std::vector<int32_t> cu_seqlens;
  int64_t tokens = 0;
  int64_t max_seqlen = 0;
};
absl::StatusOr<CuSeqlensLaunch> AsCuSeqlens(const VarlenAttentionParams& p);

// DLPack dtype of `dtype`.
nanobind::dlpack::dtype DLPackDType(DType dtype);
absl::StatusOr<DType> FromDLPack(nanobind::dlpack::dtype dtype, const std::string& what);

// A view of `t` (shape and strides kept) that keeps its storage alive.
nanobind::object TensorToArray(const Tensor& t);

// A host copy of a CPU ndarray with any strides, as a contiguous Tensor.
absl::StatusOr<Tensor> ArrayToTensor(nanobind::handle array, const std::string& what);

struct PythonBackendSpec {
  std::string name;
  std::string description;
  BackendCapabilities capabilities;
  bool call_level = false;
  std::optional<EngineVersion> engine_version;  // call level: the engine's code it runs
};

class PythonBackend final : public Backend {
 public:
  PythonBackend(PythonBackendSpec spec, nanobind::object adapter);
  ~PythonBackend() override;

  absl::string_view name() const override { return spec_.name; }
  absl::string_view description() const override { return spec_.description; }
  BackendCapabilities capabilities() const override { return spec_.capabilities; }
  absl::Status Available() const override;
  absl::Status Supports(const VarlenAttentionParams& params) const override;
  absl::Status Run(const VarlenAttentionParams& params) const override;

  bool call_level() const override { return spec_.call_level; }
  std::optional<EngineVersion> engine_version() const override { return spec_.engine_version; }
  absl::StatusOr<EngineCallResult> CallEngine(const AttentionCall& call,
                                              Profile profile) const override;

 private:
  PythonBackendSpec spec_;
  nanobind::object adapter_;
};

// The call a call-level backend's forward() receives (BackendCallOf), as
// the bridge's CallAdapter reads it: each argument in the exact form the
// caller passes, tensors as arrays viewing the harness's buffers, one id per
// tensor. Needs the GIL.
nanobind::dict DescribeCall(const AttentionCall& call, Profile profile);

}  // namespace varlen::python

#endif  // VARLEN_PYTHON_SRC_PYTHON_BACKEND_H_
