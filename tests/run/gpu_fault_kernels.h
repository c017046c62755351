// Kernels that fault on the device: an illegal address, a failed
// device-side assert, a kernel that never ends.

#ifndef VARLEN_TESTS_RUN_GPU_FAULT_KERNELS_H_
#define VARLEN_TESTS_RUN_GPU_FAULT_KERNELS_H_

#include <cuda_runtime_api.h>

namespace varlen_test {

enum class GpuFault { kIllegalAddress, kDeviceAssert, kSpin };

// Launches the fault on `stream` and waits for it: returns the CUDA error
// the launch or the wait reported (kSpin never returns).
cudaError_t LaunchGpuFault(GpuFault fault, int rows, cudaStream_t stream);

}  // namespace varlen_test

#endif  // VARLEN_TESTS_RUN_GPU_FAULT_KERNELS_H_
