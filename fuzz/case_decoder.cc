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
    const std::vector<EngineVersion> versions = EngineVersion::Modelled(Engine::kSglang);
    c.version = versions[in_.ConsumeIntegralInRange<size_t>(0, versions.size() - 1)];
    c.geometry = DecodeGeometry();
    c.data.seed = in_.ConsumeIntegral<uint16_t>();
    c.data.distribution = static_cast<Distribution>(
        in_.ConsumeIntegralInRange<int>(0, static_cast<int>(Distribution::kSubnormal)));
    offsets_ = {0};
    for (int64_t n : c.geometry.seq_lens) offsets_.push_back(offsets_.back() + n);
    longest_ = *std::max_element(c.geometry.seq_lens.begin(), c.geometry.seq_lens.end());
    width_ = c.geometry.num_heads * c.geometry.head_dim;
    // The engine first, then one of its profiles: each engine gets an even
    // share of the inputs, whatever its number of profiles.
    const absl::Span<const Engine> engines = AllEngines();
    const Engine engine = engines[in_.ConsumeIntegralInRange<size_t>(0, engines.size() - 1)];
    const absl::Span<const Profile> profiles = ProfilesOf(engine);
    const Profile profile = profiles[in_.ConsumeIntegralInRange<size_t>(0, profiles.size() - 1)];
    if (engine == Engine::kVllm) {
      const std::vector<EngineVersion> vllm_versions = EngineVersion::Modelled(Engine::kVllm);
      c.version = vllm_versions[in_.ConsumeIntegralInRange<size_t>(0, vllm_versions.size() - 1)];
      // MMEncoderAttention has one head_size: a v of another one is viewed
      // into an error, except by FLASHINFER, which passes it on; drawn now
      // and then.
      if (in_.ConsumeIntegralInRange<int>(0, 3) != 0) c.geometry.head_dim_v = c.geometry.head_dim;
      c.call = DecodeVllmCall(profile, c.geometry);
    } else if (engine == Engine::kTransformers) {
      const std::vector<EngineVersion> bands = EngineVersion::Modelled(Engine::kTransformers);
      c.version = bands[in_.ConsumeIntegralInRange<size_t>(0, bands.size() - 1)];
      c.call = DecodeTransformersCall(profile, c.geometry);
    } else {
      c.call = DecodeSglangCall(profile);
    }
    BlendWithCorrectCall(&c);
    return c;
  }

 private:
  Geometry DecodeGeometry() {
    if (limits_.long_len > 0 && in_.ConsumeIntegralInRange<int>(0, 3) == 3) {
      limits_ = {.max_sequences = 2,
                 .max_len = limits_.long_len,
                 .max_kv_heads = 1,
                 .max_heads = 2,
                 .max_head_dim = 16};
    }
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

  CallSpec DecodeSglangCall(Profile profile) {
    CallSpec call;
    call.profile = profile;
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
    // Now and then a keyword most backends never read (a typo, an attention
    // variant): forward's **kwargs swallow it, hardened mode refuses it.
    if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) {
      call.kwargs.emplace_back(PickOne<const char*>({"max_seq_len", "window_size", "s_aux"}),
                               Arg(/*depth=*/1));
    }
    return call;
  }

  // transformers' two entries: VisionAttention with the tower's cu_seqlens
  // and keywords, or the attention interface function with its own, each
  // in every form and now and then absent, and now and then a keyword of
  // the branches no tower takes.
  CallSpec DecodeTransformersCall(Profile profile, const Geometry& g) {
    CallSpec call;
    call.profile = profile;
    call.entry = in_.ConsumeBool() ? Entry::kLayer : Entry::kDirect;
    call.layout = PickOne({QLayout::kPacked, QLayout::kPacked, QLayout::kFusedQkv});
    if (g.head_dim_v != g.head_dim) call.layout = QLayout::kPacked;
    if (call.entry == Entry::kLayer) {
      call.rotary = in_.ConsumeBool();
      call.cu_seqlens = Arg(/*depth=*/1);
      if (in_.ConsumeBool()) call.kwargs.emplace_back("max_seqlen", Arg(/*depth=*/1));
    } else {
      for (const char* key : {"attention_mask", "scaling", "dropout", "cu_seq_lens_q",
                              "cu_seq_lens_k", "max_length_q", "max_length_k", "is_causal"}) {
        if (in_.ConsumeIntegralInRange<int>(0, 3) != 0) call.kwargs.emplace_back(key, Arg(1));
      }
    }
    if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) {
      call.kwargs.emplace_back(PickOne<const char*>({"position_ids", "block_table"}),
                               Arg(/*depth=*/1));
    }
    return call;
  }

  // vLLM's one entry, MMEncoderAttention.forward: q as models hand it
  // ([b, s, H, D], mostly one item of every patch, or the fused
  // projection's views), its three keywords in every form or made by the
  // encoder metadata builders, and now and then SGLang's metadata or
  // keywords, which vLLM refuses before anything else.
  CallSpec DecodeVllmCall(Profile profile, const Geometry& g) {
    CallSpec call;
    call.profile = profile;
    call.layout = PickOne({QLayout::kBatched, QLayout::kBatched, QLayout::kBatchedFusedQkv,
                           QLayout::kPacked, QLayout::kFusedQkv});
    if (g.head_dim_v != g.head_dim) call.layout = UnfusedLayout(call.layout);
    if (call.layout == QLayout::kBatched || call.layout == QLayout::kBatchedFusedQkv) {
      // b images of s patches each where every sequence has one length.
      const std::vector<int64_t>& lengths = g.seq_lens;
      const bool uniform =
          lengths.size() > 1 && std::all_of(lengths.begin(), lengths.end(),
                                            [&](int64_t n) { return n == lengths.front(); });
      if (uniform && in_.ConsumeBool()) {
        call.bsz = static_cast<int64_t>(lengths.size());
        call.seq_len = lengths.front();
      } else {
        call.seq_len = g.total_tokens();
      }
      call.merged_heads = in_.ConsumeIntegralInRange<int>(0, 3) == 0;  // [b, s, H * D]
    }
    call.cu_seqlens = Arg(/*depth=*/1);
    for (const char* key : {"max_seqlen", "sequence_lengths"}) {
      if (in_.ConsumeBool()) call.kwargs.emplace_back(key, Arg(/*depth=*/1));
    }
    if (in_.ConsumeIntegralInRange<int>(0, 2) == 0) call.vllm_metadata = VllmMetadata();
    if (in_.ConsumeIntegralInRange<int>(0, 7) == 0) {
      if (in_.ConsumeBool()) {
        call.forward_metadata = Metadata();
      } else {
        call.kwargs.emplace_back(PickOne<const char*>({"output_ws", "softmax_scale"}), Arg(1));
      }
    }
    SettleVllmMetadata(&call, /*explicit_keywords_win=*/false);
    return call;
  }

  // The builders' input: host token offsets (a NumPy array), right or with
  // one entry off, and the tower's sizes, right or as a model that forgets
  // tensor parallelism or FP8 padding passes them.
  VllmMetadataSpec VllmMetadata() {
    VllmMetadataSpec m;
    TensorLiteral cu;
    cu.dtype = PickOne({DType::kInt32, DType::kInt64});
    cu.device = Device::kCpu;
    cu.ints = offsets_;
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      cu.ints[in_.ConsumeIntegralInRange<size_t>(0, cu.ints.size() - 1)] = Int();
    }
    if (std::any_of(cu.ints.begin(), cu.ints.end(),
                    [](int64_t v) { return v < -kInt32Max - 1 || v > kInt32Max; })) {
      cu.dtype = DType::kInt64;
    }
    m.cu_seqlens = ArgLiteral::Tensor(std::move(cu));
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) m.tp_size = in_.ConsumeIntegralInRange(1, 4);
    if (in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
      m.hidden_size = PickOne<int64_t>({width_ * m.tp_size, width_, width_ + 1,
                                        in_.ConsumeIntegralInRange<int64_t>(1, 4 * width_)});
    }
    if (in_.ConsumeIntegralInRange<int>(0, 5) == 0) {
      m.fp8_padded_hidden_size = in_.ConsumeIntegralInRange<int64_t>(1, 2 * width_ + 16);
    }
    m.device = PickOne({Device::kCuda, Device::kCuda, Device::kCpu});
    return m;
  }

  // The builders make cu_seqlens, max_seqlen and sequence_lengths: a call
  // with builder metadata passes none of them itself. Either the explicit
  // keywords win (the metadata is dropped) or the metadata does.
  static void SettleVllmMetadata(CallSpec* call, bool explicit_keywords_win) {
    if (!call->vllm_metadata.has_value()) return;
    auto made_by_builders = [](const auto& kv) {
      return kv.first == "max_seqlen" || kv.first == "sequence_lengths";
    };
    const bool conflict = call->cu_seqlens.kind != ArgLiteral::Kind::kNone ||
                          std::any_of(call->kwargs.begin(), call->kwargs.end(), made_by_builders);
    if (!conflict) return;
    if (explicit_keywords_win) {
      call->vllm_metadata.reset();
    } else {
      call->cu_seqlens = ArgLiteral::None();
      std::erase_if(call->kwargs, made_by_builders);
    }
  }

  // Most calls are correct, and most bugs hide one wrong argument away: as
  // often as not the call becomes the correct one (correct_call.h) with one
  // to three of its arguments taken from the decoded call, or max_seqlen off
  // the truth by at most two. Decided from the last bytes, so inputs that
  // end before this keep the decoded call as it is.
  void BlendWithCorrectCall(Case* c) {
    const int taken = in_.ConsumeIntegralInRange<int>(0, 3);
    if (taken == 0) return;
    if (c->engine() == Engine::kVllm) return BlendWithCorrectVllmCall(c, taken);
    if (c->engine() == Engine::kTransformers) return BlendWithCorrectTransformersCall(c, taken);
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

  // BlendWithCorrectCall for transformers: the correct call through the
  // decoded entry (with the tower's max or without) with `taken` of the
  // decoded call's arguments: its cu_seqlens, or one of its keywords as it
  // has it (or absent).
  void BlendWithCorrectTransformersCall(Case* c, int taken) {
    const CallSpec wild = c->call;
    SetCorrectCall(c, wild.profile, in_.ConsumeBool(), wild.entry);
    c->expect.reset();
    CallSpec& call = c->call;
    call.layout = wild.layout;
    call.rotary = wild.rotary && call.entry == Entry::kLayer;
    for (int i = 0; i < taken; ++i) {
      if (call.entry == Entry::kLayer && in_.ConsumeIntegralInRange<int>(0, 3) == 0) {
        call.cu_seqlens = wild.cu_seqlens;
        continue;
      }
      if (wild.kwargs.empty()) continue;
      const std::string key =
          wild.kwargs[in_.ConsumeIntegralInRange<size_t>(0, wild.kwargs.size() - 1)].first;
      std::erase_if(call.kwargs, [&](const auto& kv) { return kv.first == key; });
      for (const auto& [name, value] : wild.kwargs) {
        if (name == key) {
          call.kwargs.emplace_back(name, value);
          break;
        }
      }
    }
  }

  // BlendWithCorrectCall for vLLM: the correct call (prepared when the
  // decoded one has builder metadata) with `taken` of the decoded call's
  // arguments, or max_seqlen off the truth by at most two.
  void BlendWithCorrectVllmCall(Case* c, int taken) {
    const CallSpec wild = c->call;
    SetCorrectCall(c, wild.profile, wild.vllm_metadata.has_value(), Entry::kDirect);
    c->expect.reset();
    CallSpec& call = c->call;
    for (int i = 0; i < taken; ++i) {
      bool explicit_keywords_win = true;
      switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
        case 0:
          call.cu_seqlens = wild.cu_seqlens;
          break;
        case 1:
          call.vllm_metadata = wild.vllm_metadata;
          explicit_keywords_win = false;
          break;
        case 2:
          call.forward_metadata = wild.forward_metadata;
          break;
        case 3:
          call.layout = wild.layout;
          call.merged_heads = wild.merged_heads;
          call.bsz = wild.bsz;
          call.seq_len = wild.seq_len;
          break;
        case 4:
          // As compute_max_seqlen hands it: a 0-d host int32 tensor.
          SetKwarg(
              &call, "max_seqlen",
              ArgLiteral::IntScalarTensor(longest_ + in_.ConsumeIntegralInRange<int64_t>(-2, 2),
                                          DType::kInt32, Device::kCpu));
          break;
        default: {
          const char* key = PickOne<const char*>(
              {"cu_seqlens", "max_seqlen", "sequence_lengths", "output_ws", "softmax_scale"});
          if (std::string(key) == "cu_seqlens") {
            call.cu_seqlens = wild.cu_seqlens;
            break;
          }
          std::erase_if(call.kwargs, [&](const auto& kv) { return kv.first == key; });
          for (const auto& [name, value] : wild.kwargs) {
            if (name == key) call.kwargs.emplace_back(name, value);
          }
          break;
        }
      }
      SettleVllmMetadata(&call, explicit_keywords_win);
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
    t.dtype = PickOne({DType::kInt32, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kBool,
                       DType::kInt16});
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
    if (shape != 2 && in_.ConsumeIntegralInRange<int>(0, 7) == 0) t.step = 2;  // not contiguous
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
    // Up to 64 tokens, 4 heads, head dim 128: kernels' tile edges in reach;
    // or one or two sequences of up to 160 tokens, thin, past a key tile.
    {"differential",
     {.max_sequences = 4,
      .max_len = 16,
      .max_kv_heads = 4,
      .max_heads = 4,
      .max_head_dim = 128,
      .long_len = 160}},
};

}  // namespace

absl::StatusOr<Case> DecodeCase(absl::Span<const uint8_t> bytes, const DecodeLimits& limits) {
  Case c = Decoder(bytes, limits).Decode();
  if (ValidateCase(c).ok()) return c;
  c.call.layout = QLayout::kPacked;
  c.call.rotary = false;
  if (ValidateCase(c).ok()) return c;
  c.call.entry = Entry::kDirect;  // the layer refuses an empty batch before any backend
  // transformers' attention interface takes its offsets as keywords only.
  if (c.engine() == Engine::kTransformers) c.call.cu_seqlens = ArgLiteral::None();
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
