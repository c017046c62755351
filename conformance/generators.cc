#include "varlen/conformance/generators.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine_generators.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/limits.h"
#include "varlen/contract/sglang/metadata.h"

namespace varlen {
namespace {

rc::Gen<DType> GenFloatDType() {
  return rc::gen::element(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64);
}

rc::Gen<TensorLiteral> GenIntTensorLiteral(const std::vector<int64_t>& hint) {
  return rc::gen::exec([hint] {
    TensorLiteral t;
    // Now and then a bool tensor, which torch refuses to subtract, or an
    // int16 one, whose offsets wrap past 32767 as `.to(torch.int16)` wraps them.
    t.dtype = *rc::gen::weightedOneOf<DType>({{4, rc::gen::just(DType::kInt32)},
                                              {4, rc::gen::just(DType::kInt64)},
                                              {1, rc::gen::just(DType::kBool)},
                                              {1, rc::gen::just(DType::kInt16)}});
    t.device = *rc::gen::element(Device::kCpu, Device::kCuda);
    t.ints = *rc::gen::weightedOneOf<std::vector<int64_t>>(
        {{3, rc::gen::just(hint)},
         {1, rc::gen::container<std::vector<int64_t>>(rc::gen::inRange<int64_t>(-3, 2000))}});
    for (int64_t& v : t.ints) {
      if (t.dtype == DType::kBool) v = v != 0;
      if (t.dtype == DType::kInt16) v = WrapInt16(v);
    }
    if (*rc::gen::inRange(0, 4) == 0) t.shape = Shape{static_cast<int64_t>(t.ints.size()), 1, 1, 1};
    if (*rc::gen::inRange(0, 8) == 0) t.step = 2;  // cu_seqlens[::2]: not contiguous
    return t;
  });
}

}  // namespace

namespace internal {

rc::Gen<ArgLiteral> GenArg(const std::vector<int64_t>& offsets, int depth) {
  return rc::gen::exec([offsets, depth] {
    const int kind = *rc::gen::inRange(0, depth > 0 ? 9 : 8);
    switch (kind) {
      case 0:
        return ArgLiteral::None();
      case 1: {
        ArgLiteral a;
        a.kind = ArgLiteral::Kind::kBool;
        a.b = *rc::gen::arbitrary<bool>();
        return a;
      }
      case 2:
        return ArgLiteral::Int(*rc::gen::inRange<int64_t>(-5, 5000));
      case 3:
        return ArgLiteral::Float(*rc::gen::element(5.9, 720.0, -1.5, 0.0, 4096.0));
      case 4:
        return ArgLiteral::Str(
            *rc::gen::element<std::string>("4096", " 17 ", "17.0", "", "auto", "1_000"));
      case 5:
      case 6:
        return ArgLiteral::Tensor(*GenIntTensorLiteral(offsets));
      case 7: {
        ArgLiteral a;
        a.kind = ArgLiteral::Kind::kSingletonCache;
        a.cache_has_data = *rc::gen::arbitrary<bool>();
        if (a.cache_has_data) a.tensor = *GenIntTensorLiteral(offsets);
        return a;
      }
      default: {
        ArgLiteral a;
        a.kind = ArgLiteral::Kind::kList;
        a.list = *rc::gen::container<std::vector<ArgLiteral>>(*rc::gen::inRange(0, 4),
                                                              GenArg(offsets, depth - 1));
        return a;
      }
    }
  });
}

}  // namespace internal

using internal::GenArg;

namespace {

// Lengths that expose tile and launch-grid edges, smallest first so that
// shrinking moves toward them.
rc::Gen<int64_t> GenSpecialLength(int64_t max_len) {
  std::vector<int64_t> edges;
  for (int64_t n : {1, 2, 63, 64, 65, 127, 128, 129}) {
    if (n <= max_len) edges.push_back(n);
  }
  return rc::gen::weightedOneOf<int64_t>(
      {{4, rc::gen::inRange<int64_t>(1, std::min<int64_t>(max_len, 40) + 1)},
       {3, rc::gen::elementOf(edges)},
       {1, rc::gen::just<int64_t>(0)}});
}

}  // namespace

void FitBudgetByLengths(Geometry* g, int64_t max_macs) {
  while (AttentionMacs(*g) > max_macs) {
    auto longest = std::max_element(g->seq_lens.begin(), g->seq_lens.end());
    *longest /= 2;
  }
}

void FitBudget(Geometry* g, int64_t max_macs, int64_t min_head_dim) {
  if (AttentionMacs(*g) <= max_macs) return;
  // Keep the GQA ratio and two KV heads, so a wrong head mapping still shows.
  const int64_t kv_heads = std::min<int64_t>(g->num_kv_heads, 2);
  g->num_heads = g->num_heads / g->num_kv_heads * kv_heads;
  g->num_kv_heads = kv_heads;
  while (AttentionMacs(*g) > max_macs &&
         (g->head_dim > min_head_dim || g->head_dim_v > min_head_dim)) {
    g->head_dim = std::max<int64_t>(std::min(min_head_dim, g->head_dim), g->head_dim / 2);
    g->head_dim_v = std::max<int64_t>(std::min(min_head_dim, g->head_dim_v), g->head_dim_v / 2);
  }
  FitBudgetByLengths(g, max_macs);
}

namespace {

// The calling conventions a forward case may use on `caps`.
std::vector<Profile> ForwardProfiles(const BackendCapabilities& caps) {
  if (!caps.profiles.empty()) return caps.profiles;
  return {AllProfiles().begin(), AllProfiles().end()};
}

}  // namespace

rc::Gen<std::vector<int64_t>> GenSeqLens(const GeometryLimits& limits) {
  return rc::gen::exec([limits] {
    const int count = *rc::gen::inRange(1, limits.max_sequences + 1);
    std::vector<int64_t> lengths;
    for (int i = 0; i < count; ++i) {
      const bool zero = limits.allow_zero_lengths && *rc::gen::inRange(0, 6) == 0;
      lengths.push_back(zero ? 0 : *rc::gen::inRange<int64_t>(1, limits.max_len + 1));
    }
    return lengths;
  });
}

namespace {

rc::Gen<int64_t> GenHeadDim(const GeometryLimits& limits) {
  rc::Gen<int64_t> small = rc::gen::inRange<int64_t>(1, limits.max_head_dim + 1);
  if (!limits.kernel_head_dims) return small;
  return rc::gen::weightedOneOf<int64_t>({{6, small},
                                          {2, rc::gen::element<int64_t>(64, 72, 80, 96, 128)},
                                          {1, rc::gen::element<int64_t>(100, 160, 192, 256)},
                                          {1, rc::gen::element<int64_t>(264, 288, 320, 512)}});
}

}  // namespace

rc::Gen<Geometry> GenGeometry(const GeometryLimits& limits) {
  return rc::gen::exec([limits] {
    Geometry g;
    g.seq_lens = *GenSeqLens(limits);
    g.num_heads = *rc::gen::inRange(1, limits.max_heads + 1);
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= g.num_heads; ++d) {
      if (g.num_heads % d == 0) divisors.push_back(d);
    }
    g.num_kv_heads = *rc::gen::elementOf(divisors);
    g.head_dim = *GenHeadDim(limits);
    g.head_dim_v =
        *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::just(g.head_dim)}, {1, GenHeadDim(limits)}});
    g.dtype = *GenFloatDType();
    return g;
  });
}

namespace {

// GenCase, with the profile drawn or fixed.
rc::Gen<Case> GenCaseOf(const GeometryLimits& limits, std::optional<Profile> fixed) {
  return rc::gen::exec([limits, fixed] {
    Case c;
    c.name = absl::StrCat("generated-", *rc::gen::inRange(0, 1000000));
    c.source = "generated";
    c.description =
        *rc::gen::element<std::string>("", "a generated case", "quotes \" and \\ and \n");
    c.mode = *rc::gen::element(Mode::kFaithful, Mode::kHardened);
    c.geometry = *GenGeometry(limits);
    if (*rc::gen::inRange(0, 4) == 0) c.geometry.softmax_scale = *rc::gen::element(0.125, 1.0, 0.3);
    c.data.seed = *rc::gen::arbitrary<uint64_t>();
    c.data.distribution =
        *rc::gen::element(Distribution::kNormal, Distribution::kUniform,
                          Distribution::kSparseSmallIntegers, Distribution::kLargeLogits);
    const std::vector<int64_t> offsets = OffsetsOf(c.geometry.seq_lens);
    CallSpec& call = c.call;
    call.profile =
        *rc::gen::elementOf(std::vector<Profile>(AllProfiles().begin(), AllProfiles().end()));
    if (fixed.has_value()) call.profile = *fixed;
    const int64_t tokens = c.geometry.total_tokens();
    call.entry = tokens > 0 && *rc::gen::arbitrary<bool>() ? Entry::kLayer : Entry::kDirect;
    call.graph_mode = *rc::gen::inRange(0, 5) == 0;
    call.cu_seqlens = *GenArg(offsets, 1);
    if (*rc::gen::inRange(0, 3) == 0) {
      MetadataSpec m;
      m.builder =
          *rc::gen::element(MetadataSpec::Builder::kPlain, MetadataSpec::Builder::kFlashinferCudnn,
                            MetadataSpec::Builder::kManual);
      m.device = *rc::gen::element(Device::kCpu, Device::kCuda);
      m.cu_seqlens = ArgLiteral::Tensor(*GenIntTensorLiteral(offsets));
      if (m.builder == MetadataSpec::Builder::kFlashinferCudnn) {
        m.elem_per_token = *rc::gen::inRange<int64_t>(0, 2048);
      } else {
        m.max_seqlen = *GenArg(offsets, 0);
        if (m.builder == MetadataSpec::Builder::kManual) m.seq_lens = *GenArg(offsets, 0);
        m.packed_indptrs = *GenArg(offsets, 0);
        m.sequence_lengths = *GenArg(offsets, 0);
        m.flashinfer_max_seqlen = *GenArg(offsets, 0);
      }
      call.forward_metadata = m;
    }
    for (const char* key : {"sequence_lengths", "max_seqlen", "output_ws", "softmax_scale"}) {
      if (*rc::gen::arbitrary<bool>()) {
        ArgLiteral value = *GenArg(offsets, 1);
        if (std::string(key) == "output_ws" && *rc::gen::arbitrary<bool>()) {
          value = ArgLiteral();
          value.kind = ArgLiteral::Kind::kEmptyLikeQ;
        }
        call.kwargs.emplace_back(key, std::move(value));
      }
    }
    call.sdpa.flatten_batch = *rc::gen::arbitrary<bool>();
    call.sdpa.softmax_in_single_precision = *rc::gen::arbitrary<bool>();
    if (call.entry == Entry::kDirect && *rc::gen::inRange(0, 4) == 0) {
      call.sdpa.softmax_scale = *rc::gen::element(0.125, 0.3, 1.0);
    }
    if (c.geometry.head_dim_v == c.geometry.head_dim && *rc::gen::inRange(0, 3) == 0) {
      call.layout = QLayout::kFusedQkv;  // strided views of one projection
      call.rotary = call.entry == Entry::kLayer && *rc::gen::arbitrary<bool>();
    }
    if (*rc::gen::arbitrary<bool>()) {
      c.version = *rc::gen::elementOf(EngineVersion::Modelled(Engine::kSglang));
    }
    if (call.entry == Entry::kDirect && *rc::gen::inRange(0, 4) == 0) {
      call.bsz = *rc::gen::inRange<int64_t>(1, 4);
      call.seq_len = *rc::gen::inRange<int64_t>(0, 50);
    }
    internal::GeneratorsOf(EngineOf(call.profile)).make_wild_call(&c);
    if (*rc::gen::arbitrary<bool>()) {
      Expectation e;
      e.outcome = *rc::gen::element(Expectation::Outcome::kError, Expectation::Outcome::kSuccess,
                                    Expectation::Outcome::kSilentCorruption);
      if (e.outcome == Expectation::Outcome::kError) {
        e.error_kind = *rc::gen::element(PyErrorKind::kRuntimeError, PyErrorKind::kTypeError,
                                         PyErrorKind::kValueError, PyErrorKind::kAssertionError);
        e.message =
            *rc::gen::element<std::string>("sequence_lengths must be a torch.Tensor", "", "x'y\"z");
      }
      if (*rc::gen::arbitrary<bool>()) e.host_syncs = *rc::gen::inRange(0, 4);
      if (*rc::gen::arbitrary<bool>()) e.resolved = {{"max_seqlen", *rc::gen::inRange(0, 5000)}};
      c.expect = e;
    }
    // Drawn last, so that every earlier field is drawn as before: rows
    // after the last sequence (a CUDA-graph token budget), where the case
    // format takes them for this call.
    if (*rc::gen::inRange(0, 6) == 0) {
      Case padded = c;
      padded.geometry.padding.assign(c.geometry.seq_lens.size() + 1, 0);
      padded.geometry.padding.back() = *rc::gen::inRange<int64_t>(1, 9);
      if (ValidateCase(padded).ok()) c = std::move(padded);
    }
    return c;
  });
}

}  // namespace

rc::Gen<Case> GenCase(const GeometryLimits& limits) { return GenCaseOf(limits, std::nullopt); }

rc::Gen<Case> GenCaseFor(Profile profile, const GeometryLimits& limits) {
  return GenCaseOf(limits, profile);
}

rc::Gen<std::vector<int64_t>> GenSpecialSeqLens(const ForwardLimits& limits) {
  return rc::gen::exec([limits] {
    std::vector<int64_t> lengths;
    const int shape = *rc::gen::weightedOneOf<int>(
        {{3, rc::gen::just(0)}, {2, rc::gen::just(1)}, {1, rc::gen::just(2)}});
    if (shape == 0) {  // a few sequences of any length
      const int count = *rc::gen::inRange(1, std::min(limits.max_sequences, 6) + 1);
      for (int i = 0; i < count; ++i) lengths.push_back(*GenSpecialLength(limits.max_len));
    } else if (shape == 1) {  // one image
      lengths.push_back(*GenSpecialLength(limits.max_len));
    } else {  // many tiny ones, around the batch buckets
      std::vector<int> counts;
      for (int n : {7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65}) {
        if (n <= limits.max_sequences) counts.push_back(n);
      }
      const int count = counts.empty() ? limits.max_sequences : *rc::gen::elementOf(counts);
      for (int i = 0; i < count; ++i) lengths.push_back(*rc::gen::inRange<int64_t>(0, 4));
    }
    return lengths;
  });
}

namespace {

// The data, mode, version and correct call of a forward case whose geometry
// is drawn; inside rc::gen::exec.
void DrawForwardCall(const BackendCapabilities& caps,
                     const std::vector<Distribution>& excluded_distributions, Case* c) {
  const Geometry& g = c->geometry;
  c->data.seed = *rc::gen::inRange<uint64_t>(0, 1'000'000);
  c->data.distribution = *rc::gen::weightedOneOf<Distribution>(
      {{6, rc::gen::just(Distribution::kNormal)},
       {1, rc::gen::element(Distribution::kUniform, Distribution::kSparseSmallIntegers,
                            Distribution::kLargeLogits, Distribution::kDominantLogit,
                            Distribution::kConstantRows, Distribution::kNonFinite,
                            Distribution::kSubnormal)}});
  if (std::find(excluded_distributions.begin(), excluded_distributions.end(),
                c->data.distribution) != excluded_distributions.end()) {
    // Excluded data falls back to normal data, so the draw order stays.
    c->data.distribution = Distribution::kNormal;
  }
  c->mode = *rc::gen::element(Mode::kFaithful, Mode::kHardened);
  c->version = *rc::gen::elementOf(EngineVersion::Modelled(Engine::kSglang));

  std::vector<Profile> profiles = ForwardProfiles(caps);
  std::erase_if(profiles, [&](Profile p) { return !ProfileCanCarry(p, g); });
  RC_PRE(!profiles.empty());
  const Profile profile = *rc::gen::elementOf(profiles);
  const bool prepared = *rc::gen::arbitrary<bool>();
  const Entry entry =
      g.total_tokens() > 0 && *rc::gen::arbitrary<bool>() ? Entry::kLayer : Entry::kDirect;
  SetCorrectCall(c, profile, prepared, entry);
  if (EngineOf(profile) != Engine::kSglang) c->version.reset();
  if (caps.strided_inputs && ProfileTakesFusedQkv(profile, g) && *rc::gen::inRange(0, 3) == 0) {
    c->call.layout = FusedQkvLayout(profile);
  }
}

// The floating dtypes of `caps`, one drawn.
DType DrawDType(const BackendCapabilities& caps) {
  std::vector<DType> dtypes;
  for (DType d : caps.input_dtypes) {
    if (IsFloatingPoint(d)) dtypes.push_back(d);
  }
  RC_PRE(!dtypes.empty());
  return *rc::gen::elementOf(dtypes);
}

void FitCapabilities(const BackendCapabilities& caps, Geometry* g) {
  if (caps.max_sequences > 0 && static_cast<int64_t>(g->seq_lens.size()) > caps.max_sequences) {
    g->seq_lens.resize(static_cast<size_t>(caps.max_sequences));
  }
  if (caps.max_tokens > 0) {
    while (g->total_tokens() > caps.max_tokens)
      *std::max_element(g->seq_lens.begin(), g->seq_lens.end()) /= 2;
  }
}

// RapidCheck's largest size (its default max_size).
constexpr int kFullSize = 100;

// The values inside [lo, hi] of `values` shifted by -1, 0 and +1.
std::vector<int64_t> EdgesWithin(const std::vector<int64_t>& values, int64_t lo, int64_t hi) {
  std::vector<int64_t> edges;
  for (int64_t v : values) {
    for (int64_t e : {v - 1, v, v + 1}) {
      if (e >= lo && e <= hi) edges.push_back(e);
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

rc::Gen<int64_t> GenLongLength(const LongLimits& limits) {
  const int64_t lo = std::max<int64_t>(1, limits.min_len);
  const int64_t hi = std::max(lo, limits.max_len);
  std::vector<int64_t> tiles, powers, buckets;
  for (int64_t tile : {64, 128}) {
    for (int64_t n = (lo / tile) * tile; n <= hi + 1; n += tile) tiles.push_back(n);
  }
  for (int64_t n = 1; n <= 2 * hi; n *= 2) powers.push_back(n);
  for (int64_t n : kMaxSeqlenBuckets) buckets.push_back(n);
  // An edge list outside [lo, hi] is empty: weight 0.
  const auto edges = [lo, hi](const std::vector<int64_t>& values) {
    std::vector<int64_t> within = EdgesWithin(values, lo, hi);
    if (within.empty()) return std::pair<uint32_t, rc::Gen<int64_t>>(0, rc::gen::just(lo));
    return std::pair<uint32_t, rc::Gen<int64_t>>(2, rc::gen::elementOf(std::move(within)));
  };
  // The longest the tier reaches: a bug past some length shows there first.
  return rc::gen::weightedOneOf<int64_t>({{3, rc::gen::inRange<int64_t>(lo, hi + 1)},
                                          edges(tiles),
                                          edges(powers),
                                          edges(buckets),
                                          {1, rc::gen::element(hi, std::max(lo, hi - 1))}});
}

}  // namespace

rc::Gen<Case> GenForwardCase(const BackendCapabilities& caps, const ForwardLimits& limits) {
  return rc::gen::exec([caps, limits] {
    Case c;
    c.name = "generated";
    c.source = "varlen conformance suite, generated";
    Geometry& g = c.geometry;
    g.seq_lens = *GenSpecialSeqLens(limits);
    FitCapabilities(caps, &g);
    // A quarter of the cases have a vision tower's heads (odd counts, 16 and
    // more: InternViT-6B has 25, LLM-sized towers 32 and more), kept whole:
    // their sequences shrink to fit the budget instead. (A draw of 0, where
    // shrinking goes, is a small head count.)
    const bool tower_heads = *rc::gen::inRange(0, 4) == 3;
    if (tower_heads) {
      g.num_heads = *rc::gen::element<int64_t>(3, 5, 9, 12, 16, 25, 32, 40, 48);
      std::vector<int64_t> ratios = {1};
      for (int64_t r : {2, 4, 8}) {
        if (caps.grouped_query_attention && g.num_heads % r == 0) ratios.push_back(r);
      }
      g.num_kv_heads = g.num_heads / *rc::gen::elementOf(ratios);
    } else {
      const int64_t ratio =
          caps.grouped_query_attention ? *rc::gen::element<int64_t>(1, 2, 4, 8) : 1;
      g.num_kv_heads = *rc::gen::inRange<int64_t>(1, 3);
      g.num_heads = g.num_kv_heads * ratio;
    }
    const int64_t max_dim = std::min<int64_t>(caps.max_head_dim, 256);
    std::vector<int64_t> common_dims;
    for (int64_t d : {64, 72, 80, 96, 112, 128}) {
      if (d <= max_dim) common_dims.push_back(d);
    }
    g.head_dim = *rc::gen::weightedOneOf<int64_t>(
        {{1, rc::gen::inRange<int64_t>(1, std::min<int64_t>(max_dim, 40) + 1)},
         {common_dims.empty() ? 0 : 1,
          common_dims.empty() ? rc::gen::just<int64_t>(1) : rc::gen::elementOf(common_dims)}});
    g.head_dim_v = g.head_dim;
    if (caps.distinct_value_head_dim && *rc::gen::inRange(0, 4) == 0) {
      g.head_dim_v = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(max_dim, 96) + 1);
    }
    g.dtype = DrawDType(caps);
    if (tower_heads) {
      FitBudgetByLengths(&g, limits.max_macs);
    } else {
      FitBudget(&g, limits.max_macs);
    }
    FitCapabilities(caps, &g);
    DrawForwardCall(caps, limits.excluded_distributions, &c);
    return c;
  });
}

rc::Gen<std::vector<int64_t>> GenLongSeqLens(const LongLimits& limits) {
  return rc::gen::exec([limits] {
    const rc::Gen<int64_t> long_length = GenLongLength(limits);
    const rc::Gen<int64_t> short_length = rc::gen::weightedOneOf<int64_t>(
        {{1, rc::gen::just<int64_t>(0)}, {3, rc::gen::inRange<int64_t>(1, 41)}});
    std::vector<int64_t> lengths;
    const int shape = *rc::gen::weightedOneOf<int>(
        {{2, rc::gen::just(0)}, {1, rc::gen::just(1)}, {2, rc::gen::just(2)}});
    if (shape == 0) {  // one long image
      lengths.push_back(*long_length);
    } else if (shape == 1) {  // a few long ones
      const int count = *rc::gen::inRange(2, 4);
      for (int i = 0; i < count; ++i) lengths.push_back(*long_length);
    } else {  // one long one among many short and empty ones
      const int before = *rc::gen::inRange(0, 20);
      const int after = *rc::gen::inRange(0, 40);
      for (int i = 0; i < before; ++i) lengths.push_back(*short_length);
      lengths.push_back(*long_length);
      for (int i = 0; i < after; ++i) lengths.push_back(*short_length);
    }
    return lengths;
  });
}

rc::Gen<Case> GenLongForwardCase(const BackendCapabilities& caps, const LongLimits& limits) {
  // At full size from the first case: a tier runs only a few long cases, and
  // RapidCheck would draw the first ones at the smallest lengths.
  return rc::gen::resize(
      kFullSize, rc::gen::exec([caps, limits] {
        Case c;
        c.name = "generated-long";
        c.source = "varlen conformance suite, generated (long sequences)";
        Geometry& g = c.geometry;
        g.seq_lens = *GenLongSeqLens(limits);
        FitCapabilities(caps, &g);
        g.num_kv_heads = 1;
        g.num_heads = caps.grouped_query_attention ? *rc::gen::element<int64_t>(1, 2) : 1;
        const int64_t max_dim = std::min<int64_t>(caps.max_head_dim, 128);
        g.head_dim = *rc::gen::weightedOneOf<int64_t>(
            {{3, rc::gen::inRange<int64_t>(1, std::min<int64_t>(max_dim, 16) + 1)},
             {1,
              rc::gen::element(std::min<int64_t>(max_dim, 64), std::min<int64_t>(max_dim, 80))}});
        g.head_dim_v = g.head_dim;
        if (caps.distinct_value_head_dim && *rc::gen::inRange(0, 4) == 0) {
          g.head_dim_v = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(max_dim, 16) + 1);
        }
        g.dtype = DrawDType(caps);
        FitBudget(&g, limits.max_macs, /*min_head_dim=*/1);
        DrawForwardCall(caps, limits.excluded_distributions, &c);
        return c;
      }));
}

void showValue(const Geometry& g, std::ostream& os) {
  Case c;
  c.geometry = g;
  os << CaseToJson(c)["geometry"].dump();
}

void showValue(const Case& c, std::ostream& os) { os << WriteCase(c); }

}  // namespace varlen
