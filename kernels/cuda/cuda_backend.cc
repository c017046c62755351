// The CUDA FlashAttention-2 kernel as a backend under test. It consumes the
// kernel arguments of the fa3 and triton_attn profiles (cu_seqlens and a
// launch bound from max_seqlen). On a machine without a usable device it is
// Unavailable, with the reason, and the harness reports its cases as not
// supported.

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "device_params.h"
#include "flash_forward.h"
#include "launch_plan.h"
#include "varlen/backend/backend.h"

namespace varlen::cuda_kernels {
namespace {

// The device's limits, read once (every Run uses the current device).
absl::StatusOr<DeviceLimits> CurrentDeviceLimits() {
  static const absl::StatusOr<DeviceLimits> limits = []() -> absl::StatusOr<DeviceLimits> {
    if (absl::Status usable = CudaDeviceUsable(); !usable.ok()) return usable;
    int device = 0, shared = 0, grid_x = 0, grid_y = 0, grid_z = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    cudaDeviceGetAttribute(&grid_x, cudaDevAttrMaxGridDimX, device);
    cudaDeviceGetAttribute(&grid_y, cudaDevAttrMaxGridDimY, device);
    cudaDeviceGetAttribute(&grid_z, cudaDevAttrMaxGridDimZ, device);
    return DeviceLimits{.shared_bytes_per_block = shared,
                        .max_grid_x = grid_x,
                        .max_grid_y = grid_y,
                        .max_grid_z = grid_z};
  }();
  return limits;
}

class CudaBackend final : public Backend {
 public:
  absl::string_view name() const override { return "cuda"; }
  absl::string_view description() const override {
    return "FlashAttention-2 in CUDA: 64-row blocks, online softmax in float32, P rounded to the "
           "input dtype before P*V on tensor cores (bf16, fp16; float32 on CUDA cores)";
  }
  BackendCapabilities capabilities() const override { return KernelCapabilities(); }
  absl::Status Available() const override { return CurrentDeviceLimits().status(); }
  absl::Status DeviceHealth() const override { return CudaDeviceHealth(); }

  absl::Status Supports(const VarlenAttentionParams& params) const override {
    if (absl::Status s = Backend::Supports(params); !s.ok()) return s;
    absl::StatusOr<DeviceLimits> limits = CurrentDeviceLimits();
    return PlanForwardLaunch(params, limits.ok() ? *limits : kSm90Limits).status();
  }

  absl::Status Run(const VarlenAttentionParams& params) const override {
    absl::StatusOr<DeviceLimits> limits = CurrentDeviceLimits();
    if (!limits.ok()) return limits.status();
    absl::StatusOr<LaunchPlan> plan = PlanForwardLaunch(params, *limits);
    if (!plan.ok()) return plan.status();
    absl::StatusOr<DeviceParams> device = DeviceParams::Upload(params);
    if (!device.ok()) return device.status();
    if (absl::Status s = CudaStatus(
            LaunchFlashForward(device->device(), *plan, cudaStreamPerThread), "kernel launch");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CudaStatus(cudaStreamSynchronize(cudaStreamPerThread), "kernel run");
        !s.ok()) {
      return s;
    }
    return device->DownloadOutput(params);
  }
};

}  // namespace
}  // namespace varlen::cuda_kernels

VARLEN_BACKEND(cuda, ::varlen::cuda_kernels::CudaBackend)
