// Host entry points of the CUDA kernels: the FlashAttention-2 forward
// (flash_forward.cuh) and the float64 GPU reference (reference_forward.cu).
//
// Both take VarlenAttentionParams whose tensor and per-sequence pointers
// are device pointers (device_params.h makes them), launch on `stream`, and
// return the launch's error without synchronizing. LaunchFlashForward is
// the one dtype x head-dim dispatch; each (dtype, head dim) variant is
// compiled once, in flash_forward_<dtype>.cu.

#ifndef VARLEN_KERNELS_CUDA_FLASH_FORWARD_H_
#define VARLEN_KERNELS_CUDA_FLASH_FORWARD_H_

#include <cuda_runtime_api.h>

#include "launch_plan.h"
#include "varlen/backend/params.h"

namespace varlen::cuda_kernels {

// REQUIRES: `plan` is PlanForwardLaunch(host params) on this device, and
// CheckKernelBounds(host params).ok().
cudaError_t LaunchFlashForward(const VarlenAttentionParams& device_params, const LaunchPlan& plan,
                               cudaStream_t stream);

// The variant for one dtype and padded head dim (explicitly instantiated).
template <TileElement E, int kHeadDim>
cudaError_t LaunchFlashForwardFor(const VarlenAttentionParams& device_params,
                                  const LaunchPlan& plan, cudaStream_t stream);

// Whether this binary carries machine code the current device can run
// (cudaErrorNoKernelImageForDevice otherwise).
cudaError_t CheckKernelImage();

// The two arithmetics of the CPU reference (reference_attention.h):
// float64 throughout (the oracle), or float32 accumulation with P rounded
// to the input dtype before P V (the judge's same-precision emulation).
enum class ReferenceArithmetic { kFloat64, kEmulated };

// softmax(scale q k^T) v of every sequence, written in output_dtype at the
// o offsets, with two passes over the keys (the row maximum, then exp and
// P V): simple, and independent of the flash kernel's tiling. For cases too
// large for the CPU oracle. `longest_rows` is the most rows SequenceAt gives
// a sequence. cudaErrorInvalidValue for float64 inputs or head dims over
// kReferenceMaxHeadDim. REQUIRES: longest_rows < 2^31.
inline constexpr int kReferenceMaxHeadDim = 256;
cudaError_t LaunchReferenceForward(const VarlenAttentionParams& device_params,
                                   ReferenceArithmetic arithmetic, int64_t longest_rows,
                                   cudaStream_t stream);

}  // namespace varlen::cuda_kernels

#endif  // VARLEN_KERNELS_CUDA_FLASH_FORWARD_H_
