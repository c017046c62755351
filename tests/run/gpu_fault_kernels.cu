// The device faults of gpu_fault_backend_plugin.cc: kernels that fail the way
// a broken GPU kernel does. Built without NDEBUG so the device-side assert is
// real in every build type.

#undef NDEBUG
#include <cassert>
#include <cstdint>

#include "gpu_fault_kernels.h"

namespace varlen_test {
namespace {

__global__ void ReadIllegalAddress(int* sink) {
  // An address in the null page: no allocation of this context is there.
  const volatile int* nowhere = reinterpret_cast<const volatile int*>(uintptr_t{16});
  *sink = *nowhere;
}

__global__ void FailDeviceAssert(int rows) { assert(rows < 0 && "planted device-side assert"); }

__global__ void Spin(const volatile int* never_set) {
  while (*never_set == 0) {
  }
}

}  // namespace

cudaError_t LaunchGpuFault(GpuFault fault, int rows, cudaStream_t stream) {
  int* scratch = nullptr;
  if (cudaError_t e = cudaMallocAsync(&scratch, sizeof(int), stream); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMemsetAsync(scratch, 0, sizeof(int), stream); e != cudaSuccess) return e;
  switch (fault) {
    case GpuFault::kIllegalAddress:
      ReadIllegalAddress<<<1, 1, 0, stream>>>(scratch);
      break;
    case GpuFault::kDeviceAssert:
      FailDeviceAssert<<<1, 1, 0, stream>>>(rows);
      break;
    case GpuFault::kSpin:
      Spin<<<1, 1, 0, stream>>>(scratch);
      break;
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  // A sticky error leaves the allocation to the context's end, as it would.
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
  return cudaFreeAsync(scratch, stream);
}

}  // namespace varlen_test
