// SGLang's calls for the fuzz decoder: VisionAttention or a backend's
// forward called directly, every keyword and SGLang's forward metadata in
// every form, in graph mode now and then.

#include <algorithm>
#include <vector>

#include "engine_decoders.h"
#include "varlen/cases/correct_call.h"

namespace varlen::internal {
namespace {

// The layer or the backend's forward, q packed, fused, or batched as the
// direct entry may take it, and every argument drawn.
void DecodeSglangCall(DecodeContext& in, Profile profile, Case* c) {
  CallSpec& call = c->call;
  call = CallSpec();
  call.profile = profile;
  call.entry = in.ConsumeBool() ? Entry::kLayer : Entry::kDirect;
  call.graph_mode = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  call.layout =
      in.PickOne({QLayout::kPacked, QLayout::kPacked, QLayout::kFusedQkv, QLayout::kBatched});
  call.rotary = call.entry == Entry::kLayer && in.ConsumeBool();
  // The layer derives bsz and seq_len from q itself.
  if (call.entry == Entry::kDirect && in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    call.bsz = in.ConsumeIntegralInRange<int64_t>(1, 4);
    call.seq_len = in.ConsumeIntegralInRange<int64_t>(0, 2 * in.limits().max_len);
  }
  call.cu_seqlens = in.Arg(/*depth=*/1);
  if (in.ConsumeBool()) call.forward_metadata = in.Metadata();
  for (const char* key : {"sequence_lengths", "max_seqlen", "output_ws", "softmax_scale"}) {
    if (in.ConsumeBool()) call.kwargs.emplace_back(key, in.Arg(/*depth=*/1));
  }
  call.sdpa.flatten_batch = in.ConsumeBool();
  call.sdpa.softmax_in_single_precision = in.ConsumeBool();
  // Through the layer, sdpa gets the layer's scale, never its own.
  if (call.entry == Entry::kDirect && in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    call.sdpa.softmax_scale = in.FiniteFloat();
  }
  // Now and then a keyword most backends never read (a typo, an attention
  // variant): forward's **kwargs swallow it, hardened mode refuses it.
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    call.kwargs.emplace_back(in.PickOne<const char*>({"max_seq_len", "window_size", "s_aux"}),
                             in.Arg(/*depth=*/1));
  }
}

// The correct call (prepared when the decoded one has metadata, through
// the layer where it can take the case) with `taken` of the decoded call's
// arguments, or max_seqlen off the truth by at most two.
void BlendWithCorrectSglangCall(DecodeContext& in, Case* c, int taken) {
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
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
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
                 ArgLiteral::Int(in.longest() + in.ConsumeIntegralInRange<int64_t>(-2, 2)));
        break;
      default: {
        // One keyword as the decoded call has it, or absent.
        const char* key = in.PickOne<const char*>(
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

void DirectEntry(Case* c) { c->call.entry = Entry::kDirect; }

}  // namespace

const EngineDecoder& SglangDecoder() {
  static constexpr EngineDecoder kDecoder = {
      .decode_call = DecodeSglangCall,
      .blend_with_correct_call = BlendWithCorrectSglangCall,
      .to_plainest_entry = DirectEntry,
  };
  return kDecoder;
}

}  // namespace varlen::internal
