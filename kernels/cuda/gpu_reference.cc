// GpuReferenceAttention (reference_attention.h) on the CUDA reference kernel.

#include <cuda_runtime.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "device_params.h"
#include "flash_forward.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {

absl::Status GpuReferenceAvailable() { return cuda_kernels::CudaDeviceUsable(); }

absl::Status GpuReferenceAttention(const VarlenAttentionParams& params,
                                   ReferencePrecision precision) {
  using cuda_kernels::CudaStatus;
  static_assert(kGpuReferenceMaxHeadDim == cuda_kernels::kReferenceMaxHeadDim);
  if (params.input_dtype == DType::kFloat64 ||
      std::max(params.head_dim_qk, params.head_dim_v) > kGpuReferenceMaxHeadDim) {
    return absl::UnimplementedError(absl::StrCat(
        "the GPU reference takes float32, float16 or bfloat16 inputs and head dims up to ",
        kGpuReferenceMaxHeadDim, "; not ", DTypeName(params.input_dtype), " with head dims ",
        params.head_dim_qk, "/", params.head_dim_v));
  }
  int64_t longest = 0;
  for (int b = 0; b < params.batch; ++b) longest = std::max(longest, SequenceAt(params, b).rows);
  absl::StatusOr<cuda_kernels::DeviceParams> device = cuda_kernels::DeviceParams::Upload(params);
  if (!device.ok()) return device.status();
  const auto arithmetic = precision == ReferencePrecision::kFloat64
                              ? cuda_kernels::ReferenceArithmetic::kFloat64
                              : cuda_kernels::ReferenceArithmetic::kEmulated;
  if (absl::Status s = CudaStatus(cuda_kernels::LaunchReferenceForward(
                                      device->device(), arithmetic, longest, cudaStreamPerThread),
                                  "reference kernel launch");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CudaStatus(cudaStreamSynchronize(cudaStreamPerThread), "reference kernel run");
      !s.ok()) {
    return s;
  }
  return device->DownloadOutput(params);
}

}  // namespace varlen
