#include "varlen/cases/synth.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/cases/limits.h"
#include "varlen/cases/npy.h"
#include "varlen/cases/phase_clock.h"

namespace varlen {
namespace {

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256**'s state as Prng seeds it.
using State = std::array<uint64_t, 4>;

State SeededState(uint64_t seed) {
  State state;
  for (uint64_t& word : state) word = SplitMix64(&seed);
  return state;
}

double StandardNormal(Prng& prng) {
  double sum = 0.0;  // Irwin-Hall: mean 6, variance 1
  for (int i = 0; i < 12; ++i) sum += prng.NextUnit();
  return sum - 6.0;
}

// A random subnormal of `dtype`, built from its bit layout: exponent field
// zero, a non-zero mantissa of the dtype's width, either sign.
double Subnormal(Prng& prng, DType dtype) {
  int mantissa_bits = 0, min_exponent = 0;  // the value is mantissa * 2^(min_exponent - bits)
  switch (dtype) {
    case DType::kBFloat16:
      mantissa_bits = 7, min_exponent = -126;
      break;
    case DType::kFloat16:
      mantissa_bits = 10, min_exponent = -14;
      break;
    case DType::kFloat32:
      mantissa_bits = 23, min_exponent = -126;
      break;
    default:
      mantissa_bits = 52, min_exponent = -1022;
      break;
  }
  const uint64_t mantissa = 1 + prng.Next() % ((uint64_t{1} << mantissa_bits) - 1);
  const double magnitude = std::ldexp(static_cast<double>(mantissa), min_exponent - mantissa_bits);
  return prng.Next() & 1 ? -magnitude : magnitude;
}

// One element of a tensor of `numel` elements, for the distributions that
// draw a varying number of values per element (FillNormals makes the
// others).
double Sample(Prng& prng, const Case& c, int64_t numel) {
  switch (c.data.distribution) {
    case Distribution::kUniform:
      return 2.0 * prng.NextUnit() - 1.0;
    case Distribution::kSparseSmallIntegers: {
      if (prng.NextUnit() < 0.8) return 0.0;
      return static_cast<double>(static_cast<int64_t>(prng.Next() % 5) - 2);
    }
    case Distribution::kNormal:
    case Distribution::kLargeLogits:
    case Distribution::kDominantLogit:
    case Distribution::kConstantRows:
      break;
    case Distribution::kNonFinite: {
      const double value = StandardNormal(prng);
      // About two special elements per tensor, wherever they fall.
      if (prng.NextUnit() * static_cast<double>(numel) >= 2.0) return value;
      switch (prng.Next() % 3) {
        case 0:
          return std::numeric_limits<double>::quiet_NaN();
        case 1:
          return std::numeric_limits<double>::infinity();
        default:
          return -std::numeric_limits<double>::infinity();
      }
    }
    case Distribution::kSubnormal: {
      const double u = prng.NextUnit();
      if (u < 0.25) return -0.0;
      if (u < 0.5) return Subnormal(prng, c.geometry.dtype);
      return StandardNormal(prng);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Whether each element of `distribution` takes exactly one StandardNormal
// from the stream's generator (and nothing else from it).
bool OneNormalPerElement(Distribution distribution) {
  switch (distribution) {
    case Distribution::kNormal:
    case Distribution::kLargeLogits:
    case Distribution::kDominantLogit:
    case Distribution::kConstantRows:
      return true;
    default:
      return false;
  }
}

// --- many normals at once --------------------------------------------------
//
// Each element of the OneNormalPerElement distributions is twelve steps of
// one xoshiro256** stream, and a step waits on the one before: Sample()
// spent its time on that chain. Here the stream is cut into chunks of
// kChunkElements elements, eight chunks run side by side in vector lanes,
// and each lane starts where the stream would be at its chunk: the state
// step is linear over GF(2), so skipping a chunk is a 256 x 256 bit matrix
// (its power, computed once). Every value keeps Sample()'s bits: the same
// draws, summed in StandardNormal's order in each lane.

constexpr int kDraws = 12;  // StandardNormal's uniforms
constexpr int kLanes = 8;
constexpr int64_t kChunkElements = 64;
constexpr int64_t kChunkSteps = kDraws * kChunkElements;

void StepState(State& s) {
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
}

// A linear map of the 256-bit state, by the images of the unit states.
struct StateMap {
  std::array<State, 256> column;

  State Apply(const State& s) const {
    State out{};
    for (int j = 0; j < 256; ++j) {
      if (s[j / 64] >> (j % 64) & 1) {
        for (int w = 0; w < 4; ++w) out[w] ^= column[j][w];
      }
    }
    return out;
  }
  StateMap Then(const StateMap& next) const {  // next after this
    StateMap out;
    for (int j = 0; j < 256; ++j) out.column[j] = next.Apply(column[j]);
    return out;
  }
};

// `steps` steps of the stream, as one map.
StateMap StepsMap(int64_t steps) {
  StateMap step, power;
  for (int j = 0; j < 256; ++j) {
    State unit{};
    unit[j / 64] = uint64_t{1} << (j % 64);
    power.column[j] = unit;
    StepState(unit);
    step.column[j] = unit;
  }
  for (; steps > 0; steps >>= 1) {
    if (steps & 1) power = power.Then(step);
    step = step.Then(step);
  }
  return power;
}

// One chunk ahead, and a group of eight chunks ahead.
const StateMap& ChunkAhead() {
  static const StateMap* map = new StateMap(StepsMap(kChunkSteps));
  return *map;
}
const StateMap& GroupAhead() {
  static const StateMap* map = new StateMap(StepsMap(kLanes * kChunkSteps));
  return *map;
}

typedef uint64_t LaneWords __attribute__((vector_size(kLanes * 8)));
typedef int64_t LaneSigned __attribute__((vector_size(kLanes * 8)));
typedef double LaneDoubles __attribute__((vector_size(kLanes * 8)));

// out[i] = the stream's i-th StandardNormal for i < numel, from the state
// `start` of its first draw; lane e runs chunks e, e + 8, e + 16, ...
[[gnu::always_inline]] inline void NormalsInLanes(State start, int64_t numel, double* out) {
  LaneWords starts[4];
  for (int e = 0; e < kLanes; ++e) {
    if (e > 0) start = ChunkAhead().Apply(start);
    for (int w = 0; w < 4; ++w) starts[w][e] = start[w];
  }
  const StateMap& group = GroupAhead();
  for (int64_t first = 0; first < numel; first += kLanes * kChunkElements) {
    LaneWords s[4] = {starts[0], starts[1], starts[2], starts[3]};
    for (int64_t t = 0; t < kChunkElements; ++t) {
      LaneDoubles sum = {};
      for (int j = 0; j < kDraws; ++j) {
        const LaneWords x = s[1] + (s[1] << 2);  // * 5
        const LaneWords rotated = (x << 7) | (x >> 57);
        const LaneWords result = rotated + (rotated << 3);  // * 9
        const LaneWords shifted = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= shifted;
        s[3] = (s[3] << 45) | (s[3] >> 19);
        sum += __builtin_convertvector(reinterpret_cast<LaneSigned>(result >> 11), LaneDoubles) *
               0x1.0p-53;
      }
      sum -= 6.0;
      for (int e = 0; e < kLanes; ++e) {
        const int64_t i = first + e * kChunkElements + t;
        if (i < numel) out[i] = sum[e];
      }
    }
    // Each lane's start a group ahead: the group map, lane by lane, as
    // masked sums of its columns.
    LaneWords next[4] = {};
    for (int j = 0; j < 256; ++j) {
      const LaneWords mask = -((starts[j / 64] >> (j % 64)) & 1);
      for (int w = 0; w < 4; ++w) next[w] ^= group.column[j][w] & mask;
    }
    for (int w = 0; w < 4; ++w) starts[w] = next[w];
  }
}

using NormalsFn = void (*)(State start, int64_t numel, double* out);

void NormalsBaseline(State start, int64_t numel, double* out) { NormalsInLanes(start, numel, out); }

#if defined(__x86_64__)
[[gnu::target("avx2")]] void NormalsAvx2(State start, int64_t numel, double* out) {
  NormalsInLanes(start, numel, out);
}

[[gnu::target("avx512f,avx512vl,avx512dq,avx2")]] void NormalsAvx512(State start, int64_t numel,
                                                                     double* out) {
  NormalsInLanes(start, numel, out);
}
#endif

NormalsFn PickNormals() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return &NormalsAvx512;
  }
  if (__builtin_cpu_supports("avx2")) return &NormalsAvx2;
#endif
  return &NormalsBaseline;
}

// Sample() for the OneNormalPerElement distributions: the normals first
// (in lanes where the tensor fills at least a group of chunks), then each
// element's factor in order, a token's coin drawn once per token.
void FillNormals(const Case& c, SynthStream stream, uint64_t seed, int64_t row_size,
                 const Tensor& t) {
  const int64_t numel = t.numel();
  std::vector<double> values(static_cast<size_t>(numel));
  if (numel >= kLanes * kChunkElements) {
    static const NormalsFn normals = PickNormals();
    normals(SeededState(seed), numel, values.data());
  } else {
    Prng prng(seed);
    for (double& value : values) value = StandardNormal(prng);
  }
  const Distribution distribution = c.data.distribution;
  int64_t coin_row = -1;
  bool coin = false;
  for (int64_t i = 0; i < numel; ++i) {
    double value = values[static_cast<size_t>(i)];
    if (distribution == Distribution::kLargeLogits) {
      // q.k has variance D; times scale D^-1/2 gives ~N(0, 1) logits, and a
      // factor 100 on each of q and k makes them ~N(0, 1e4).
      if (stream != SynthStream::kV) value *= 100.0;
    } else if (distribution == Distribution::kDominantLogit && stream == SynthStream::kK) {
      // Whether a key token is a spike depends on the token alone, so all
      // its elements share the factor: its logits are ~N(0, 64).
      if (const int64_t row = i / row_size; row != coin_row) {
        Prng token(c.data.seed ^ (0x5bd1e995ULL * static_cast<uint64_t>(row + 1)));
        coin_row = row, coin = token.Next() % 32 == 0;
      }
      if (coin) value *= 8.0;
    } else if (distribution == Distribution::kConstantRows && stream == SynthStream::kQ) {
      // Half of the query tokens are all zeros.
      if (const int64_t row = i / row_size; row != coin_row) {
        Prng token(c.data.seed ^ (0x2545f491ULL * static_cast<uint64_t>(row + 1)));
        coin_row = row, coin = token.Next() % 2 == 0;
      }
      if (coin) value = 0.0;
    }
    t.SetDoubleAt(i, value);
  }
}

Shape QkvShape(const Case& c, int64_t heads, int64_t dim) {
  const int64_t tokens = c.geometry.total_tokens();
  if (c.call.layout == QLayout::kBatched) {
    const int64_t bsz = c.call.bsz.value_or(1);
    return {bsz, tokens / bsz, heads, dim};
  }
  return {tokens, heads, dim};
}

// The values of `stream` read from the case's files; null when it has none.
const std::vector<double>* FileValues(const Case& c, SynthStream stream) {
  if (c.data.file_values == nullptr) return nullptr;
  const QkvValues& v = *c.data.file_values;
  return stream == SynthStream::kQ ? &v.q : stream == SynthStream::kK ? &v.k : &v.v;
}

Tensor Fill(const Case& c, SynthStream stream, Shape shape) {
  Tensor t = Tensor::Zeros(c.geometry.dtype, c.QkvDevice(), std::move(shape));
  const int64_t numel = t.numel();
  if (c.data.files.has_value()) {
    // Rounded to the dtype as tensor.to(dtype) rounds; padding rows keep
    // what the recorded call had there.
    const std::vector<double>* values = FileValues(c, stream);
    const bool read = values != nullptr && static_cast<int64_t>(values->size()) == numel;
    for (int64_t i = 0; i < numel; ++i) {
      t.SetDoubleAt(i, read ? (*values)[i] : std::numeric_limits<double>::quiet_NaN());
    }
    return t;
  }
  const uint64_t seed = c.data.seed * 0x100000001b3ULL + static_cast<uint64_t>(stream);
  const int64_t row_size =
      std::max<int64_t>(1, numel / std::max<int64_t>(1, c.geometry.total_tokens()));
  if (OneNormalPerElement(c.data.distribution)) {
    FillNormals(c, stream, seed, row_size, t);
  } else {
    Prng prng(seed);
    for (int64_t i = 0; i < numel; ++i) t.SetDoubleAt(i, Sample(prng, c, numel));
  }
  // Rows in no sequence hold NaN: a kernel that reads one spreads it into
  // a row it writes.
  const Geometry& g = c.geometry;
  const std::vector<int64_t> starts = g.SequenceStarts();
  for (size_t gap = 0; gap < g.padding.size(); ++gap) {
    const int64_t first = gap == 0 ? 0 : starts[gap - 1] + g.seq_lens[gap - 1];
    for (int64_t i = first * row_size; i < (first + g.padding[gap]) * row_size; ++i) {
      t.SetDoubleAt(i, std::numeric_limits<double>::quiet_NaN());
    }
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

// [T, H, D] views as [bsz, T / bsz, H, D] (bsz divides T: the case says so).
Tensor Batched(const Tensor& t, int64_t bsz) {
  const int64_t s = bsz > 0 ? t.size(0) / bsz : 0;
  const Shape& st = t.strides();
  return t.AsStrided({bsz, s, t.size(1), t.size(2)}, {s * st[0], st[0], st[1], st[2]}, 0);
}

// [bsz, s, H, D] viewed as [bsz, s, H * D]: the heads of a token are
// adjacent in every layout made here, so this is always a view.
Tensor MergeHeads(const Tensor& t) {
  const Shape& st = t.strides();
  return t.AsStrided({t.size(0), t.size(1), t.size(2) * t.size(3)}, {st[0], st[1], st[3]}, 0);
}

QkvTensors InLayout(const Case& c, QkvTensors dense) {
  QkvTensors laid;
  switch (c.call.layout) {
    case QLayout::kFusedQkv:
      return FuseQkv(dense);
    case QLayout::kBatchedFusedQkv: {
      const QkvTensors fused = FuseQkv(dense);
      const int64_t bsz = c.call.bsz.value_or(1);
      laid = {Batched(fused.q, bsz), Batched(fused.k, bsz), Batched(fused.v, bsz)};
      break;
    }
    default:
      laid = std::move(dense);
  }
  if (!c.call.merged_heads) return laid;
  return {MergeHeads(laid.q), MergeHeads(laid.k), MergeHeads(laid.v)};
}

}  // namespace

Prng::Prng(uint64_t seed) {
  const State state = SeededState(seed);
  std::copy(state.begin(), state.end(), state_);
}

QkvTensors SynthesizeQkv(const Case& c) {
  ScopedPhase timed(Phase::kSynthesis);
  const Geometry& g = c.geometry;
  return InLayout(c, {Fill(c, SynthStream::kQ, QkvShape(c, g.num_heads, g.head_dim)),
                      Fill(c, SynthStream::kK, QkvShape(c, g.num_kv_heads, g.head_dim)),
                      Fill(c, SynthStream::kV, QkvShape(c, g.num_kv_heads, g.head_dim_v))});
}

QkvTensors HeadsApart(const Case& c, const QkvTensors& qkv) {
  if (!c.call.merged_heads) return qkv;
  const Geometry& g = c.geometry;
  auto split = [](const Tensor& t, int64_t heads, int64_t dim) {
    const Shape& st = t.strides();
    return t.AsStrided({t.size(0), t.size(1), heads, dim}, {st[0], st[1], dim * st[2], st[2]}, 0);
  };
  return {split(qkv.q, g.num_heads, g.head_dim), split(qkv.k, g.num_kv_heads, g.head_dim),
          split(qkv.v, g.num_kv_heads, g.head_dim_v)};
}

absl::Status LoadCaseData(Case* c, const std::string& directory, absl::string_view origin) {
  if (!c->data.files.has_value()) return absl::OkStatus();
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::absolute(directory.empty() ? fs::path(".") : fs::path(directory), ec);
  if (ec) return absl::NotFoundError(absl::StrCat(origin, ": ", directory, ": ", ec.message()));
  c->data.files_directory = base.lexically_normal().string();
  const QkvFiles files = AbsoluteDataFiles(c->data);
  const QkvTensors called = ShapeOnlyQkv(*c);
  const QkvTensors apart = HeadsApart(*c, called);
  auto values = std::make_shared<QkvValues>();
  struct Part {
    const char* key;
    const std::string& name;  // as the case file spells it
    const std::string& file;
    const Tensor& as_called;
    const Tensor& heads_apart;
    std::vector<double>* values;
  };
  for (const Part& part : {Part{"q", c->data.files->q, files.q, called.q, apart.q, &values->q},
                           Part{"k", c->data.files->k, files.k, called.k, apart.k, &values->k},
                           Part{"v", c->data.files->v, files.v, called.v, apart.v, &values->v}}) {
    const std::string where =
        absl::StrCat(origin, ": $.data.files.", part.key, " (", part.name, ")");
    const int64_t numel = part.as_called.numel();
    if (numel > kForwardBudgetElements) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", part.key, " has ", numel, " elements, more than the ",
          kForwardBudgetElements, " a forward run takes: a case with values runs forward"));
    }
    absl::StatusOr<NpyArray> array = ReadNpy(part.file, numel * 8 + (int64_t{1} << 16));
    if (!array.ok()) {
      return absl::Status(array.status().code(),
                          absl::StrCat(where, ": ", array.status().message()));
    }
    if (array->shape != part.as_called.shape() && array->shape != part.heads_apart.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": an array of shape (", absl::StrJoin(array->shape, ", "),
                       "), where this case's ", part.key, " is [",
                       absl::StrJoin(part.as_called.shape(), ", "), "] as the call passes it, [",
                       absl::StrJoin(part.heads_apart.shape(), ", "), "] with its heads apart"));
    }
    *part.values = std::move(array->values);
  }
  c->data.file_values = std::move(values);
  return absl::OkStatus();
}

QkvFiles AbsoluteDataFiles(const DataSpec& data) {
  namespace fs = std::filesystem;
  if (!data.files.has_value()) return {};
  auto absolute = [&](const std::string& name) {
    const fs::path path(name);
    return path.is_absolute() ? name : (fs::path(data.files_directory) / path).string();
  };
  return {absolute(data.files->q), absolute(data.files->k), absolute(data.files->v)};
}

QkvTensors ShapeOnlyQkv(const Case& c) {
  const Geometry& g = c.geometry;
  const Device device = c.QkvDevice();
  return InLayout(c,
                  {Tensor::ShapeOnly(g.dtype, device, QkvShape(c, g.num_heads, g.head_dim)),
                   Tensor::ShapeOnly(g.dtype, device, QkvShape(c, g.num_kv_heads, g.head_dim)),
                   Tensor::ShapeOnly(g.dtype, device, QkvShape(c, g.num_kv_heads, g.head_dim_v))});
}

}  // namespace varlen
