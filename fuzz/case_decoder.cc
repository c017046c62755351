#include "case_decoder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/correct_call.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// FuzzedDataProvider that notes which bytes each choice took: every value
// the decoder reads comes from the end of the input, so a choice owns one
// contiguous span.
class ChoiceReader {
 public:
  ChoiceReader(absl::Span<const uint8_t> bytes, std::vector<ChoiceSpan>* spans)
      : in_(bytes.data(), bytes.size()), spans_(spans) {}

  bool ConsumeBool() {
    return Noted([&] { return in_.ConsumeBool(); });
  }
  template <typename T>
  T ConsumeIntegral() {
    return Noted([&] { return in_.ConsumeIntegral<T>(); });
  }
  template <typename T>
  T ConsumeIntegralInRange(T min, T max) {
    return Noted([&] { return in_.ConsumeIntegralInRange<T>(min, max); });
  }
  template <typename T>
  T ConsumeFloatingPointInRange(T min, T max) {
    return Noted([&] { return in_.ConsumeFloatingPointInRange<T>(min, max); });
  }

 private:
  template <typename Read>
  std::invoke_result_t<Read> Noted(Read read) {
    const size_t before = in_.remaining_bytes();
    auto value = read();
    if (spans_ != nullptr && in_.remaining_bytes() < before) {
      spans_->push_back({in_.remaining_bytes(), before});
    }
    return value;
  }

  FuzzedDataProvider in_;
  std::vector<ChoiceSpan>* spans_;
};

class Decoder {
 public:
  Decoder(absl::Span<const uint8_t> bytes, const DecodeLimits& limits,
          std::vector<ChoiceSpan>* spans = nullptr)
      : in_(bytes, spans), limits_(limits) {}

  Case Decode() {
    Case c;
    c.name = "decoded";
    c.source = "fuzz: decoded bytes";
    c.mode = in_.ConsumeBool() ? Mode::kHardened : Mode::kFaithful;
    const absl::Span<const SglangVersion> versions = ModelledSglangVersions();
    c.sglang = versions[in_.ConsumeIntegralInRange<size_t>(0, versions.size() - 1)];
    c.geometry = DecodeGeometry();
    c.data.seed = in_.ConsumeIntegral<uint16_t>();
    c.data.distribution = static_cast<Distribution>(
        in_.ConsumeIntegralInRange<int>(0, static_cast<int>(Distribution::kSubnormal)));
    offsets_ = {0};
    for (int64_t n : c.geometry.seq_lens) offsets_.push_back(offsets_.back() + n);
    longest_ = *std::max_element(c.geometry.seq_lens.begin(), c.geometry.seq_lens.end());
    width_ = c.geometry.num_heads * c.geometry.head_dim;
    c.call = DecodeCall();
    BlendWithCorrectCall(&c);
    return c;
  }

 private:
  Geometry DecodeGeometry() {
    Geometry g;
    const int count = in_.ConsumeIntegralInRange<int>(1, limits_.max_sequences);
    for (int i = 0; i < count; ++i) {
      g.seq_lens.push_back(in_.ConsumeIntegralInRange<int64_t>(0, limits_.max_len));
    }
    g.num_kv_heads = in_.ConsumeIntegralInRange<int64_t>(1, limits_.max_kv_heads);
    g.num_heads = g.num_kv_heads * PickOne<int64_t>({1, 2, 4});
    while (g.num_heads > std::max(limits_.max_heads, g.num_kv_heads)) g.num_heads /= 2;
    g.head_dim = in_.ConsumeIntegralInRange<int64_t>(1, limits_.max_head_dim);
    g.head_dim_v = in_.ConsumeBool() ? g.head_dim
                                     : in_.ConsumeIntegralInRange<int64_t>(1, limits_.max_head_dim);
    g.dtype = PickOne({DType::kBFloat16, DType::kFloat16, DType::kFloat32, DType::kFloat64});
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) g.softmax_scale = FiniteFloat();
    return g;
  }

  CallSpec DecodeCall() {
    CallSpec call;
    // SGLang's profiles: the decoder spells SGLang's argument forms (vLLM's
    // calls come from the property generators and the corpus).
    const absl::Span<const Profile> profiles = ProfilesOf(Engine::kSglang);
    call.profile = profiles[in_.ConsumeIntegralInRange<size_t>(0, profiles.size() - 1)];
    call.entry = in_.ConsumeBool() ? Entry::kLayer : Entry::kDirect;
    call.graph_mode = in_.ConsumeIntegralInRange<int>(0, 3) == 0;
    call.layout =
        PickOne({QLayout::kPacked, QLayout::kPacked, QLayout::kFusedQkv, QLayout::kBatched});
    call.rotary = call.entry == Entry::kLayer && in_.ConsumeBool();
    // The layer derives bsz and seq_len from q itself.
    if (call.entry == Entry::kDirect && in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      call.bsz = in_.ConsumeIntegralInRange<int64_t>(1, 4);
      call.seq_len = in_.ConsumeIntegralInRange<int64_t>(0, 2 * limits_.max_len);
    }
    call.cu_seqlens = Arg(/*depth=*/1);
    if (in_.ConsumeBool()) call.forward_metadata = Metadata();
    for (const char* key : {"sequence_lengths", "max_seqlen", "output_ws", "softmax_scale"}) {
      if (in_.ConsumeBool()) call.kwargs.emplace_back(key, Arg(/*depth=*/1));
    }
    call.sdpa.flatten_batch = in_.ConsumeBool();
    call.sdpa.softmax_in_single_precision = in_.ConsumeBool();
    // Through the layer, sdpa gets the layer's scale, never its own.
    if (call.entry == Entry::kDirect && in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      call.sdpa.softmax_scale = FiniteFloat();
    }
    return call;
  }

  // Most calls are correct, and most bugs hide one wrong argument away: as
  // often as not the call becomes the correct one (correct_call.h) with one
  // to three of its arguments taken from the decoded call, or max_seqlen off
  // the truth by at most two. Decided from the last bytes, so inputs that
  // end before this keep the decoded call as it is.
  void BlendWithCorrectCall(Case* c) {
    const int taken = in_.ConsumeIntegralInRange<int>(0, 3);
    if (taken == 0) return;
    const CallSpec wild = c->call;
    const bool layer = wild.entry == Entry::kLayer && c->geometry.total_tokens() > 0 &&
                       !c->geometry.softmax_scale.has_value();
    SetCorrectCall(c, wild.profile, wild.forward_metadata.has_value(),
                   layer ? Entry::kLayer : Entry::kDirect);
    c->expect.reset();
    CallSpec& call = c->call;
    call.layout = wild.layout;
    call.rotary = wild.rotary && layer;
    call.sdpa.softmax_in_single_precision = wild.sdpa.softmax_in_single_precision;
    for (int i = 0; i < taken; ++i) {
      switch (in_.ConsumeIntegralInRange<int>(0, 6)) {
        case 0:
          call.cu_seqlens = wild.cu_seqlens;
          break;
        case 1:
          call.forward_metadata = wild.forward_metadata;
          break;
        case 2:
          call.graph_mode = wild.graph_mode;
          break;
        case 3:
          call.bsz = wild.bsz;
          call.seq_len = wild.seq_len;
          break;
        case 4:
          SetKwarg(&call, "max_seqlen",
                   ArgLiteral::Int(longest_ + in_.ConsumeIntegralInRange<int64_t>(-2, 2)));
          break;
        default: {
          // One keyword as the decoded call has it, or absent.
          const char* key = PickOne<const char*>(
              {"sequence_lengths", "max_seqlen", "output_ws", "softmax_scale"});
          std::erase_if(call.kwargs, [&](const auto& kv) { return kv.first == key; });
          for (const auto& [name, value] : wild.kwargs) {
            if (name == key) call.kwargs.emplace_back(name, value);
          }
          break;
        }
      }
    }
  }

  static void SetKwarg(CallSpec* call, const std::string& key, ArgLiteral value) {
    std::erase_if(call->kwargs, [&](const auto& kv) { return kv.first == key; });
    call->kwargs.emplace_back(key, std::move(value));
  }

  MetadataSpec Metadata() {
    MetadataSpec m;
    m.builder = PickOne({MetadataSpec::Builder::kPlain, MetadataSpec::Builder::kFlashinferCudnn,
                         MetadataSpec::Builder::kManual});
    m.device = in_.ConsumeBool() ? Device::kCuda : Device::kCpu;
    m.cu_seqlens = Arg(/*depth=*/0);
    if (m.builder == MetadataSpec::Builder::kFlashinferCudnn) {
      m.elem_per_token = PickOne<int64_t>(
          {width_, width_, width_ + 1, kInt32Max / std::max<int64_t>(2, longest_) + 1,
           in_.ConsumeIntegralInRange<int64_t>(-kInt32Max - 1, kInt32Max)});
      return m;
    }
    if (in_.ConsumeBool()) m.max_seqlen = Arg(0);
    if (m.builder == MetadataSpec::Builder::kManual) {
      m.seq_lens = Arg(0);
      m.packed_indptrs = Arg(0);
      m.sequence_lengths = Arg(0);
      m.flashinfer_max_seqlen = Arg(0);
    } else if (in_.ConsumeBool()) {
      m.packed_indptrs = Arg(0);
      m.sequence_lengths = Arg(0);
      m.flashinfer_max_seqlen = Arg(0);
    }
    return m;
  }

  // Any Python value a caller might pass, biased toward the plausible ones.
  ArgLiteral Arg(int depth) {
    ArgLiteral a;
    switch (in_.ConsumeIntegralInRange<int>(0, depth > 0 ? 9 : 8)) {
      case 0:
        return ArgLiteral::None();
      case 1:
        a.kind = ArgLiteral::Kind::kBool;
        a.b = in_.ConsumeBool();
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
        a.cache_has_data = in_.ConsumeBool();
        if (a.cache_has_data) a.tensor = TensorValue();
        return a;
      case 8:
        a.kind = ArgLiteral::Kind::kEmptyLikeQ;
        return a;
      default: {
        a.kind = ArgLiteral::Kind::kList;
        const int items = in_.ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < items; ++i) a.list.push_back(Arg(depth - 1));
        return a;
      }
    }
  }

  // The true maximum, an offset, or a value at an integer edge.
  int64_t Int() {
    switch (in_.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
        return longest_;
      case 1:
        return offsets_[in_.ConsumeIntegralInRange<size_t>(0, offsets_.size() - 1)];
      case 2:
        return longest_ + in_.ConsumeIntegralInRange<int64_t>(-2, 2);
      case 3:
        return PickOne<int64_t>({0, -1, kInt32Max, kInt32Max + 1, int64_t{1} << 32, kInt64Max,
                                 kInt64Min, 4096, 131072});
      default:
        return in_.ConsumeIntegral<int64_t>();
    }
  }

  // Special floats from their bit patterns, or the true maximum spelt as a
  // float (integral or not).
  double Float() {
    switch (in_.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:
        return static_cast<double>(longest_);
      case 1:
        return static_cast<double>(longest_) + 0.5;
      case 2:
        return std::bit_cast<double>(in_.ConsumeIntegral<uint64_t>());
      case 3:
        return PickOne({std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity(), -0.0,
                        std::numeric_limits<double>::denorm_min(), 9.3e18, -9.3e18});
      default:
        return in_.ConsumeFloatingPointInRange<double>(-1e4, 1e4);
    }
  }

  double FiniteFloat() {
    const double f = Float();
    return std::isfinite(f) ? f : static_cast<double>(longest_);
  }

  // What int() may be handed as text: the maximum in ASCII or in other
  // Unicode decimal digits, with ASCII or Unicode spaces, a sign, an
  // underscore, or raw bytes.
  std::string Str() {
    const std::string digits = absl::StrCat(longest_);
    switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        return digits;
      case 1: {
        static constexpr const char* kSpaces[] = {" ", "\t", "\n", "\u00a0", "\u2003", "\u3000"};
        const char* space = kSpaces[in_.ConsumeIntegralInRange<size_t>(0, 5)];
        return absl::StrCat(space, digits, space);
      }
      case 2: {
        // The same number in Arabic-Indic, Devanagari or fullwidth digits.
        static constexpr const char* kZeros[] = {"\u0660", "\u0966", "\uff10"};
        const std::string zero = kZeros[in_.ConsumeIntegralInRange<size_t>(0, 2)];
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
  std::string RandomText() {
    std::string out;
    const int count = in_.ConsumeIntegralInRange<int>(0, 6);
    for (int i = 0; i < count; ++i) {
      uint32_t cp = in_.ConsumeBool() ? in_.ConsumeIntegralInRange<uint32_t>(0x20, 0x7e)
                                      : in_.ConsumeIntegralInRange<uint32_t>(0, 0x10ffff);
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

  TensorLiteral TensorValue() {
    TensorLiteral t;
    t.dtype = PickOne({DType::kInt32, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kBool});
    t.device = in_.ConsumeBool() ? Device::kCuda : Device::kCpu;
    std::vector<int64_t> values;
    switch (in_.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
      case 1:
        values = offsets_;
        break;
      case 2:
        values = offsets_;
        values[in_.ConsumeIntegralInRange<size_t>(0, values.size() - 1)] = Int();
        break;
      default:
        values = {Int()};
        break;
    }
    const int shape = in_.ConsumeIntegralInRange<int>(0, 3);
    const auto n = static_cast<int64_t>(values.size());
    if (shape == 1) t.shape = Shape{n, 1, 1, 1};
    if (shape == 2) t.shape = Shape{};  // 0-d: only one value fits
    if (shape == 2) values.resize(1);
    // An int32 tensor cannot hold a value beyond int32: such a value comes
    // as the int64 tensor a caller would have.
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

  template <typename T>
  T PickOne(std::initializer_list<T> values) {
    return *(values.begin() + in_.ConsumeIntegralInRange<size_t>(0, values.size() - 1));
  }

  ChoiceReader in_;
  DecodeLimits limits_;
  std::vector<int64_t> offsets_;
  int64_t longest_ = 0;
  int64_t width_ = 0;
};

struct TargetLimits {
  const char* target;
  DecodeLimits limits;
};

constexpr TargetLimits kTargets[] = {
    {"contract", {}},
    // Up to 64 tokens, 4 heads, head dim 128: kernels' tile edges in reach.
    {"differential",
     {.max_sequences = 4, .max_len = 16, .max_kv_heads = 4, .max_heads = 4, .max_head_dim = 128}},
};

}  // namespace

absl::StatusOr<Case> DecodeCase(absl::Span<const uint8_t> bytes, const DecodeLimits& limits) {
  Case c = Decoder(bytes, limits).Decode();
  if (ValidateCase(c).ok()) return c;
  c.call.layout = QLayout::kPacked;
  c.call.rotary = false;
  if (ValidateCase(c).ok()) return c;
  c.call.entry = Entry::kDirect;  // the layer refuses an empty batch before any backend
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
