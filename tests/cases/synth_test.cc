// Tests data synthesis: the fixed PRNG, determinism, distributions and tensor shapes.

#include "varlen/cases/synth.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varlen/cases/case.h"
#include "varlen/core/dtype.h"
#include "varlen/core/tensor.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;

Case SynthCase(std::vector<int64_t> seq_lens, int64_t heads, int64_t kv_heads, int64_t dim,
               int64_t dim_v, DType dtype, uint64_t seed,
               Distribution distribution = Distribution::kNormal) {
  Case c;
  c.name = "synth";
  c.source = "unit test";
  c.geometry.seq_lens = std::move(seq_lens);
  c.geometry.num_heads = heads;
  c.geometry.num_kv_heads = kv_heads;
  c.geometry.head_dim = dim;
  c.geometry.head_dim_v = dim_v;
  c.geometry.dtype = dtype;
  c.data.seed = seed;
  c.data.distribution = distribution;
  return c;
}

// 32768 float64 samples per tensor.
Case ManySamples(Distribution distribution, uint64_t seed = 7, DType dtype = DType::kFloat64) {
  return SynthCase({4096}, 1, 1, 8, 8, dtype, seed, distribution);
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.DoubleAtLogical(i);
  return out;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const size_t bytes = static_cast<size_t>(a.numel()) * DTypeSize(a.dtype());
  return std::memcmp(a.data<unsigned char>(), b.data<unsigned char>(), bytes) == 0;
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

struct Moments {
  double mean = 0.0;
  double variance = 0.0;
};

Moments MomentsOf(const std::vector<double>& values) {
  Moments m;
  for (double v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (double v : values) m.variance += (v - m.mean) * (v - m.mean);
  m.variance /= static_cast<double>(values.size());
  return m;
}

// ---------------------------------------------------------------------------
// The generator

TEST(PrngTest, XoshiroStarStarSeededBySplitMix64) {
  // Values computed independently from the published algorithms.
  Prng zero(0);
  EXPECT_EQ(zero.Next(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(zero.Next(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(zero.Next(), 0x1a5f849d4933e6e0ULL);

  Prng seeded(1234);
  EXPECT_EQ(seeded.NextUnit(), 0.045582166320754625);
  EXPECT_EQ(seeded.NextUnit(), 0.8428688286913699);
}

TEST(PrngTest, UnitIsInZeroOneWith53Bits) {
  Prng prng(99);
  for (int i = 0; i < 10000; ++i) {
    const double u = prng.NextUnit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, std::ldexp(std::floor(std::ldexp(u, 53)), -53));
  }
}

// ---------------------------------------------------------------------------
// Determinism

TEST(SynthesizeQkvTest, SameCaseGivesBitIdenticalTensors) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Case c = SynthCase({3, 0, 5}, 4, 2, 8, 6, dtype, 42);
    const QkvTensors a = SynthesizeQkv(c);
    const QkvTensors b = SynthesizeQkv(c);
    EXPECT_TRUE(SameBytes(a.q, b.q));
    EXPECT_TRUE(SameBytes(a.k, b.k));
    EXPECT_TRUE(SameBytes(a.v, b.v));
  }
}

TEST(SynthesizeQkvTest, GoldenValuesOfSeed1234Normal) {
  // The first values of each stream for seed 1234, "normal", float32,
  // computed independently. A change of algorithm changes every corpus case.
  const QkvTensors t = SynthesizeQkv(SynthCase({2}, 1, 1, 2, 2, DType::kFloat32, 1234));
  const uint32_t q[] = {0xbeb66b56u, 0xbd8faed8u, 0xbfa23de1u, 0x3f0b3974u};
  const uint32_t k[] = {0xbe86a1d0u, 0x3d49ab92u, 0x3fcac793u, 0xbe8f0334u};
  const uint32_t v[] = {0xbfb22072u, 0x3ed781ceu, 0x3e9b06afu, 0x3df32cdbu};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(FloatBits(t.q.data<float>()[i]), q[i]) << "q[" << i << "]";
    EXPECT_EQ(FloatBits(t.k.data<float>()[i]), k[i]) << "k[" << i << "]";
    EXPECT_EQ(FloatBits(t.v.data<float>()[i]), v[i]) << "v[" << i << "]";
  }
  EXPECT_EQ(t.q.data<float>()[0], -0.3562876582145691f);
  EXPECT_EQ(t.v.data<float>()[3], 0.11873789876699448f);
}

// The distributions built on one Irwin-Hall normal per element, by their
// definition, element by element from the public generator: whatever the
// synthesis does to go faster, each value keeps its bits.
TEST(SynthesizeQkvTest, NormalFamiliesAreTheirDefinitionElementByElement) {
  const auto normal = [](Prng& prng) {
    double sum = 0.0;
    for (int i = 0; i < 12; ++i) sum += prng.NextUnit();
    return sum - 6.0;
  };
  for (Distribution d : {Distribution::kNormal, Distribution::kLargeLogits,
                         Distribution::kDominantLogit, Distribution::kConstantRows}) {
    for (const std::vector<int64_t>& lengths : std::vector<std::vector<int64_t>>{
             // rows of 10: 1,010 elements (spikes and constant rows among them)
             // and 40,000 (past a group of chunks, in lanes), 30 (one at a time)
             {50, 51},
             {2000, 0, 2000},
             {3}}) {
      const Case c = SynthCase(lengths, 2, 2, 5, 5, DType::kFloat64, 77, d);
      const QkvTensors t = SynthesizeQkv(c);
      const std::pair<SynthStream, const Tensor*> streams[] = {
          {SynthStream::kQ, &t.q}, {SynthStream::kK, &t.k}, {SynthStream::kV, &t.v}};
      for (const auto& [stream, tensor] : streams) {
        Prng prng(c.data.seed * 0x100000001b3ULL + static_cast<uint64_t>(stream));
        for (int64_t i = 0; i < tensor->numel(); ++i) {
          const uint64_t row = static_cast<uint64_t>(i / 10 + 1);
          double expected = normal(prng);
          if (d == Distribution::kLargeLogits && stream != SynthStream::kV) expected *= 100.0;
          if (d == Distribution::kDominantLogit && stream == SynthStream::kK &&
              Prng(c.data.seed ^ (0x5bd1e995ULL * row)).Next() % 32 == 0) {
            expected *= 8.0;
          }
          if (d == Distribution::kConstantRows && stream == SynthStream::kQ &&
              Prng(c.data.seed ^ (0x2545f491ULL * row)).Next() % 2 == 0) {
            expected = 0.0;
          }
          ASSERT_EQ(tensor->data<double>()[i], expected)
              << DistributionName(d) << ", stream " << static_cast<int>(stream) << ", element " << i
              << " of " << tensor->numel();
        }
      }
    }
  }
}

TEST(SynthesizeQkvTest, DifferentSeedsDiffer) {
  const QkvTensors a = SynthesizeQkv(SynthCase({64}, 2, 2, 8, 8, DType::kFloat32, 1));
  const QkvTensors b = SynthesizeQkv(SynthCase({64}, 2, 2, 8, 8, DType::kFloat32, 2));
  int same = 0;
  for (int64_t i = 0; i < a.q.numel(); ++i) same += a.q.DoubleAt(i) == b.q.DoubleAt(i);
  EXPECT_LT(same, 3);
}

TEST(SynthesizeQkvTest, StreamsOfOneSeedDiffer) {
  const QkvTensors t = SynthesizeQkv(SynthCase({64}, 2, 2, 8, 8, DType::kFloat32, 5));
  int qk = 0, qv = 0, kv = 0;
  for (int64_t i = 0; i < t.q.numel(); ++i) {
    qk += t.q.DoubleAt(i) == t.k.DoubleAt(i);
    qv += t.q.DoubleAt(i) == t.v.DoubleAt(i);
    kv += t.k.DoubleAt(i) == t.v.DoubleAt(i);
  }
  EXPECT_LT(qk, 3);
  EXPECT_LT(qv, 3);
  EXPECT_LT(kv, 3);
  // Neighbouring seeds do not share streams either.
  std::map<double, int> firsts;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const QkvTensors s = SynthesizeQkv(SynthCase({1}, 1, 1, 1, 1, DType::kFloat64, seed));
    ++firsts[s.q.DoubleAt(0)];
    ++firsts[s.k.DoubleAt(0)];
    ++firsts[s.v.DoubleAt(0)];
  }
  EXPECT_EQ(firsts.size(), 12u);
}

// ---------------------------------------------------------------------------
// Distributions

TEST(DistributionTest, UniformIsInMinusOneToOne) {
  const QkvTensors t = SynthesizeQkv(ManySamples(Distribution::kUniform));
  for (const Tensor* tensor : {&t.q, &t.k, &t.v}) {
    const std::vector<double> values = Values(*tensor);
    double lo = 1.0, hi = -1.0;
    for (double v : values) {
      ASSERT_GE(v, -1.0);
      ASSERT_LT(v, 1.0);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_LT(lo, -0.999);
    EXPECT_GT(hi, 0.999);
    const Moments m = MomentsOf(values);
    EXPECT_NEAR(m.mean, 0.0, 0.02);
    EXPECT_NEAR(m.variance, 1.0 / 3.0, 0.02);
  }
}

TEST(DistributionTest, SparseSmallIntegersAreMostlyZero) {
  const QkvTensors t = SynthesizeQkv(ManySamples(Distribution::kSparseSmallIntegers));
  for (const Tensor* tensor : {&t.q, &t.k, &t.v}) {
    const std::vector<double> values = Values(*tensor);
    std::map<double, int> counts;
    for (double v : values) {
      ASSERT_EQ(v, std::round(v));
      ASSERT_GE(v, -2.0);
      ASSERT_LE(v, 2.0);
      ++counts[v];
    }
    const double n = static_cast<double>(values.size());
    // 80% zeros, the rest uniform over the five integers of [-2, 2] (zero
    // included): about 84% zeros and 4% each of -2, -1, 1, 2.
    EXPECT_GE(counts[0.0] / n, 0.80);
    EXPECT_LE(counts[0.0] / n, 0.87);
    for (double v : {-2.0, -1.0, 1.0, 2.0}) EXPECT_NEAR(counts[v] / n, 0.04, 0.01) << v;
  }
}

TEST(DistributionTest, NormalHasMeanZeroAndVarianceOne) {
  const QkvTensors t = SynthesizeQkv(ManySamples(Distribution::kNormal));
  for (const Tensor* tensor : {&t.q, &t.k, &t.v}) {
    const std::vector<double> values = Values(*tensor);
    const Moments m = MomentsOf(values);
    EXPECT_NEAR(m.mean, 0.0, 0.03);
    EXPECT_NEAR(m.variance, 1.0, 0.05);
    double largest = 0.0;
    for (double v : values) {
      ASSERT_LE(std::fabs(v), 6.0);  // a sum of twelve uniforms minus 6
      largest = std::max(largest, std::fabs(v));
    }
    EXPECT_GT(largest, 3.0);
  }
}

TEST(DistributionTest, LargeLogitsScaleQAndKByOneHundredButNotV) {
  const QkvTensors normal = SynthesizeQkv(ManySamples(Distribution::kNormal, 11));
  const QkvTensors large = SynthesizeQkv(ManySamples(Distribution::kLargeLogits, 11));
  for (int64_t i = 0; i < normal.q.numel(); ++i) {
    ASSERT_EQ(large.q.DoubleAt(i), 100.0 * normal.q.DoubleAt(i)) << i;
    ASSERT_EQ(large.k.DoubleAt(i), 100.0 * normal.k.DoubleAt(i)) << i;
  }
  EXPECT_TRUE(SameBytes(large.v, normal.v));
  EXPECT_NEAR(MomentsOf(Values(large.q)).variance, 1e4, 500);
}

// ---------------------------------------------------------------------------
// Rounding and shapes

TEST(SynthesizeQkvTest, ValuesAreTheFloat64SamplesRoundedOnceToTheDType) {
  const QkvTensors exact = SynthesizeQkv(SynthCase({16}, 2, 2, 8, 8, DType::kFloat64, 3));
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const QkvTensors t = SynthesizeQkv(SynthCase({16}, 2, 2, 8, 8, dtype, 3));
    EXPECT_EQ(t.q.dtype(), dtype);
    int rounded = 0;
    for (int64_t i = 0; i < t.q.numel(); ++i) {
      ASSERT_EQ(t.q.DoubleAt(i), RoundToDType(exact.q.DoubleAt(i), dtype)) << i;
      ASSERT_EQ(t.v.DoubleAt(i), RoundToDType(exact.v.DoubleAt(i), dtype)) << i;
      rounded += t.q.DoubleAt(i) != exact.q.DoubleAt(i);
    }
    EXPECT_GT(rounded, 0);
  }
}

TEST(SynthesizeQkvTest, PackedShapesOnTheCudaTag) {
  const QkvTensors t = SynthesizeQkv(SynthCase({3, 0, 5}, 6, 2, 8, 5, DType::kBFloat16, 1));
  EXPECT_EQ(t.q.shape(), (Shape{8, 6, 8}));
  EXPECT_EQ(t.k.shape(), (Shape{8, 2, 8}));
  EXPECT_EQ(t.v.shape(), (Shape{8, 2, 5}));
  for (const Tensor* tensor : {&t.q, &t.k, &t.v}) {
    EXPECT_EQ(tensor->dtype(), DType::kBFloat16);
    EXPECT_EQ(tensor->device(), Device::kCuda);
    EXPECT_TRUE(tensor->has_storage());
    EXPECT_TRUE(tensor->is_contiguous());
  }
}

TEST(SynthesizeQkvTest, EmptyBatchGivesEmptyTensors) {
  const QkvTensors t = SynthesizeQkv(SynthCase({}, 2, 1, 4, 4, DType::kFloat32, 1));
  EXPECT_EQ(t.q.shape(), (Shape{0, 2, 4}));
  EXPECT_EQ(t.v.shape(), (Shape{0, 1, 4}));
}

TEST(SynthesizeQkvTest, BatchedLayoutShapes) {
  Case c = SynthCase({4, 4}, 2, 1, 8, 6, DType::kFloat16, 1);
  c.call.profile = Profile::kFlashinferCudnn;
  c.call.layout = QLayout::kBatched;
  c.call.bsz = 2;
  c.call.seq_len = 4;
  const QkvTensors t = SynthesizeQkv(c);
  EXPECT_EQ(t.q.shape(), (Shape{2, 4, 2, 8}));
  EXPECT_EQ(t.k.shape(), (Shape{2, 4, 1, 8}));
  EXPECT_EQ(t.v.shape(), (Shape{2, 4, 1, 6}));
  const QkvTensors shapes = ShapeOnlyQkv(c);
  EXPECT_EQ(shapes.q.shape(), (Shape{2, 4, 2, 8}));
  EXPECT_EQ(shapes.v.shape(), (Shape{2, 4, 1, 6}));

  // The batched layout holds the same values as the packed one.
  Case packed = c;
  packed.call.layout = QLayout::kPacked;
  packed.call.bsz.reset();
  packed.call.seq_len.reset();
  const QkvTensors flat = SynthesizeQkv(packed);
  EXPECT_EQ(Values(flat.q), Values(t.q));
}

TEST(SynthesizeQkvTest, MergedHeadsAreViewsThatSplitBack) {
  Case c = SynthCase({4, 4}, 2, 1, 8, 8, DType::kFloat16, 1);
  c.call.profile = Profile::kVllmFlashAttnFa2;
  c.call.seq_len = 8;
  c.call.merged_heads = true;
  for (QLayout layout : {QLayout::kBatched, QLayout::kBatchedFusedQkv}) {
    c.call.layout = layout;
    const QkvTensors t = SynthesizeQkv(c);
    EXPECT_EQ(t.q.shape(), (Shape{1, 8, 16}));
    EXPECT_EQ(t.k.shape(), (Shape{1, 8, 8}));
    EXPECT_EQ(ShapeOnlyQkv(c).q.shape(), (Shape{1, 8, 16}));
    const QkvTensors apart = HeadsApart(c, t);
    EXPECT_EQ(apart.q.shape(), (Shape{1, 8, 2, 8}));
    EXPECT_EQ(apart.v.shape(), (Shape{1, 8, 1, 8}));
    EXPECT_TRUE(apart.q.SharesStorageWith(t.q));
    // The same values as the heads-apart layout.
    Case four_d = c;
    four_d.call.merged_heads = false;
    EXPECT_EQ(Values(apart.q), Values(SynthesizeQkv(four_d).q));
    EXPECT_EQ(Values(apart.v), Values(SynthesizeQkv(four_d).v));
  }
}

TEST(ShapeOnlyQkvTest, ExactShapesWithoutStorage) {
  // Two million tokens: far too large to allocate in a unit test.
  const Case c = SynthCase({2000000}, 16, 8, 72, 64, DType::kBFloat16, 1);
  const QkvTensors t = ShapeOnlyQkv(c);
  EXPECT_EQ(t.q.shape(), (Shape{2000000, 16, 72}));
  EXPECT_EQ(t.k.shape(), (Shape{2000000, 8, 72}));
  EXPECT_EQ(t.v.shape(), (Shape{2000000, 8, 64}));
  for (const Tensor* tensor : {&t.q, &t.k, &t.v}) {
    EXPECT_FALSE(tensor->has_storage());
    EXPECT_TRUE(tensor->defined());
    EXPECT_EQ(tensor->dtype(), DType::kBFloat16);
    EXPECT_EQ(tensor->device(), Device::kCuda);
  }
  EXPECT_EQ(t.q.numel(), int64_t{2304000000});
}

}  // namespace
}  // namespace varlen
