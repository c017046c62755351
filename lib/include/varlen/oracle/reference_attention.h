// The float64 attention oracle and its same-precision emulation.
//
// ReferenceAttention computes softmax(scale * q k^T) v for every sequence of
// `params` (GQA, any head dims, the window and sinks of KeysOfRow), with the
// max subtracted before exp so logits of +-1e4 stay finite:
//
//   * kFloat64: every product, sum and exp in double; the result is rounded
//     once, to params.output_dtype. This is the oracle.
//   * kEmulated: what a careful kernel in the input dtype computes: float32
//     accumulation (float64 for float64 inputs), probabilities rounded to the
//     input dtype before P*V, the output rounded to params.output_dtype. The
//     numerical judge measures a backend's error against the oracle in units
//     of this emulation's error.
//
// A query row that attends no key is written as 0.
//
// The oracle is the judge's instrument, so it lives below the judge
// (varlen::oracle, lib/oracle/); the cpu_reference backend runs it as a
// backend under test. Its GPU variant is defined in the kernels layer
// (varlen::gpu_reference), which the judge links.

#ifndef VARLEN_ORACLE_REFERENCE_ATTENTION_H_
#define VARLEN_ORACLE_REFERENCE_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "varlen/backend/params.h"

namespace varlen {

enum class ReferencePrecision { kFloat64, kEmulated };

// The instruction sets the blocked oracle is compiled for: AVX-512 (F, VL,
// DQ), AVX2 with FMA, and the baseline (SSE2). kBest is the fastest this
// CPU runs: AVX-512 on Intel's cores, otherwise AVX2 where present. The
// FMA paths give the same bits (they sum in one order); tests force each
// path the CPU runs.
enum class OracleIsa { kBest, kBaseline, kAvx2, kAvx512 };
bool OracleIsaRuns(OracleIsa isa);
// "avx512", "avx2" or "baseline" (kBest: the path it stands for here).
const char* OracleIsaName(OracleIsa isa);

// The naive definition: one loop nest, element by element, on one core. It
// is the test oracle of FastReferenceAttention.
// REQUIRES: CheckKernelBounds(params).ok(), floating input and output dtypes.
void ReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision);

// The same arithmetic, blocked: each (sequence, head) is gathered into
// contiguous buffers of the accumulation type, K^T and V packed in panels,
// Q K^T and P V run as register tiles of up to 6 rows x 2 vectors, the
// float64 exponentials a vector at a time, on the instruction set `isa`
// (REQUIRES: OracleIsaRuns(isa)), and the work items are spread over
// `threads` (<= 0: every hardware thread). Agrees with ReferenceAttention up to the order of the
// sums and the exponential's last bits (float64: ~1e-15 relative). The judge and cpu_reference run
// this one.
//
// With `logit_rounding` (float64 precision), it also sets *logit_rounding to
// the largest first-order effect on an output element of rounding every
// logit once at float32's unit roundoff u, relative to the logit's absolute
// sum: u sum_c p_c |v_cj - o_j| |scale| sum_i |q_i k_ci|. A float32 kernel
// carries that error in every order of its sums; with logits near 1e4 it
// is most of its error (docs/conformance.md, the tolerance model).
// Non-finite elements do not count. Without float64 precision: 0.
void FastReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision,
                            int threads = 0, double* logit_rounding = nullptr,
                            OracleIsa isa = OracleIsa::kBest);

// x[i] = exp(x[i] - shift), in place: the float64 oracle's softmax
// exponential. A vector at a time (Cody-Waite reduction, a degree-13
// polynomial, 2^n from bits), within 2 ulp of std::exp; NaN, infinities and
// results outside double's normal range are std::exp's own.
void ShiftedExp(double* x, int64_t n, double shift, OracleIsa isa = OracleIsa::kBest);

// x[i] = expf(x[i] - shift) in float, in place: the float32 emulation's
// exponential (and cpu_flash's), glibc's expf bit for bit on every path
// (its FMA variant, which glibc runs wherever the vector paths here do), a
// vector at a time.
void ShiftedExpFloat(float* x, int64_t n, float shift, OracleIsa isa = OracleIsa::kBest);

// The same two arithmetics on a GPU (kernels/cuda/reference_forward.cu), for
// cases over the CPU budget: one thread block per query row, float64 (or
// the emulation's float32) accumulation. OK when this build has CUDA and
// the machine a usable device; Unavailable with the reason otherwise.
absl::Status GpuReferenceAvailable();

// Like ReferenceAttention, on the current device (params point at host
// memory; they are copied there and back). It takes float32, float16 and
// bfloat16 inputs (kept exact as float in shared memory), head dims up
// to kGpuReferenceMaxHeadDim, windows and sinks as ReferenceAttention does.
// REQUIRES: GpuReferenceAvailable().ok().
inline constexpr int kGpuReferenceMaxHeadDim = 256;
absl::Status GpuReferenceAttention(const VarlenAttentionParams& params,
                                   ReferencePrecision precision);

}  // namespace varlen

#endif  // VARLEN_ORACLE_REFERENCE_ATTENTION_H_
