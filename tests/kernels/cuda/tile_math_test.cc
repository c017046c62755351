// Tests the tile arithmetic of the CUDA kernel (kernels/cuda/tile_math.h)
// on the CPU: the conversions against the harness's own rounding, the
// boundary masking and head-dim padding of tile loads, and the online
// softmax streamed over key tiles against float64 softmax on the same row.

#include "tile_math.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "varlen/core/dtype.h"

namespace varlen::cuda_kernels {
namespace {

// Every 4099th float bit pattern (all exponents, both signs, NaN and inf
// among them) plus the rounding edges of both half formats.
std::vector<float> FloatSweep() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    values.push_back(FloatOf(static_cast<uint32_t>(bits)));
  }
  for (float edge : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 6.1035156e-05f, 5.9604645e-08f,
                     2.9802322e-08f, 2.9802326e-08f, 8.940697e-08f, 1.0009766f, 1.0004883f,
                     1.0014648f, 1.00390625f, 1.01171875f, 3.0e38f}) {
    values.push_back(edge);
    values.push_back(-edge);
    values.push_back(std::nextafter(edge, 0.0f));
    values.push_back(std::nextafter(edge, std::numeric_limits<float>::infinity()));
  }
  return values;
}

TEST(TileMathTest, HalfEncodingsRoundToNearestEvenLikeTheHarness) {
  for (float x : FloatSweep()) {
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(x))));
      EXPECT_TRUE(std::isnan(Float16BitsToFloat(FloatToFloat16Bits(x))));
      continue;
    }
    ASSERT_EQ(FloatToBFloat16Bits(x), DoubleToBFloat16Bits(x)) << x;
    ASSERT_EQ(FloatToFloat16Bits(x), DoubleToFloat16Bits(x)) << x;
  }
}

TEST(TileMathTest, HalfDecodingsAreExactForEveryEncoding) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const double bf = BFloat16BitsToDouble(h), fp = Float16BitsToDouble(h);
    if (std::isnan(bf)) {
      EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(h)));
    } else {
      ASSERT_EQ(BFloat16BitsToFloat(h), bf) << bits;
    }
    if (std::isnan(fp)) {
      EXPECT_TRUE(std::isnan(Float16BitsToFloat(h)));
    } else {
      ASSERT_EQ(Float16BitsToFloat(h), fp) << bits;
    }
  }
}

TEST(TileMathTest, TileLoadsStopAtTheSequenceAndAtHeadDim) {
  // A tile of 64 rows x 80 padded columns over a sequence with 5 rows left
  // and head dim 72, rows 1000 elements apart starting at 123.
  const TileSource tile{
      .base = 123, .token_stride = 1000, .valid_rows = 5, .valid_cols = 72, .padded_cols = 80};
  int64_t read = 0, highest = -1;
  for (int e = 0; e < 64 * 80; ++e) {
    const int row = e / 80, col = e % 80;
    const int64_t at = TileElementSource(tile, e);
    if (row < 5 && col < 72) {
      EXPECT_EQ(at, 123 + row * 1000 + col);
      ++read;
      highest = std::max(highest, at);
    } else {
      EXPECT_EQ(at, -1) << "row " << row << " col " << col;
    }
  }
  EXPECT_EQ(read, 5 * 72);
  EXPECT_EQ(highest, 123 + 4 * 1000 + 71);
}

// The softmax of `logits` applied to `values` (one value column), in
// float64: what a row's output should be.
double SoftmaxDot(const std::vector<float>& logits, const std::vector<float>& values, float scale) {
  double max = -std::numeric_limits<double>::infinity();
  for (float s : logits) max = std::max(max, double{s} * scale);
  double sum = 0, dot = 0;
  for (size_t c = 0; c < logits.size(); ++c) {
    const double p = std::exp(double{logits[c]} * scale - max);
    sum += p;
    dot += p * values[c];
  }
  return dot / sum;
}

// Streams one row through SoftmaxTileRow in tiles of `tile_keys`, the way
// the kernel does: masked columns hold garbage, the accumulator is rescaled
// before each tile's P V is added.
template <TileElement E>
float StreamRow(const std::vector<float>& logits, const std::vector<float>& values, float scale,
                int tile_keys) {
  RowState state = InitialRowState();
  float acc = 0.0f;
  const int keys = static_cast<int>(logits.size());
  std::vector<float> tile(static_cast<size_t>(tile_keys));
  for (int first = 0; first < keys; first += tile_keys) {
    const int valid = std::min(tile_keys, keys - first);
    for (int c = 0; c < tile_keys; ++c) {
      // Past the sequence: whatever the tile held (huge, NaN) must not count.
      tile[c] = c < valid ? logits[first + c] : (c % 2 ? std::nanf("") : 3e38f);
    }
    const float factor = SoftmaxTileRow<E>(tile.data(), {0, valid}, tile_keys, scale, &state);
    acc *= factor;
    for (int c = 0; c < tile_keys; ++c) {
      const float v = first + c < keys ? values[first + c] : 0.0f;  // zero-filled V rows
      acc += tile[c] * v;
    }
  }
  return FinalizeOutput(acc, state, keys > 0);
}

TEST(TileMathTest, OnlineSoftmaxMatchesFloat64SoftmaxAcrossTiles) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int keys : {1, 2, 15, 16, 63, 64, 65, 127, 200, 1000}) {
    for (float spread : {1.0f, 30.0f, 1e4f}) {
      std::vector<float> logits(static_cast<size_t>(keys)), values(logits.size());
      for (int c = 0; c < keys; ++c) {
        logits[c] = normal(rng) * spread;
        values[c] = normal(rng);
      }
      const double expected = SoftmaxDot(logits, values, 0.125f);
      for (int tile : {16, 32, 64}) {
        // float32 keeps P: rounding only in the float sums.
        EXPECT_NEAR(StreamRow<TileElement::kFloat32>(logits, values, 0.125f, tile), expected,
                    1e-5 * (1 + std::fabs(expected)))
            << keys << " keys, spread " << spread << ", tile " << tile;
        // bfloat16 rounds P to 8 bits: within a few of its units, relative to |v|.
        EXPECT_NEAR(StreamRow<TileElement::kBFloat16>(logits, values, 0.125f, tile), expected, 2e-2)
            << keys << " keys, spread " << spread << ", tile " << tile;
      }
    }
  }
}

TEST(TileMathTest, RescalesEverythingAccumulatedWhenTheMaximumGrows) {
  // Logits rise tile after tile, so every tile moves the maximum: a missing
  // rescale of the accumulator or of the sum shows at once.
  std::vector<float> logits, values;
  for (int c = 0; c < 256; ++c) {
    logits.push_back(static_cast<float>(c) * 0.5f);
    values.push_back(static_cast<float>(c % 7) - 3.0f);
  }
  const double expected = SoftmaxDot(logits, values, 1.0f);
  EXPECT_NEAR(StreamRow<TileElement::kFloat32>(logits, values, 1.0f, 64), expected, 1e-5);

  RowState state = InitialRowState();
  std::vector<float> tile = {1.0f, 2.0f};
  // Nothing accumulated yet: the factor is exp(-inf) = 0.
  EXPECT_EQ(SoftmaxTileRow<TileElement::kFloat32>(tile.data(), {0, 2}, 2, 1.0f, &state), 0.0f);
  tile = {4.0f, 3.0f};
  EXPECT_FLOAT_EQ(SoftmaxTileRow<TileElement::kFloat32>(tile.data(), {0, 2}, 2, 1.0f, &state),
                  std::exp(2.0f - 4.0f));
  EXPECT_EQ(state.max, 4.0f);
  EXPECT_FLOAT_EQ(state.sum, (std::exp(-1.0f) + 1.0f) * std::exp(-2.0f) + 1.0f + std::exp(-1.0f));
}

TEST(TileMathTest, RoundsProbabilitiesToTheInputDtypeButSumsThemUnrounded) {
  RowState state = InitialRowState();
  std::vector<float> tile = {0.0f, -0.3f, 0.0f, 0.0f};
  SoftmaxTileRow<TileElement::kBFloat16>(tile.data(), {0, 2}, 4, 1.0f, &state);
  EXPECT_EQ(tile[0], 1.0f);
  EXPECT_EQ(tile[1], BFloat16BitsToFloat(FloatToBFloat16Bits(std::exp(-0.3f))));
  EXPECT_NE(tile[1], std::exp(-0.3f));
  EXPECT_EQ(tile[2], 0.0f);  // masked
  EXPECT_EQ(tile[3], 0.0f);
  EXPECT_EQ(state.sum, 1.0f + std::exp(-0.3f));
}

TEST(TileMathTest, ASequenceWithoutKeysGivesZeros) {
  EXPECT_EQ(FinalizeOutput(123.0f, InitialRowState(), /*has_keys=*/false), 0.0f);
  EXPECT_EQ(FinalizeOutput(3.0f, RowState{0.0f, 2.0f}, /*has_keys=*/true), 1.5f);
  EXPECT_EQ(FinalizeOutput(3.0f, RowState{0.0f, 2.0f}, /*has_keys=*/false, /*sink=*/1.0f), 0.0f);
}

TEST(TileMathTest, AWindowMasksTheColumnsOutsideTheRowsKeys) {
  // Keys [10, 20) of a sequence, seen through the tile of keys [16, 32) of
  // which 12 are the sequence's: columns [0, 4).
  const TileColumns cols = AttendedColumns(KeyRange{10, 20}, 16, 12);
  EXPECT_EQ(cols.first, 0);
  EXPECT_EQ(cols.end, 4);
  // Entirely before, entirely after, and past the sequence's keys.
  EXPECT_EQ(AttendedColumns(KeyRange{0, 5}, 16, 16).end, 0);
  EXPECT_EQ(AttendedColumns(KeyRange{40, 50}, 16, 16).first, 16);
  EXPECT_EQ(AttendedColumns(KeyRange{40, 50}, 16, 16).end, 16);
  EXPECT_EQ(AttendedColumns(KeyRange{18, 90}, 16, 12).end, 12);

  RowState state = InitialRowState();
  std::vector<float> tile = {9.0f, 1.0f, 2.0f, std::nanf("")};
  SoftmaxTileRow<TileElement::kFloat32>(tile.data(), {1, 3}, 4, 1.0f, &state);
  EXPECT_EQ(tile[0], 0.0f);  // masked: its large logit is not the maximum
  EXPECT_EQ(tile[1], std::exp(-1.0f));
  EXPECT_EQ(tile[2], 1.0f);
  EXPECT_EQ(tile[3], 0.0f);
  EXPECT_EQ(state.max, 2.0f);
  EXPECT_EQ(state.sum, std::exp(-1.0f) + 1.0f);
}

TEST(TileMathTest, ASinkJoinsTheRowSumAgainstTheMaximum) {
  // Logits {0, 1} and a sink s: out = (e^0 v0 + e^1 v1) / (e^0 + e^1 + e^s).
  const RowState state{1.0f, std::exp(-1.0f) + 1.0f};  // sums taken against max 1
  const float acc = std::exp(-1.0f) * 2.0f + 1.0f * 4.0f;
  for (const float sink : {-3.0f, 1.0f, 5.0f, 90.0f}) {
    SCOPED_TRACE(sink);
    const double expected = (2.0 + std::exp(1.0) * 4.0) / (1.0 + std::exp(1.0) + std::exp(sink));
    EXPECT_NEAR(FinalizeOutput(acc, state, true, sink), expected, 1e-6 * (1.0 + expected));
  }
  EXPECT_EQ(FinalizeOutput(acc, state, true, -std::numeric_limits<float>::infinity()),
            acc / state.sum);
}

}  // namespace
}  // namespace varlen::cuda_kernels
