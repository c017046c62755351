// The bf16 variants of the flash kernel, one per padded head dim.

#include "flash_forward.cuh"

namespace varlen::cuda_kernels {

#define VARLEN_INSTANTIATE(D)                                            \
  template cudaError_t LaunchFlashForwardFor<TileElement::kBFloat16, D>( \
      const VarlenAttentionParams&, const LaunchPlan&, cudaStream_t);
VARLEN_CUDA_HEAD_DIMS(VARLEN_INSTANTIATE)
#undef VARLEN_INSTANTIATE

}  // namespace varlen::cuda_kernels
