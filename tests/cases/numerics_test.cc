// Tests the numerical judge: the reference, output poisoning, error bounds and summaries.

#include "varlen/cases/numerics.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varlen/cases/case.h"
#include "varlen/cases/synth.h"
#include "varlen/core/dtype.h"
#include "varlen/core/tensor.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Sequences [2, 0, 3] (5 tokens), 2 query heads over 1 kv head, head_dim 4,
// head_dim_v 3: the output holds 5 * 2 * 3 = 30 elements.
Geometry SmallGeometry(DType dtype) {
  Geometry g;
  g.seq_lens = {2, 0, 3};
  g.num_heads = 2;
  g.num_kv_heads = 1;
  g.head_dim = 4;
  g.head_dim_v = 3;
  g.dtype = dtype;
  return g;
}

QkvTensors Synthesize(const Geometry& g, uint64_t seed = 1) {
  Case c;
  c.geometry = g;
  c.data.seed = seed;
  return SynthesizeQkv(c);
}

Reference ReferenceFor(const Geometry& g) {
  const QkvTensors t = Synthesize(g);
  return ComputeReference(g, t.q, t.k, t.v);
}

// An output of `g`'s shape holding `values` rounded to `dtype`.
Tensor OutputOf(const Geometry& g, const std::vector<double>& values, DType dtype) {
  return Tensor::FromDoubles(values, dtype, Device::kCuda,
                             Shape{g.total_tokens(), g.num_heads, g.head_dim_v});
}

int64_t Index(const Geometry& g, int64_t token, int64_t head, int64_t dim) {
  return (token * g.num_heads + head) * g.head_dim_v + dim;
}

// A hand-made reference: oracle values 0.5 everywhere, with the given
// emulation error and noise floor.
Reference FixedReference(const Geometry& g, double emulation_error, double noise_floor) {
  Reference r;
  r.oracle.assign(static_cast<size_t>(g.total_tokens() * g.num_heads * g.head_dim_v), 0.5);
  r.emulated = r.oracle;
  r.emulation_error = emulation_error;
  r.noise_floor = noise_floor;
  return r;
}

// ---------------------------------------------------------------------------
// PoisonOutput and JudgeOutput

TEST(JudgeOutputTest, ExactOutputPassesWithZeroError) {
  const Geometry g = SmallGeometry(DType::kFloat64);
  const Reference r = ReferenceFor(g);
  ASSERT_EQ(r.oracle.size(), 30u);
  const Tensor output = OutputOf(g, r.oracle, DType::kFloat64);
  const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_TRUE(report.passed);
  EXPECT_EQ(report.max_abs_error, 0.0);
  EXPECT_EQ(report.max_rel_error, 0.0);
  EXPECT_EQ(report.elements, 30);
  EXPECT_EQ(report.unwritten, 0);
  EXPECT_EQ(report.non_finite, 0);
  EXPECT_THAT(report.per_sequence_max_error, ElementsAre(0.0, 0.0, 0.0));
  EXPECT_THAT(SummarizeNumerics(report), StartsWith("max abs error 0 <= bound "));
}

TEST(JudgeOutputTest, PoisonedOutputIsEntirelyUnwritten) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Geometry g = SmallGeometry(dtype);
    const Reference r = ReferenceFor(g);
    const Tensor output = OutputOf(g, r.oracle, dtype);
    PoisonOutput(output);
    for (int64_t i = 0; i < output.numel(); ++i) ASSERT_TRUE(std::isnan(output.DoubleAt(i)));
    const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
    EXPECT_FALSE(report.passed);
    EXPECT_EQ(report.unwritten, 30);
    EXPECT_EQ(report.non_finite, 0);
    EXPECT_EQ(report.worst.sequence, 0);
    EXPECT_EQ(report.worst.row, 0);
    EXPECT_EQ(report.worst.head, 0);
    EXPECT_EQ(report.worst.dim, 0);
  }
}

// Padding rows hold NaN in q, k and v, take no part in the reference and
// are counted, not judged: an output right on the sequences passes whether
// the padding rows were written or not.
TEST(JudgeOutputTest, PaddingRowsAreNaNInTheInputsAndNotJudged) {
  Geometry g = SmallGeometry(DType::kFloat32);
  g.padding = {1, 0, 2, 1};  // rows: pad, s0 s0, s2 s2 s2 after 2 pads, pad
  ASSERT_EQ(g.total_tokens(), 9);
  ASSERT_THAT(g.SequenceStarts(), ElementsAre(1, 3, 5));
  const QkvTensors t = Synthesize(g);
  for (const int64_t row : {0, 3, 4, 8}) {
    SCOPED_TRACE(row);
    EXPECT_TRUE(std::isnan(t.q.DoubleAt(row * 2 * 4)));
    EXPECT_TRUE(std::isnan(t.v.DoubleAt(row * 3 + 2)));
  }
  EXPECT_FALSE(std::isnan(t.q.DoubleAt(1 * 2 * 4)));
  const Reference r = ComputeReference(g, t.q, t.k, t.v);
  const Tensor output = OutputOf(g, r.oracle, DType::kFloat32);
  PoisonOutput(output);
  for (const int64_t row : {1, 2, 5, 6, 7}) {
    for (int64_t i = row * 6; i < (row + 1) * 6; ++i) output.SetDoubleAt(i, r.oracle[i]);
  }
  NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_TRUE(report.passed) << SummarizeNumerics(report);
  EXPECT_EQ(report.elements, 30);
  EXPECT_EQ(report.padding_elements, 24);
  EXPECT_EQ(report.padding_unwritten, 24);
  EXPECT_THAT(SummarizeNumerics(report), HasSubstr("; padding rows (not judged): left unwritten"));
  output.SetDoubleAt(0, 1.0);
  report = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_TRUE(report.passed);
  EXPECT_THAT(SummarizeNumerics(report), HasSubstr("23 of 24 elements left unwritten"));
  // A sequence's row is still judged.
  output.SetDoubleAt(1 * 6, r.oracle[1 * 6] + 1.0);
  report = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_FALSE(report.passed);
  EXPECT_EQ(report.worst.sequence, 0);
  EXPECT_EQ(report.worst.row, 0);
}

TEST(JudgeOutputTest, OneUnwrittenElementFailsAndIsLocated) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Geometry g = SmallGeometry(dtype);
    const Reference r = ReferenceFor(g);
    const Tensor output = OutputOf(g, r.oracle, dtype);
    PoisonOutput(output);
    // Write everything but sequence 2, row 1, head 1, dim 2 (token 3).
    const int64_t missing = Index(g, 3, 1, 2);
    for (int64_t i = 0; i < output.numel(); ++i) {
      if (i != missing) output.SetDoubleAt(i, r.oracle[i]);
    }
    const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
    EXPECT_FALSE(report.passed);
    EXPECT_EQ(report.unwritten, 1);
    EXPECT_EQ(report.non_finite, 0);
    EXPECT_EQ(report.worst.sequence, 2);
    EXPECT_EQ(report.worst.row, 1);
    EXPECT_EQ(report.worst.head, 1);
    EXPECT_EQ(report.worst.dim, 2);
    EXPECT_EQ(report.worst.expected, r.oracle[missing]);
    EXPECT_TRUE(std::isnan(report.worst.actual));
    // The written elements are still within the bound.
    EXPECT_LE(report.max_abs_error, report.bound);

    const std::string summary = SummarizeNumerics(report);
    EXPECT_THAT(summary, HasSubstr("; 1 of 30 elements never written"));
    EXPECT_THAT(summary, HasSubstr("; worst at sequence 2 row 1 head 1 dim 2: expected "));
    EXPECT_THAT(summary, Not(HasSubstr("NaN/Inf")));
  }
}

TEST(JudgeOutputTest, NaNOrInfWhereTheReferenceIsFiniteFails) {
  const Geometry g = SmallGeometry(DType::kFloat32);
  const Reference r = ReferenceFor(g);
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(bad);
    const Tensor output = OutputOf(g, r.oracle, DType::kFloat32);
    output.SetDoubleAt(Index(g, 1, 0, 1), bad);  // sequence 0, row 1
    const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
    EXPECT_FALSE(report.passed);
    EXPECT_EQ(report.non_finite, 1);
    EXPECT_EQ(report.unwritten, 0);
    EXPECT_EQ(report.worst.sequence, 0);
    EXPECT_EQ(report.worst.row, 1);
    EXPECT_EQ(report.worst.head, 0);
    EXPECT_EQ(report.worst.dim, 1);
    EXPECT_THAT(SummarizeNumerics(report), HasSubstr("; 1 NaN/Inf where the reference is finite"));
  }
}

TEST(JudgeOutputTest, BoundIsFactorTimesEmulationErrorPlusNoiseFloor) {
  const Geometry g = SmallGeometry(DType::kFloat64);
  const Reference r = FixedReference(g, 1e-3, 1e-4);
  const Tensor output = OutputOf(g, r.oracle, DType::kFloat64);
  const NumericReport two = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_EQ(two.tolerance_factor, 2.0);
  EXPECT_EQ(two.emulation_error, 1e-3);
  EXPECT_EQ(two.noise_floor, 1e-4);
  EXPECT_EQ(two.bound, 2.0 * 1e-3 + 1e-4);
  const NumericReport three = JudgeOutput(g, r, output, ToleranceModel{.factor = 3.0});
  EXPECT_EQ(three.tolerance_factor, 3.0);
  EXPECT_EQ(three.bound, 3.0 * 1e-3 + 1e-4);
}

TEST(JudgeOutputTest, ErrorJustAboveTheBoundFailsAndJustBelowPasses) {
  const Geometry g = SmallGeometry(DType::kFloat64);
  const Reference r = FixedReference(g, 1e-3, 1e-4);
  const double bound = 2.0 * 1e-3 + 1e-4;
  const int64_t at = Index(g, 4, 0, 0);  // sequence 2, row 2
  {
    const Tensor output = OutputOf(g, r.oracle, DType::kFloat64);
    output.SetDoubleAt(at, 0.5 + bound * (1 + 1e-6));
    const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
    EXPECT_FALSE(report.passed);
    EXPECT_GT(report.max_abs_error, report.bound);
    EXPECT_EQ(report.unwritten, 0);
    EXPECT_EQ(report.non_finite, 0);
    EXPECT_EQ(report.worst.sequence, 2);
    EXPECT_EQ(report.worst.row, 2);
    EXPECT_EQ(report.worst.head, 0);
    EXPECT_EQ(report.worst.dim, 0);
    EXPECT_THAT(SummarizeNumerics(report), HasSubstr(" > bound "));
    EXPECT_THAT(SummarizeNumerics(report), HasSubstr("worst at sequence 2 row 2 head 0 dim 0"));
  }
  {
    const Tensor output = OutputOf(g, r.oracle, DType::kFloat64);
    output.SetDoubleAt(at, 0.5 - bound * (1 - 1e-6));
    const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
    EXPECT_TRUE(report.passed);
    EXPECT_LT(report.max_abs_error, report.bound);
    EXPECT_GT(report.max_abs_error, 0.99 * report.bound);
    EXPECT_THAT(SummarizeNumerics(report), HasSubstr(" <= bound "));
    EXPECT_THAT(SummarizeNumerics(report), Not(HasSubstr("worst at")));
  }
}

TEST(JudgeOutputTest, ErrorExactlyAtTheBoundPasses) {
  const Geometry g = SmallGeometry(DType::kFloat64);
  Reference r = FixedReference(g, 0.125, 0.25);  // bound 0.5, all exact in binary
  const Tensor output = OutputOf(g, r.oracle, DType::kFloat64);
  output.SetDoubleAt(0, 1.0);
  const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_EQ(report.max_abs_error, 0.5);
  EXPECT_EQ(report.bound, 0.5);
  EXPECT_TRUE(report.passed);
}

TEST(JudgeOutputTest, PerSequenceMaxErrorLocatesTheBadSequence) {
  const Geometry g = SmallGeometry(DType::kFloat64);
  const Reference r = FixedReference(g, 1e-3, 1e-4);
  const Tensor output = OutputOf(g, r.oracle, DType::kFloat64);
  output.SetDoubleAt(Index(g, 3, 1, 0), 0.75);  // sequence 2
  output.SetDoubleAt(Index(g, 4, 0, 2), 0.625);
  const NumericReport report = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_FALSE(report.passed);
  EXPECT_THAT(report.per_sequence_max_error, ElementsAre(0.0, 0.0, 0.25));
  EXPECT_EQ(report.max_abs_error, 0.25);
  EXPECT_EQ(report.max_rel_error, 0.5);
  EXPECT_EQ(report.worst.sequence, 2);
  EXPECT_EQ(report.worst.row, 1);
  EXPECT_EQ(report.worst.head, 1);
  EXPECT_EQ(report.worst.dim, 0);
  EXPECT_EQ(report.worst.expected, 0.5);
  EXPECT_EQ(report.worst.actual, 0.75);
}

TEST(JudgeOutputTest, ReadsAnyViewOfTheOutput) {
  // A [T, Hq * Dv] view of the same elements is judged the same.
  const Geometry g = SmallGeometry(DType::kFloat32);
  const Reference r = ReferenceFor(g);
  const Tensor output = OutputOf(g, r.oracle, DType::kFloat32);
  const NumericReport flat = JudgeOutput(g, r, output.Reshape({5, 6}), ToleranceModel{});
  const NumericReport packed = JudgeOutput(g, r, output, ToleranceModel{});
  EXPECT_TRUE(flat.passed);
  EXPECT_EQ(flat.max_abs_error, packed.max_abs_error);
  EXPECT_GT(flat.max_abs_error, 0.0);  // float32 rounding of the oracle
}

// ---------------------------------------------------------------------------
// ComputeReference

TEST(ComputeReferenceTest, OracleMatchesThePackedFloat64Reference) {
  const Geometry g = SmallGeometry(DType::kFloat64);
  const Reference r = ReferenceFor(g);
  EXPECT_EQ(r.oracle.size(), 30u);
  // A float64 kernel is emulated by the naive loop: the same arithmetic in
  // another order, a few float64 ulps away at most.
  for (size_t i = 0; i < r.oracle.size(); ++i) {
    EXPECT_NEAR(r.emulated[i], r.oracle[i], 1e-14 * std::max(1.0, std::fabs(r.oracle[i])));
  }
  EXPECT_LE(r.emulation_error, 1e-14);
  for (double x : r.oracle) EXPECT_TRUE(std::isfinite(x));
}

TEST(ComputeReferenceTest, EmulationErrorIsMaxDifferenceFromTheOracle) {
  const Geometry g = SmallGeometry(DType::kBFloat16);
  const Reference r = ReferenceFor(g);
  double worst = 0.0;
  for (size_t i = 0; i < r.oracle.size(); ++i) {
    worst = std::max(worst, std::fabs(r.emulated[i] - r.oracle[i]));
    // The emulation's output is in the case's dtype.
    EXPECT_EQ(r.emulated[i], RoundToDType(r.emulated[i], DType::kBFloat16));
  }
  EXPECT_EQ(r.emulation_error, worst);
  EXPECT_GT(r.emulation_error, 0.0);
  EXPECT_LT(r.emulation_error, 0.05);
}

TEST(ComputeReferenceTest, OracleIsComputedFromTheGeometry) {
  // A sequence of one token returns its v row: here token 1 of [1, 1].
  Geometry g = SmallGeometry(DType::kFloat64);
  g.seq_lens = {1, 1};
  const QkvTensors t = Synthesize(g);
  const Reference r = ComputeReference(g, t.q, t.k, t.v);
  ASSERT_EQ(r.oracle.size(), 12u);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t d = 0; d < 3; ++d) {
      EXPECT_EQ(r.oracle[Index(g, 1, h, d)], t.v.DoubleAt(3 + d));
    }
  }
}

// v near 1 in every element gives outputs of magnitude about 1.
Reference ReferenceOfMagnitudeOne(DType dtype) {
  Geometry g = SmallGeometry(dtype);
  g.seq_lens = {7, 9};
  const QkvTensors t = Synthesize(g, 17);
  const Tensor v = Tensor::Zeros(dtype, Device::kCuda, t.v.shape());
  for (int64_t i = 0; i < v.numel(); ++i) v.SetDoubleAt(i, 1.0 + 0.2 * std::sin(1.0 + i));
  return ComputeReference(g, t.q, t.k, v);
}

TEST(ComputeReferenceTest, NoiseFloorForBFloat16IsAboutTwoUlpsAtOne) {
  const Reference r = ReferenceOfMagnitudeOne(DType::kBFloat16);
  // 2 * max |((ref + 0.3) - 0.3) - ref| in bfloat16 at |ref| ~ 1: 2 * 2^-8
  // to 2 * 2^-7.
  EXPECT_GE(r.noise_floor, 2 * 0x1.0p-9);
  EXPECT_LE(r.noise_floor, 2 * 0x1.0p-6);
}

TEST(ComputeReferenceTest, NoiseFloorForFloat64IsNegligible) {
  const Reference r = ReferenceOfMagnitudeOne(DType::kFloat64);
  EXPECT_LE(r.noise_floor, 1e-15);
  EXPECT_LE(r.emulation_error, 1e-14);
}

TEST(ComputeReferenceTest, NoiseFloorGrowsAsPrecisionShrinks) {
  const double f64 = ReferenceOfMagnitudeOne(DType::kFloat64).noise_floor;
  const double f32 = ReferenceOfMagnitudeOne(DType::kFloat32).noise_floor;
  const double f16 = ReferenceOfMagnitudeOne(DType::kFloat16).noise_floor;
  const double bf16 = ReferenceOfMagnitudeOne(DType::kBFloat16).noise_floor;
  EXPECT_LT(f64, f32);
  EXPECT_LT(f32, f16);
  EXPECT_LT(f16, bf16);
  EXPECT_GT(f32, 0.0);
  EXPECT_LE(f32, 2 * 0x1.0p-22);
}

TEST(ComputeReferenceTest, BatchedTensorsGiveThePackedReference) {
  Geometry g = SmallGeometry(DType::kFloat32);
  g.seq_lens = {4, 4};
  const QkvTensors t = Synthesize(g);
  const Reference packed = ComputeReference(g, t.q, t.k, t.v);
  const Reference batched = ComputeReference(g, t.q.Reshape({2, 4, 2, 4}),
                                             t.k.Reshape({2, 4, 1, 4}), t.v.Reshape({2, 4, 1, 3}));
  EXPECT_EQ(batched.oracle, packed.oracle);
}

// ---------------------------------------------------------------------------
// SummarizeNumerics

TEST(SummarizeNumericsTest, PassingSummaryHasTheBoundTerms) {
  NumericReport report;
  report.max_abs_error = 0.00125;
  report.bound = 0.0039;
  report.tolerance_factor = 2;
  report.emulation_error = 0.0015;
  report.noise_floor = 0.0009;
  report.max_rel_error = 0.01;
  report.passed = true;
  EXPECT_EQ(SummarizeNumerics(report),
            "max abs error 0.00125 <= bound 0.0039 (2 x emulation 0.0015 + noise 0.0009), max rel "
            "error 0.01");
}

TEST(SummarizeNumericsTest, FailingSummaryCountsUnwrittenAndNonFinite) {
  NumericReport report;
  report.elements = 30;
  report.unwritten = 4;
  report.non_finite = 2;
  report.worst = {1, 2, 0, 3, 0.5, std::numeric_limits<double>::quiet_NaN()};
  report.passed = false;
  EXPECT_EQ(SummarizeNumerics(report),
            "max abs error 0 <= bound 0 (0 x emulation 0 + noise 0), max rel error 0; 4 of 30 "
            "elements never written; 2 NaN/Inf where the reference is finite; worst at sequence 1 "
            "row 2 head 0 dim 3: expected 0.5, got nan");
}

}  // namespace
}  // namespace varlen
