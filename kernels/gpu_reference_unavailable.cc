// The GPU reference in a build without CUDA (VARLEN_ENABLE_CUDA off or no
// nvcc): never available. kernels/cuda/gpu_reference.cc replaces this file
// when CUDA is built.

#include "varlen/oracle/reference_attention.h"

namespace varlen {

absl::Status GpuReferenceAvailable() {
  return absl::UnavailableError(
      "this build has no CUDA (VARLEN_ENABLE_CUDA is off or nvcc was not found)");
}

absl::Status GpuReferenceAttention(const VarlenAttentionParams&, ReferencePrecision) {
  return GpuReferenceAvailable();
}

}  // namespace varlen
