// transformers' calls for the fuzz decoder: VisionAttention and the
// attention interface function, in each band.

#include <string>
#include <vector>

#include "engine_decoders.h"
#include "varlen/cases/correct_call.h"

namespace varlen::internal {
namespace {

// A tower's grid_thw: the frames of the geometry's sequences, or rows of
// small sizes (zero and negative ones too) in another dtype, device or
// shape.
ArgLiteral DecodeGridThw(DecodeContext& in) {
  std::vector<int64_t> lengths;
  for (size_t i = 1; i < in.offsets().size(); ++i) {
    lengths.push_back(in.offsets()[i] - in.offsets()[i - 1]);
  }
  ArgLiteral grid = FrameGridOf(lengths);
  TensorLiteral& t = grid.tensor;
  if (in.ConsumeBool()) return grid;
  if (in.ConsumeBool()) {
    const int64_t rows = in.ConsumeIntegralInRange<int64_t>(0, 4);
    t.ints.clear();
    for (int64_t i = 0; i < 3 * rows; ++i) {
      t.ints.push_back(in.ConsumeIntegralInRange<int64_t>(-1, 8));
    }
    t.shape = Shape{rows, 3};
  }
  t.dtype = in.PickOne({DType::kInt64, DType::kInt32, DType::kInt16, DType::kFloat32});
  if (t.dtype == DType::kFloat32) {
    t.floats.assign(t.ints.begin(), t.ints.end());
    t.ints.clear();
  }
  t.device = in.PickOne({Device::kCuda, Device::kCpu});
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) t.shape.reset();
  return grid;
}

// A band, then one of transformers' three entries: the tower with its
// grid_thw and keywords, VisionAttention with the tower's cu_seqlens and
// keywords, or the attention interface function with its own, each in
// every form and now and then absent, and now and then a keyword of the
// branches no tower takes.
void DecodeTransformersCall(DecodeContext& in, Profile profile, Case* c) {
  const std::vector<EngineVersion> bands = EngineVersion::Modelled(Engine::kTransformers);
  c->version = bands[in.ConsumeIntegralInRange<size_t>(0, bands.size() - 1)];
  const Geometry& g = c->geometry;
  CallSpec& call = c->call;
  call = CallSpec();
  call.profile = profile;
  call.entry = in.PickOne({Entry::kLayer, Entry::kDirect, Entry::kTower});
  call.layout = in.PickOne({QLayout::kPacked, QLayout::kPacked, QLayout::kFusedQkv});
  if (g.head_dim_v != g.head_dim) call.layout = QLayout::kPacked;
  if (call.entry == Entry::kTower) {
    call.rotary = in.ConsumeBool();
    call.kwargs.emplace_back("grid_thw", DecodeGridThw(in));
    for (const char* key : {"cu_seqlens", "max_seqlen"}) {
      if (in.ConsumeIntegralInRange<int>(0, 3) == 0) call.kwargs.emplace_back(key, in.Arg(1));
    }
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
      // A tower with windows (Qwen2.5-VL), of small sizes, and its keywords.
      call.windows = TowerWindows{.window_size = in.ConsumeIntegralInRange<int64_t>(1, 8),
                                  .patch_size = 1,
                                  .spatial_merge_size = in.ConsumeIntegralInRange<int64_t>(1, 2)};
      call.windows->window_size *= call.windows->spatial_merge_size;
      for (const char* key : {"window_index", "cu_window_seqlens", "max_window_seqlen"}) {
        if (in.ConsumeIntegralInRange<int>(0, 3) == 0) call.kwargs.emplace_back(key, in.Arg(1));
      }
    }
  } else if (call.entry == Entry::kLayer) {
    call.rotary = in.ConsumeBool();
    call.cu_seqlens = in.Arg(/*depth=*/1);
    if (in.ConsumeBool()) call.kwargs.emplace_back("max_seqlen", in.Arg(/*depth=*/1));
  } else {
    for (const char* key : {"attention_mask", "scaling", "dropout", "cu_seq_lens_q",
                            "cu_seq_lens_k", "max_length_q", "max_length_k", "is_causal"}) {
      if (in.ConsumeIntegralInRange<int>(0, 3) != 0) call.kwargs.emplace_back(key, in.Arg(1));
    }
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    call.kwargs.emplace_back(in.PickOne<const char*>({"position_ids", "block_table"}),
                             in.Arg(/*depth=*/1));
  }
}

// The correct call through the decoded entry (with the tower's max or without) with `taken` of the
// decoded call's arguments: its cu_seqlens, or one of its keywords as it
// has it (or absent).
void BlendWithCorrectTransformersCall(DecodeContext& in, Case* c, int taken) {
  const CallSpec wild = c->call;
  SetCorrectCall(c, wild.profile, in.ConsumeBool(), wild.entry);
  c->expect.reset();
  CallSpec& call = c->call;
  call.layout = wild.layout;
  call.rotary = wild.rotary && call.entry != Entry::kDirect;
  if (call.entry == Entry::kTower) call.windows = wild.windows;
  for (int i = 0; i < taken; ++i) {
    if (call.entry == Entry::kLayer && in.ConsumeIntegralInRange<int>(0, 3) == 0) {
      call.cu_seqlens = wild.cu_seqlens;
      continue;
    }
    if (wild.kwargs.empty()) continue;
    const std::string key =
        wild.kwargs[in.ConsumeIntegralInRange<size_t>(0, wild.kwargs.size() - 1)].first;
    std::erase_if(call.kwargs, [&](const auto& kv) { return kv.first == key; });
    for (const auto& [name, value] : wild.kwargs) {
      if (name == key) {
        call.kwargs.emplace_back(name, value);
        break;
      }
    }
  }
}

// The attention interface takes its offsets as keywords only.
void PlainestEntry(Case* c) {
  c->call.entry = Entry::kDirect;
  c->call.cu_seqlens = ArgLiteral::None();
  c->call.windows.reset();  // a tower's
}

}  // namespace

const EngineDecoder& TransformersDecoder() {
  static constexpr EngineDecoder kDecoder = {
      .decode_call = DecodeTransformersCall,
      .blend_with_correct_call = BlendWithCorrectTransformersCall,
      .to_plainest_entry = PlainestEntry,
  };
  return kDecoder;
}

}  // namespace varlen::internal
