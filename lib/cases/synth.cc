#include "varlen/cases/synth.h"

#include <cstring>

namespace varlen {
namespace {

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

double Sample(Prng& prng, Distribution distribution, bool is_query_or_key) {
  switch (distribution) {
    case Distribution::kUniform:
      return 2.0 * prng.NextUnit() - 1.0;
    case Distribution::kSparseSmallIntegers: {
      if (prng.NextUnit() < 0.8) return 0.0;
      return static_cast<double>(static_cast<int64_t>(prng.Next() % 5) - 2);
    }
    case Distribution::kNormal:
    case Distribution::kLargeLogits: {
      double sum = 0.0;  // Irwin-Hall: mean 6, variance 1
      for (int i = 0; i < 12; ++i) sum += prng.NextUnit();
      const double normal = sum - 6.0;
      // q.k has variance D; times scale D^-1/2 gives ~N(0, 1) logits, and a
      // factor 100 on each of q and k makes them ~N(0, 1e4).
      return distribution == Distribution::kLargeLogits && is_query_or_key ? 100.0 * normal
                                                                           : normal;
    }
  }
  return 0.0;
}

Shape QkvShape(const Case& c, int64_t heads, int64_t dim) {
  const int64_t tokens = c.geometry.total_tokens();
  if (c.call.layout == QLayout::kBatched) {
    const int64_t bsz = c.call.bsz.value_or(1);
    return {bsz, tokens / bsz, heads, dim};
  }
  return {tokens, heads, dim};
}

Tensor Fill(const Case& c, SynthStream stream, Shape shape) {
  Tensor t = Tensor::Zeros(c.geometry.dtype, Device::kCuda, std::move(shape));
  Prng prng(c.data.seed * 0x100000001b3ULL + static_cast<uint64_t>(stream));
  const bool query_or_key = stream != SynthStream::kV;
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.SetDoubleAt(i, Sample(prng, c.data.distribution, query_or_key));
  }
  return t;
}

// q, k and v as the column views qkv.split() makes of one projection output
// [T, (H + 2*KV) * D], holding the values of `dense` (so a case has the same
// data in every layout).
QkvTensors FuseQkv(const QkvTensors& dense) {
  const int64_t tokens = dense.q.size(0), dim = dense.q.size(2);
  const int64_t q_width = dense.q.size(1) * dim, kv_width = dense.k.size(1) * dim;
  const int64_t width = q_width + 2 * kv_width;
  const Shape shape = {tokens, width};
  const Tensor fused = dense.q.has_storage()
                           ? Tensor::Zeros(dense.q.dtype(), dense.q.device(), shape)
                           : Tensor::ShapeOnly(dense.q.dtype(), dense.q.device(), shape);
  if (fused.has_storage()) {
    const size_t size = DTypeSize(fused.dtype());
    unsigned char* to = fused.mutable_data<unsigned char>();
    int64_t column = 0;
    for (const Tensor* part : {&dense.q, &dense.k, &dense.v}) {
      const int64_t part_width = part->size(1) * dim;
      for (int64_t t = 0; t < tokens; ++t) {
        std::memcpy(to + (t * width + column) * size,
                    part->data<unsigned char>() + t * part_width * size, part_width * size);
      }
      column += part_width;
    }
  }
  auto view = [&](const Tensor& part, int64_t column) {
    return fused.AsStrided({tokens, part.size(1), dim}, {width, dim, 1}, column);
  };
  return {view(dense.q, 0), view(dense.k, q_width), view(dense.v, q_width + kv_width)};
}

QkvTensors InLayout(const Case& c, QkvTensors dense) {
  return c.call.layout == QLayout::kFusedQkv ? FuseQkv(dense) : dense;
}

}  // namespace

Prng::Prng(uint64_t seed) {
  for (uint64_t& s : state_) s = SplitMix64(&seed);
}

uint64_t Prng::Next() {
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return result;
}

double Prng::NextUnit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

QkvTensors SynthesizeQkv(const Case& c) {
  const Geometry& g = c.geometry;
  return InLayout(c, {Fill(c, SynthStream::kQ, QkvShape(c, g.num_heads, g.head_dim)),
                      Fill(c, SynthStream::kK, QkvShape(c, g.num_kv_heads, g.head_dim)),
                      Fill(c, SynthStream::kV, QkvShape(c, g.num_kv_heads, g.head_dim_v))});
}

QkvTensors ShapeOnlyQkv(const Case& c) {
  const Geometry& g = c.geometry;
  return InLayout(
      c, {Tensor::ShapeOnly(g.dtype, Device::kCuda, QkvShape(c, g.num_heads, g.head_dim)),
          Tensor::ShapeOnly(g.dtype, Device::kCuda, QkvShape(c, g.num_kv_heads, g.head_dim)),
          Tensor::ShapeOnly(g.dtype, Device::kCuda, QkvShape(c, g.num_kv_heads, g.head_dim_v))});
}

}  // namespace varlen
