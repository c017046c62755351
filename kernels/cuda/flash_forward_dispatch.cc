// The one dtype x head-dim dispatch of the flash kernel.

#include "flash_forward.h"

namespace varlen::cuda_kernels {
namespace {

template <TileElement E>
cudaError_t LaunchForHeadDim(const VarlenAttentionParams& device_params, const LaunchPlan& plan,
                             cudaStream_t stream) {
  switch (plan.tile.head_dim) {
#define VARLEN_CASE(D) \
  case D:              \
    return LaunchFlashForwardFor<E, D>(device_params, plan, stream);
    VARLEN_CUDA_HEAD_DIMS(VARLEN_CASE)
#undef VARLEN_CASE
    default:
      return cudaErrorInvalidValue;  // PlanForwardLaunch only returns compiled buckets
  }
}

}  // namespace

cudaError_t LaunchFlashForward(const VarlenAttentionParams& device_params, const LaunchPlan& plan,
                               cudaStream_t stream) {
  switch (plan.element) {
    case TileElement::kFloat32:
      return LaunchForHeadDim<TileElement::kFloat32>(device_params, plan, stream);
    case TileElement::kFloat16:
      return LaunchForHeadDim<TileElement::kFloat16>(device_params, plan, stream);
    case TileElement::kBFloat16:
      return LaunchForHeadDim<TileElement::kBFloat16>(device_params, plan, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace varlen::cuda_kernels
