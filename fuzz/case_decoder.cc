#include "case_decoder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine_decoders.h"
#include "varlen/cases/case_json.h"
#include "varlen/core/status.h"

namespace varlen {
namespace internal {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

}  // namespace

const EngineDecoder& DecoderOf(Engine engine) {
  switch (engine) {
    case Engine::kSglang:
      return SglangDecoder();
    case Engine::kVllm:
      return VllmDecoder();
    case Engine::kTransformers:
      return TransformersDecoder();
  }
  return SglangDecoder();
}

void DecodeContext::SetGeometry(const Geometry& g) {
  offsets_ = {0};
  for (int64_t n : g.seq_lens) offsets_.push_back(offsets_.back() + n);
  longest_ = *std::max_element(g.seq_lens.begin(), g.seq_lens.end());
  width_ = g.num_heads * g.head_dim;
}

MetadataSpec DecodeContext::Metadata() {
  MetadataSpec m;
  m.builder = PickOne({MetadataSpec::Builder::kPlain, MetadataSpec::Builder::kFlashinferCudnn,
                       MetadataSpec::Builder::kManual});
  m.device = ConsumeBool() ? Device::kCuda : Device::kCpu;
  m.cu_seqlens = Arg(/*depth=*/0);
  if (m.builder == MetadataSpec::Builder::kFlashinferCudnn) {
    m.elem_per_token = PickOne<int64_t>(
        {width_, width_, width_ + 1, kInt32Max / std::max<int64_t>(2, longest_) + 1,
         ConsumeIntegralInRange<int64_t>(-kInt32Max - 1, kInt32Max)});
    return m;
  }
  if (ConsumeBool()) m.max_seqlen = Arg(0);
  if (m.builder == MetadataSpec::Builder::kManual) {
    m.seq_lens = Arg(0);
    m.packed_indptrs = Arg(0);
    m.sequence_lengths = Arg(0);
    m.flashinfer_max_seqlen = Arg(0);
  } else if (ConsumeBool()) {
    m.packed_indptrs = Arg(0);
    m.sequence_lengths = Arg(0);
    m.flashinfer_max_seqlen = Arg(0);
  }
  return m;
}

// Any Python value a caller might pass, biased toward the plausible ones.
ArgLiteral DecodeContext::Arg(int depth) {
  ArgLiteral a;
  switch (ConsumeIntegralInRange<int>(0, depth > 0 ? 9 : 8)) {
    case 0:
      return ArgLiteral::None();
    case 1:
      a.kind = ArgLiteral::Kind::kBool;
      a.b = ConsumeBool();
      return a;
    case 2:
      return ArgLiteral::Int(Int());
    case 3:
      return ArgLiteral::Float(Float());
    case 4:
      return ArgLiteral::Str(Str());
    case 5:
    case 6:
      return ArgLiteral::Tensor(TensorValue());
    case 7:
      a.kind = ArgLiteral::Kind::kSingletonCache;
      a.cache_has_data = ConsumeBool();
      if (a.cache_has_data) a.tensor = TensorValue();
      return a;
    case 8:
      a.kind = ArgLiteral::Kind::kEmptyLikeQ;
      return a;
    default: {
      a.kind = ArgLiteral::Kind::kList;
      const int items = ConsumeIntegralInRange<int>(0, 3);
      for (int i = 0; i < items; ++i) a.list.push_back(Arg(depth - 1));
      return a;
    }
  }
}

// The true maximum, an offset, or a value at an integer edge.
int64_t DecodeContext::Int() {
  switch (ConsumeIntegralInRange<int>(0, 6)) {
    case 0:
      return longest_;
    case 1:
      return offsets_[ConsumeIntegralInRange<size_t>(0, offsets_.size() - 1)];
    case 2:
      return longest_ + ConsumeIntegralInRange<int64_t>(-2, 2);
    case 3:
      return PickOne<int64_t>(
          {0, -1, kInt32Max, kInt32Max + 1, int64_t{1} << 32, kInt64Max, kInt64Min, 4096, 131072});
    default:
      return ConsumeIntegral<int64_t>();
  }
}

// Special floats from their bit patterns, or the true maximum spelt as a
// float (integral or not).
double DecodeContext::Float() {
  switch (ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      return static_cast<double>(longest_);
    case 1:
      return static_cast<double>(longest_) + 0.5;
    case 2:
      return std::bit_cast<double>(ConsumeIntegral<uint64_t>());
    case 3:
      return PickOne({std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity(),
                      -std::numeric_limits<double>::infinity(), -0.0,
                      std::numeric_limits<double>::denorm_min(), 9.3e18, -9.3e18});
    default:
      return ConsumeFloatingPointInRange<double>(-1e4, 1e4);
  }
}

double DecodeContext::FiniteFloat() {
  const double f = Float();
  return std::isfinite(f) ? f : static_cast<double>(longest_);
}

// What int() may be handed as text: the maximum in ASCII or in other
// Unicode decimal digits, with ASCII or Unicode spaces, a sign, an
// underscore, or raw bytes.
std::string DecodeContext::Str() {
  const std::string digits = absl::StrCat(longest_);
  switch (ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return digits;
    case 1: {
      static constexpr const char* kSpaces[] = {" ", "\t", "\n", "\u00a0", "\u2003", "\u3000"};
      const char* space = kSpaces[ConsumeIntegralInRange<size_t>(0, 5)];
      return absl::StrCat(space, digits, space);
    }
    case 2: {
      // The same number in Arabic-Indic, Devanagari or fullwidth digits.
      static constexpr const char* kZeros[] = {"\u0660", "\u0966", "\uff10"};
      const std::string zero = kZeros[ConsumeIntegralInRange<size_t>(0, 2)];
      std::string out;
      for (char d : digits) {
        std::string digit = zero;
        digit.back() = static_cast<char>(digit.back() + (d - '0'));
        out += digit;
      }
      return out;
    }
    case 3:
      return PickOne<std::string>(
          {"+" + digits, "-" + digits, digits + ".0", "1_0", "0x10", "", "nan", "1e3", "\u00b2"});
    default:
      return RandomText();
  }
}

// Up to 6 code points, ASCII-heavy, encoded as UTF-8 (Python text is
// Unicode, and a case file is JSON text).
std::string DecodeContext::RandomText() {
  std::string out;
  const int count = ConsumeIntegralInRange<int>(0, 6);
  for (int i = 0; i < count; ++i) {
    uint32_t cp = ConsumeBool() ? ConsumeIntegralInRange<uint32_t>(0x20, 0x7e)
                                : ConsumeIntegralInRange<uint32_t>(0, 0x10ffff);
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // surrogates are not text
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

TensorLiteral DecodeContext::TensorValue() {
  TensorLiteral t;
  t.dtype = PickOne(
      {DType::kInt32, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kBool, DType::kInt16});
  t.device = ConsumeBool() ? Device::kCuda : Device::kCpu;
  std::vector<int64_t> values;
  switch (ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
    case 1:
      values = offsets_;
      break;
    case 2:
      values = offsets_;
      values[ConsumeIntegralInRange<size_t>(0, values.size() - 1)] = Int();
      break;
    default:
      values = {Int()};
      break;
  }
  const int shape = ConsumeIntegralInRange<int>(0, 3);
  const auto n = static_cast<int64_t>(values.size());
  if (shape == 1) t.shape = Shape{n, 1, 1, 1};
  if (shape == 2) t.shape = Shape{};  // 0-d: only one value fits
  if (shape == 2) values.resize(1);
  if (shape != 2 && ConsumeIntegralInRange<int>(0, 7) == 0) t.step = 2;  // not contiguous
  // An int32 tensor cannot hold a value beyond int32: such a value comes
  // as the int64 tensor a caller would have.
  if (t.dtype == DType::kInt16) {  // what `.to(torch.int16)` keeps of the offsets
    for (int64_t& v : values) v = WrapInt16(v);
  }
  if (t.dtype == DType::kInt32 && std::any_of(values.begin(), values.end(), [](int64_t v) {
        return v < -kInt32Max - 1 || v > kInt32Max;
      })) {
    t.dtype = DType::kInt64;
  }
  if (IsFloatingPoint(t.dtype)) {
    for (int64_t v : values) t.floats.push_back(static_cast<double>(v));
  } else {
    for (int64_t v : values) t.ints.push_back(t.dtype == DType::kBool ? v != 0 : v);
  }
  return t;
}

}  // namespace internal

namespace {

using internal::DecodeContext;

class Decoder {
 public:
  Decoder(absl::Span<const uint8_t> bytes, const DecodeLimits& limits,
          std::vector<ChoiceSpan>* spans = nullptr)
      : in_(bytes, limits, spans) {}

  Case Decode() {
    Case c;
    c.name = "decoded";
    c.source = "fuzz: decoded bytes";
    c.mode = in_.ConsumeBool() ? Mode::kHardened : Mode::kFaithful;
    // The default engine's version; another engine's decoder draws its own.
    const std::vector<EngineVersion> versions = EngineVersion::Modelled(c.engine());
    c.version = versions[in_.ConsumeIntegralInRange<size_t>(0, versions.size() - 1)];
    c.geometry = DecodeGeometry();
    c.data.seed = in_.ConsumeIntegral<uint16_t>();
    c.data.distribution = static_cast<Distribution>(
        in_.ConsumeIntegralInRange<int>(0, static_cast<int>(Distribution::kSubnormal)));
    in_.SetGeometry(c.geometry);
    // The engine first, then one of its profiles: each engine gets an even
    // share of the inputs, whatever its number of profiles.
    const absl::Span<const Engine> engines = AllEngines();
    const Engine engine = engines[in_.ConsumeIntegralInRange<size_t>(0, engines.size() - 1)];
    const absl::Span<const Profile> profiles = ProfilesOf(engine);
    const Profile profile = profiles[in_.ConsumeIntegralInRange<size_t>(0, profiles.size() - 1)];
    const internal::EngineDecoder& decoder = internal::DecoderOf(engine);
    decoder.decode_call(in_, profile, &c);
    // Most calls are correct, and most bugs hide one wrong argument away:
    // as often as not the call becomes the correct one (correct_call.h) with
    // one to three of its arguments taken from the decoded call. Decided
    // from the last bytes, so inputs that end before this keep the decoded
    // call as it is.
    const int taken = in_.ConsumeIntegralInRange<int>(0, 3);
    if (taken > 0) decoder.blend_with_correct_call(in_, &c, taken);
    DecodeLateFields(&c);
    return c;
  }

 private:
  Geometry DecodeGeometry() {
    if (in_.limits().long_len > 0 && in_.ConsumeIntegralInRange<int>(0, 3) == 3) {
      in_.set_limits({.max_sequences = 2,
                      .max_len = in_.limits().long_len,
                      .max_kv_heads = 1,
                      .max_heads = 2,
                      .max_head_dim = 16,
                      .draws_platform = in_.limits().draws_platform});
    }
    Geometry g;
    const int count = in_.ConsumeIntegralInRange<int>(1, in_.limits().max_sequences);
    for (int i = 0; i < count; ++i) {
      g.seq_lens.push_back(in_.ConsumeIntegralInRange<int64_t>(0, in_.limits().max_len));
    }
    g.num_kv_heads = in_.ConsumeIntegralInRange<int64_t>(1, in_.limits().max_kv_heads);
    g.num_heads = g.num_kv_heads * in_.PickOne<int64_t>({1, 2, 4});
    while (g.num_heads > std::max(in_.limits().max_heads, g.num_kv_heads)) g.num_heads /= 2;
    g.head_dim = in_.ConsumeIntegralInRange<int64_t>(1, in_.limits().max_head_dim);
    g.head_dim_v = in_.ConsumeBool()
                       ? g.head_dim
                       : in_.ConsumeIntegralInRange<int64_t>(1, in_.limits().max_head_dim);
    g.dtype = in_.PickOne({DType::kBFloat16, DType::kFloat16, DType::kFloat32, DType::kFloat64});
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) g.softmax_scale = in_.FiniteFloat();
    return g;
  }

  // Fields drawn last, so that inputs which end before them decode as they
  // did before these fields existed: rows past the last sequence (a
  // CUDA-graph token budget; they leave every offset as it was), and the
  // platform. Either is dropped when the case format refuses it for this
  // call (a batched layout whose rows it would change).
  void DecodeLateFields(Case* c) {
    if (const int64_t rows = in_.ConsumeIntegralInRange<int64_t>(0, 8); rows > 0) {
      Case padded = *c;
      padded.geometry.padding.assign(padded.geometry.seq_lens.size() + 1, 0);
      padded.geometry.padding.back() = rows;
      if (ValidateCase(padded).ok()) *c = std::move(padded);
    }
    static constexpr const char* kPlatforms[] = {
        "cuda:9.0", "cuda:10.0", "cuda:8.0",      "cuda:8.9+flash_attn_disable_uneven_k",
        "cuda:7.5", "hip:9.4",   "hip:9.4+aiter", "npu",
        "xpu",      "cpu",       "cpu+amx",       "other"};
    if (!in_.limits().draws_platform) return;
    if (const size_t pick = in_.ConsumeIntegralInRange<size_t>(0, std::size(kPlatforms));
        pick > 0) {
      Case placed = *c;
      placed.platform = *ParsePlatform(kPlatforms[pick - 1]);
      if (ValidateCase(placed).ok()) *c = std::move(placed);
    }
  }

  DecodeContext in_;
};

struct TargetLimits {
  const char* target;
  DecodeLimits limits;
};

constexpr TargetLimits kTargets[] = {
    {"contract", {}},
    // Up to 64 tokens, 4 heads, head dim 128: kernels' tile edges in reach;
    // or one or two sequences of up to 160 tokens, thin, past a key tile.
    {"differential",
     {.max_sequences = 4,
      .max_len = 16,
      .max_kv_heads = 4,
      .max_heads = 4,
      .max_head_dim = 128,
      .long_len = 160,
      .draws_platform = false}},
};

}  // namespace

absl::StatusOr<Case> DecodeCase(absl::Span<const uint8_t> bytes, const DecodeLimits& limits) {
  Case c = Decoder(bytes, limits).Decode();
  if (ValidateCase(c).ok()) return c;
  c.call.layout = QLayout::kPacked;
  c.call.rotary = false;
  if (ValidateCase(c).ok()) return c;
  // The layer refuses an empty batch before any backend.
  internal::DecoderOf(c.engine()).to_plainest_entry(&c);
  VARLEN_RETURN_IF_ERROR(ValidateCase(c));
  return c;
}

std::vector<ChoiceSpan> DecodeChoiceSpans(absl::Span<const uint8_t> bytes,
                                          const DecodeLimits& limits) {
  std::vector<ChoiceSpan> spans;
  Decoder(bytes, limits, &spans).Decode();
  return spans;
}

std::vector<std::string> DecodingTargets() {
  std::vector<std::string> names;
  for (const TargetLimits& t : kTargets) names.emplace_back(t.target);
  return names;
}

absl::StatusOr<DecodeLimits> DecodeLimitsFor(absl::string_view target) {
  for (const TargetLimits& t : kTargets) {
    if (target == t.target) return t.limits;
  }
  return absl::NotFoundError(absl::StrCat("--target: \"", target, "\" is not one of ",
                                          absl::StrJoin(DecodingTargets(), ", ")));
}

}  // namespace varlen
