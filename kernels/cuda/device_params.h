// Device copies of everything one VarlenAttentionParams points at, and the
// params rewritten to point at them: what a GPU kernel of this folder
// launches with. The harness keeps its tensors in host memory; a backend
// run uploads q, k, v, the output buffer (as poisoned, so elements the
// kernel never writes stay detectable) and the per-sequence arrays, and
// downloads the output after the kernel.

#ifndef VARLEN_KERNELS_CUDA_DEVICE_PARAMS_H_
#define VARLEN_KERNELS_CUDA_DEVICE_PARAMS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varlen/backend/params.h"

namespace varlen::cuda_kernels {

// OK for cudaSuccess, else Internal (Unavailable for the errors that mean
// "no usable device") naming `what` and the CUDA error.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// After a call: waits for the device, and returns the error that leaves its
// context unusable (a sticky one: an illegal address, a device-side assert,
// a launch failure), which a second synchronization after clearing the
// last error still returns; OK otherwise.
absl::Status CudaDeviceHealth();

// OK when a device of compute capability 8.0 or newer is present and this
// binary has machine code for it; Unavailable with the reason otherwise.
absl::Status CudaDeviceUsable();

class DeviceParams {
 public:
  // Copies the buffers `host` points at to the current device.
  static absl::StatusOr<DeviceParams> Upload(const VarlenAttentionParams& host);

  // The params with device pointers, for a launch.
  const VarlenAttentionParams& device() const { return device_; }

  // Copies the device output back into host.o (synchronizes).
  absl::Status DownloadOutput(const VarlenAttentionParams& host) const;

  // More device memory that lives as long as these params (a backend's own
  // arguments, a workspace). Both return nullptr for 0 bytes.
  absl::StatusOr<void*> Allocate(size_t bytes);
  absl::StatusOr<void*> Copy(const void* host, size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const { cudaFree(p); }
  };
  using Buffer = std::unique_ptr<void, Free>;

  VarlenAttentionParams device_;
  std::vector<Buffer> buffers_;
};

}  // namespace varlen::cuda_kernels

#endif  // VARLEN_KERNELS_CUDA_DEVICE_PARAMS_H_
