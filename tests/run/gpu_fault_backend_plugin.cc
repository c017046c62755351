// The cuda backend with real device faults on some launches, as a plugin
// for `varlen check --load=` (run by tests/run/gpu_faults.py on a GPU). The
// fault is chosen by VARLEN_TEST_GPU_FAULT:
//
//   none              the cuda backend everywhere (the fault-free baseline)
//   illegal_address   a kernel reads the null page: cudaErrorIllegalAddress
//   device_assert     a kernel fails assert(): cudaErrorAssert
//   spin              a kernel that never ends
//
// The faulty launches are fault_backend.h's (a quarter, decided by the
// launch alone), so shrinking and replay meet the same fault. The errors are
// sticky: the worker finds its context unusable after the call (the cuda
// backend's DeviceHealth) and ends, and the next call gets a fresh one.

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "fault_backend.h"
#include "gpu_fault_kernels.h"
#include "varlen/backend/plugin.h"
#include "varlen/backend/registry.h"

namespace varlen_test {

class GpuFaultBackend final : public varlen::Backend {
 public:
  GpuFaultBackend() : cuda_(varlen::FindBackend("cuda")) {
    const char* fault = std::getenv("VARLEN_TEST_GPU_FAULT");
    fault_ = fault == nullptr ? "none" : fault;
  }
  absl::string_view name() const override { return "gpu_fault_backend"; }
  absl::string_view description() const override {
    return "the cuda backend, with a device fault on a quarter of launches as "
           "VARLEN_TEST_GPU_FAULT says";
  }
  varlen::BackendCapabilities capabilities() const override {
    return cuda_ != nullptr ? cuda_->capabilities() : varlen::BackendCapabilities{};
  }
  absl::Status Available() const override {
    if (cuda_ == nullptr) return absl::UnavailableError("this varlen program has no cuda backend");
    return cuda_->Available();
  }
  absl::Status Supports(const varlen::VarlenAttentionParams& p) const override {
    return cuda_ != nullptr ? cuda_->Supports(p) : Available();
  }
  absl::Status DeviceHealth() const override {
    return cuda_ != nullptr ? cuda_->DeviceHealth() : absl::OkStatus();
  }

  absl::Status Run(const varlen::VarlenAttentionParams& p) const override {
    if (fault_ == "none" || !Faulty(p)) return cuda_->Run(p);
    GpuFault fault;
    if (fault_ == "illegal_address") {
      fault = GpuFault::kIllegalAddress;
    } else if (fault_ == "device_assert") {
      fault = GpuFault::kDeviceAssert;
    } else if (fault_ == "spin") {
      fault = GpuFault::kSpin;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("VARLEN_TEST_GPU_FAULT is '", fault_,
                       "'; it must be none, illegal_address, device_assert or spin"));
    }
    const cudaError_t error = LaunchGpuFault(fault, p.batch, cudaStreamPerThread);
    if (error == cudaSuccess) return cuda_->Run(p);
    return absl::InternalError(absl::StrCat("the kernel: ", cudaGetErrorName(error), " (",
                                            cudaGetErrorString(error), ")"));
  }

 private:
  const varlen::Backend* cuda_;
  std::string fault_;
};

}  // namespace varlen_test

VARLEN_BACKEND_PLUGIN(varlen_test::GpuFaultBackend)
