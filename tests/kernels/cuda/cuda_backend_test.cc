// Tests the cuda backend and the GPU reference. On a machine without a
// usable device the backend must say why it is unavailable, and every test
// that needs the device skips with that reason. With a device: the kernel
// against the float64 oracle on the shapes where tiled kernels go wrong, and
// the GPU reference against the CPU one on cases both can run.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/kernel_cases.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/synth.h"
#include "varlen/contract/variant.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

const Backend& Cuda() { return *FindBackend("cuda"); }

#define SKIP_WITHOUT_DEVICE()                                                  \
  if (absl::Status available = Cuda().Available(); !available.ok()) {          \
    GTEST_SKIP() << "needs a CUDA device of compute capability 8.0 or newer: " \
                 << available.message();                                       \
  }

Case MakeCase(std::vector<int64_t> lengths, int64_t heads, int64_t kv_heads, int64_t dim,
              DType dtype, uint64_t seed) {
  return test::KernelCase(std::move(lengths), heads, kv_heads, dim, dim, dtype, seed);
}

TEST(CudaBackendTest, IsRegisteredAndSaysWhyItIsUnavailable) {
  ASSERT_NE(FindBackend("cuda"), nullptr);
  EXPECT_EQ(Cuda().capabilities().device, "cuda");
  const absl::Status available = Cuda().Available();
  if (!available.ok()) {
    EXPECT_EQ(available.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(available.message(),
                AnyOf(HasSubstr("no CUDA device"), HasSubstr("compute capability"),
                      HasSubstr("no kernel for the device")));
    // The harness reports its cases as not supported, with that reason.
    const Outcome o = RunCase(MakeCase({70}, 4, 2, 64, DType::kBFloat16, 1), Cuda());
    EXPECT_EQ(o.observed, Observed::kUnsupported);
    EXPECT_EQ(o.unsupported.message(), available.message());
  }
}

TEST(CudaBackendTest, MatchesTheOracleAroundTileBoundaries) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<std::vector<int64_t>> batches = {
      {1}, {63}, {64}, {65}, {127, 128, 129}, {0, 5, 0, 200, 0}, {1, 1, 1, 1}, {300, 17}};
  uint64_t seed = 1;
  for (int64_t dim : {32, 64, 72, 80, 96, 128, 160, 200, 256}) {
    for (const auto& lengths : batches) {
      for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
        const Outcome o = RunCase(MakeCase(lengths, 4, 2, dim, dtype, seed++), Cuda());
        EXPECT_EQ(o.observed, Observed::kSuccess)
            << DTypeName(dtype) << " head_dim " << dim << " " << testing::PrintToString(lengths)
            << ": "
            << (o.numerics.has_value() ? SummarizeNumerics(*o.numerics)
                                       : std::string(o.unsupported.message()));
      }
    }
  }
}

// A few small launches that cover every path of the kernel (partial row and
// key tiles, an empty sequence, GQA, padded head dims, both arithmetics):
// what scripts/gpu-check runs under compute-sanitizer's memcheck and
// racecheck, where every access is checked and every launch is slow.
TEST(CudaBackendTest, SanitizerSubset) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 100;
  for (int64_t dim : {72, 128}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
      const Outcome o = RunCase(MakeCase({1, 0, 65, 130}, 4, 2, dim, dtype, seed++), Cuda());
      EXPECT_EQ(o.observed, Observed::kSuccess)
          << DTypeName(dtype) << " head_dim " << dim << ": "
          << (o.numerics.has_value() ? SummarizeNumerics(*o.numerics) : "");
    }
  }
}

TEST(CudaBackendTest, GpuReferenceAgreesWithTheCpuReference) {
  if (absl::Status gpu = GpuReferenceAvailable(); !gpu.ok()) {
    GTEST_SKIP() << "needs a CUDA device: " << gpu.message();
  }
  AttentionVariant window_and_sinks;
  window_and_sinks.window_left = 40;
  window_and_sinks.window_right = 0;
  window_and_sinks.sinks = {0.5f, -2.0f, 3.0f, -std::numeric_limits<float>::infinity()};
  for (const AttentionVariant& variant : {AttentionVariant{}, window_and_sinks}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
      const Case c = MakeCase({0, 1, 65, 200}, 4, 2, 80, dtype, 7);
      const QkvTensors t = SynthesizeQkv(c);
      for (ReferencePrecision precision :
           {ReferencePrecision::kFloat64, ReferencePrecision::kEmulated}) {
        const DType out = precision == ReferencePrecision::kFloat64 ? DType::kFloat64 : dtype;
        KernelCall cpu = BindGroundTruth(t.q, t.k, t.v, c.geometry.seq_lens, 0.1, out, variant);
        KernelCall gpu = BindGroundTruth(t.q, t.k, t.v, c.geometry.seq_lens, 0.1, out, variant);
        FastReferenceAttention(cpu.params(), precision);
        ASSERT_TRUE(GpuReferenceAttention(gpu.params(), precision).ok());
        double worst = 0.0;
        for (int64_t i = 0; i < cpu.output().numel(); ++i) {
          worst = std::max(worst, std::fabs(cpu.output().DoubleAt(i) - gpu.output().DoubleAt(i)));
        }
        // float64: the sums' order only. The emulation: float32 sums in
        // another order, and the output rounded to the dtype.
        EXPECT_LE(worst, precision == ReferencePrecision::kFloat64 ? 1e-12 : 1e-2)
            << DTypeName(dtype) << ", " << variant.Describe();
      }
    }
  }
}

}  // namespace
}  // namespace varlen
