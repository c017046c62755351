// vLLM's calls for the fuzz decoder: MMEncoderAttention.forward with q as
// models hand it, its keywords in every form or made by the encoder
// metadata builders, and now and then SGLang's arguments, which vLLM
// refuses.

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine_decoders.h"
#include "varlen/cases/correct_call.h"

namespace varlen::internal {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The builders' input: host token offsets (a NumPy array), right or with
// one entry off, and the tower's sizes, right or as a model that forgets
// tensor parallelism or FP8 padding passes them.
VllmMetadataSpec VllmMetadata(DecodeContext& in) {
  VllmMetadataSpec m;
  TensorLiteral cu;
  cu.dtype = in.PickOne({DType::kInt32, DType::kInt64});
  cu.device = Device::kCpu;
  cu.ints = in.offsets();
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    cu.ints[in.ConsumeIntegralInRange<size_t>(0, cu.ints.size() - 1)] = in.Int();
  }
  if (std::any_of(cu.ints.begin(), cu.ints.end(),
                  [](int64_t v) { return v < -kInt32Max - 1 || v > kInt32Max; })) {
    cu.dtype = DType::kInt64;
  }
  m.cu_seqlens = ArgLiteral::Tensor(std::move(cu));
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) m.tp_size = in.ConsumeIntegralInRange(1, 4);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    m.hidden_size = in.PickOne<int64_t>({in.width() * m.tp_size, in.width(), in.width() + 1,
                                         in.ConsumeIntegralInRange<int64_t>(1, 4 * in.width())});
  }
  if (in.ConsumeIntegralInRange<int>(0, 5) == 0) {
    m.fp8_padded_hidden_size = in.ConsumeIntegralInRange<int64_t>(1, 2 * in.width() + 16);
  }
  m.device = in.PickOne({Device::kCuda, Device::kCuda, Device::kCpu});
  return m;
}

// The builders make cu_seqlens, max_seqlen and sequence_lengths: a call
// with builder metadata passes none of them itself. Either the explicit
// keywords win (the metadata is dropped) or the metadata does.
void SettleVllmMetadata(CallSpec* call, bool explicit_keywords_win) {
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

// A version, then vLLM's one entry, MMEncoderAttention.forward: q as
// models hand it ([b, s, H, D], mostly one item of every patch, or the
// fused projection's views), its three keywords in every form or made by
// the encoder metadata builders, and now and then SGLang's metadata or
// keywords, which vLLM refuses before anything else.
void DecodeVllmCall(DecodeContext& in, Profile profile, Case* c) {
  const std::vector<EngineVersion> versions = EngineVersion::Modelled(Engine::kVllm);
  c->version = versions[in.ConsumeIntegralInRange<size_t>(0, versions.size() - 1)];
  // MMEncoderAttention has one head_size: a v of another one is viewed
  // into an error, except by FLASHINFER, which passes it on; drawn now
  // and then.
  if (in.ConsumeIntegralInRange<int>(0, 3) != 0) c->geometry.head_dim_v = c->geometry.head_dim;
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  call = CallSpec();
  call.profile = profile;
  call.layout = in.PickOne({QLayout::kBatched, QLayout::kBatched, QLayout::kBatchedFusedQkv,
                            QLayout::kPacked, QLayout::kFusedQkv});
  if (g.head_dim_v != g.head_dim) call.layout = UnfusedLayout(call.layout);
  if (call.layout == QLayout::kBatched || call.layout == QLayout::kBatchedFusedQkv) {
    // b images of s patches each where every sequence has one length.
    const std::vector<int64_t>& lengths = g.seq_lens;
    const bool uniform =
        lengths.size() > 1 && std::all_of(lengths.begin(), lengths.end(),
                                          [&](int64_t n) { return n == lengths.front(); });
    if (uniform && in.ConsumeBool()) {
      call.bsz = static_cast<int64_t>(lengths.size());
      call.seq_len = lengths.front();
    } else {
      call.seq_len = g.total_tokens();
    }
    call.merged_heads = in.ConsumeIntegralInRange<int>(0, 3) == 0;  // [b, s, H * D]
  }
  call.cu_seqlens = in.Arg(/*depth=*/1);
  for (const char* key : {"max_seqlen", "sequence_lengths"}) {
    if (in.ConsumeBool()) call.kwargs.emplace_back(key, in.Arg(/*depth=*/1));
  }
  if (in.ConsumeIntegralInRange<int>(0, 2) == 0) call.vllm_metadata = VllmMetadata(in);
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    if (in.ConsumeBool()) {
      call.forward_metadata = in.Metadata();
    } else {
      call.kwargs.emplace_back(in.PickOne<const char*>({"output_ws", "softmax_scale"}), in.Arg(1));
    }
  }
  SettleVllmMetadata(&call, /*explicit_keywords_win=*/false);
}

// The correct call (prepared when the
// decoded one has builder metadata) with `taken` of the decoded call's
// arguments, or max_seqlen off the truth by at most two.
void BlendWithCorrectVllmCall(DecodeContext& in, Case* c, int taken) {
  const CallSpec wild = c->call;
  SetCorrectCall(c, wild.profile, wild.vllm_metadata.has_value(), Entry::kDirect);
  c->expect.reset();
  CallSpec& call = c->call;
  for (int i = 0; i < taken; ++i) {
    bool explicit_keywords_win = true;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
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
            ArgLiteral::IntScalarTensor(in.longest() + in.ConsumeIntegralInRange<int64_t>(-2, 2),
                                        DType::kInt32, Device::kCpu));
        break;
      default: {
        const char* key = in.PickOne<const char*>(
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

void DirectEntry(Case* c) { c->call.entry = Entry::kDirect; }

}  // namespace

const EngineDecoder& VllmDecoder() {
  static constexpr EngineDecoder kDecoder = {
      .decode_call = DecodeVllmCall,
      .blend_with_correct_call = BlendWithCorrectVllmCall,
      .to_plainest_entry = DirectEntry,
  };
  return kDecoder;
}

}  // namespace varlen::internal
