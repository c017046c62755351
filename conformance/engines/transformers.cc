// transformers' calls for the generators and the call properties: the
// layer (VisionAttention.forward) and the attention interface, their
// well-formed spellings, and the corruptions of the tower's max and of the
// four-or-nothing varlen keywords.

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine_generators.h"
#include "varlen/cases/correct_call.h"
#include "varlen/contract/transformers/windows.h"

namespace varlen::internal {
namespace {

// The grid_thw of `lengths`' frames, or now and then another form of it: a
// dtype or device of its own, a wrong size, a negative count, a shape other
// than [images, 3].
ArgLiteral GenGridThw(const std::vector<int64_t>& lengths) {
  ArgLiteral grid = FrameGridOf(lengths);
  TensorLiteral& t = grid.tensor;
  const int64_t rows = static_cast<int64_t>(t.ints.size() / 3);
  switch (*rc::gen::inRange(0, 12)) {
    case 0:
      t.dtype = DType::kInt32;
      break;
    case 1:
      t.device = Device::kCpu;
      break;
    case 2:
      t.dtype = *rc::gen::element(DType::kFloat32, DType::kBool, DType::kInt16);
      if (t.dtype == DType::kFloat32) {
        t.floats.assign(t.ints.begin(), t.ints.end());
        t.ints.clear();
      } else if (t.dtype == DType::kBool) {
        for (int64_t& v : t.ints) v = v != 0;
      }
      break;
    case 3:
      t.shape.reset();  // flattened
      break;
    case 4:
      if (rows > 0) t.ints[3 * *rc::gen::inRange<int64_t>(0, rows)] = -1;
      break;
    case 5:
      if (rows > 0) t.ints[3 * *rc::gen::inRange<int64_t>(0, rows) + 2] += 1;
      break;
    case 6:
      if (rows > 0) {
        t.ints.resize(t.ints.size() - 3);
        t.shape = Shape{rows - 1, 3};
      }
      break;
    default:
      break;
  }
  return grid;
}

// A tower with windows (Qwen2.5-VL's first block): windows holding one
// frame each; Qwen2.5-VL's config on a grid of whole merged cells; or small
// windows that cut the frames. Where the grid is well formed the geometry
// becomes its windows, the segments the block attends within. Now and then
// with the caller's window_index, cu_window_seqlens (alone or as a pair)
// and max_window_seqlen.
template <typename CuForm, typename MaxForm>
void GenTowerWindows(Case* c, const CuForm& cu_form, const MaxForm& max_form) {
  CallSpec& call = c->call;
  Geometry& g = c->geometry;
  const ArgLiteral frames = FrameGridOf(g.seq_lens);
  auto grid_is_the_frames = [&] {
    return std::any_of(call.kwargs.begin(), call.kwargs.end(), [&](const auto& kv) {
      return kv.first == "grid_thw" && kv.second == frames;
    });
  };
  switch (*rc::gen::inRange(0, 3)) {
    case 0:
      call.windows = OneWindowPerFrame(frames);
      break;
    case 1: {
      call.windows = TowerWindows{};
      std::vector<int64_t> sizes;
      const int64_t images = *rc::gen::inRange<int64_t>(1, 3);
      for (int64_t i = 0; i < images; ++i) {
        sizes.insert(sizes.end(),
                     {*rc::gen::inRange<int64_t>(1, 3), 2 * *rc::gen::inRange<int64_t>(1, 5),
                      2 * *rc::gen::inRange<int64_t>(1, 5)});
      }
      ArgLiteral grid = ArgLiteral::IntTensor(sizes, DType::kInt64, Device::kCuda);
      grid.tensor.shape = Shape{images, 3};
      SetKwarg(&call, "grid_thw", grid);
      g.seq_lens = WindowLayoutOf(sizes, *call.windows).lengths();
      break;
    }
    default: {
      const int64_t merge = *rc::gen::inRange<int64_t>(1, 3);
      call.windows = TowerWindows{.window_size = merge * *rc::gen::inRange<int64_t>(1, 9),
                                  .patch_size = 1,
                                  .spatial_merge_size = merge};
      const std::vector<int64_t>& sizes = frames.tensor.ints;
      const bool whole = std::all_of(sizes.begin(), sizes.end(),
                                     [merge](int64_t size) { return size % merge == 0; });
      if (grid_is_the_frames() && whole && !sizes.empty()) {
        g.seq_lens = WindowLayoutOf(sizes, *call.windows).lengths();
      }
      break;
    }
  }
  const int64_t tokens = g.total_tokens(), unit = call.windows->merge_unit();
  if (*rc::gen::inRange(0, 4) == 0 && tokens % unit == 0) {
    std::vector<int64_t> cells(static_cast<size_t>(tokens / unit));
    for (size_t i = 0; i < cells.size(); ++i) cells[i] = static_cast<int64_t>(i);
    call.kwargs.emplace_back("window_index",
                             ArgLiteral::IntTensor(cells, DType::kInt64, Device::kCuda));
  }
  if (*rc::gen::inRange(0, 4) == 0) call.kwargs.emplace_back("cu_window_seqlens", cu_form());
  if (*rc::gen::inRange(0, 4) == 0) call.kwargs.emplace_back("max_window_seqlen", max_form());
}

// position_ids as packed-sequence callers pass them ([1, T], each sequence
// counting from 0), or in the forms the bug history holds: 1-d (#43403),
// M-RoPE's [3, 1, T] (#44643), counting from 1 (#39814), one range over the
// whole pack (not packed), int32, on the host.
ArgLiteral GenPositionIds(const Geometry& g) {
  std::vector<int64_t> positions;
  for (int64_t length : g.seq_lens) {
    for (int64_t i = 0; i < length; ++i) positions.push_back(i);
  }
  const int64_t tokens = static_cast<int64_t>(positions.size());
  ArgLiteral ids = ArgLiteral::IntTensor(positions, DType::kInt64, Device::kCuda);
  TensorLiteral& t = ids.tensor;
  t.shape = Shape{1, tokens};
  switch (*rc::gen::inRange(0, 10)) {
    case 0:
      t.shape.reset();
      break;
    case 1: {
      const std::vector<int64_t> once = t.ints;
      for (int axis = 1; axis < 3; ++axis) t.ints.insert(t.ints.end(), once.begin(), once.end());
      t.shape = Shape{3, 1, tokens};
      break;
    }
    case 2:
      for (int64_t& v : t.ints) ++v;
      break;
    case 3:
      for (int64_t i = 0; i < tokens; ++i) t.ints[static_cast<size_t>(i)] = i;
      break;
    case 4:
      t.dtype = DType::kInt32;
      break;
    case 5:
      t.device = Device::kCpu;
      break;
    default:
      break;
  }
  return ids;
}

// A wild case's call made a transformers call: VisionAttention with the
// tower's cu_seqlens and keywords, or the attention interface with its
// keywords, each now and then in another of the forms GenArg draws, or left
// out.
void MakeTransformersCall(Case* c) {
  CallSpec& call = c->call;
  const Geometry& g = c->geometry;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  c->version.reset();
  if (*rc::gen::arbitrary<bool>()) {
    c->version = *rc::gen::elementOf(EngineVersion::Modelled(Engine::kTransformers));
  }
  call.graph_mode = false;
  call.sdpa = SdpaOptions{};
  call.bsz.reset();
  call.seq_len.reset();
  call.forward_metadata.reset();
  call.kwargs.clear();
  const ArgLiteral cu = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  auto cu_form = [&] { return *rc::gen::inRange(0, 3) == 0 ? *GenArg(offsets, 1) : cu; };
  auto max_form = [&] {
    return *rc::gen::inRange(0, 3) == 0 ? *GenArg(offsets, 0) : ArgLiteral::Int(g.longest());
  };
  if (call.entry == Entry::kLayer) {
    // One projection makes q, k and v: as many key heads as query heads.
    c->geometry.num_kv_heads = g.num_heads;
    if (*rc::gen::inRange(0, 3) == 0) {
      // The tower, handed its grid (now and then not the frames' own) and
      // now and then precomputed values.
      call.entry = Entry::kTower;
      call.cu_seqlens = ArgLiteral::None();
      call.kwargs.emplace_back("grid_thw", GenGridThw(g.seq_lens));
      if (*rc::gen::inRange(0, 4) == 0) call.kwargs.emplace_back("cu_seqlens", cu_form());
      if (*rc::gen::inRange(0, 3) == 0) call.kwargs.emplace_back("max_seqlen", max_form());
      call.windows.reset();
      if (*rc::gen::inRange(0, 3) == 0) GenTowerWindows(c, cu_form, max_form);
      return;
    }
    call.cu_seqlens = cu_form();
    if (*rc::gen::arbitrary<bool>()) call.kwargs.emplace_back("max_seqlen", max_form());
    return;
  }
  call.rotary = false;
  call.cu_seqlens = ArgLiteral::None();
  if (*rc::gen::inRange(0, 8) != 0) call.kwargs.emplace_back("attention_mask", ArgLiteral::None());
  if (const int scaling = *rc::gen::inRange(0, 4); scaling > 0) {
    call.kwargs.emplace_back("scaling", scaling == 1 ? ArgLiteral::None()
                                                     : ArgLiteral::Float(std::pow(
                                                           static_cast<double>(g.head_dim), -0.5)));
  }
  if (*rc::gen::arbitrary<bool>()) call.kwargs.emplace_back("dropout", ArgLiteral::Float(0.0));
  const ArgLiteral cu_q = cu_form();
  const ArgLiteral max_q = max_form();
  const std::pair<const char*, const ArgLiteral*> varlen[] = {{"cu_seq_lens_q", &cu_q},
                                                              {"cu_seq_lens_k", &cu_q},
                                                              {"max_length_q", &max_q},
                                                              {"max_length_k", &max_q}};
  for (const auto& [key, value] : varlen) {
    if (*rc::gen::inRange(0, 8) != 0) call.kwargs.emplace_back(key, *value);
  }
  if (*rc::gen::inRange(0, 6) != 0) {
    ArgLiteral is_causal;
    is_causal.kind = ArgLiteral::Kind::kBool;
    is_causal.b = *rc::gen::inRange(0, 8) == 0;
    call.kwargs.emplace_back("is_causal", is_causal);
  }
  if (*rc::gen::inRange(0, 4) == 0) call.kwargs.emplace_back("position_ids", GenPositionIds(g));
}

// transformers' well-formed spellings: through the layer with or without
// the tower's precomputed max, and the attention interface called as the
// layer calls it, its max as an int or (not for FlashAttention 4's DSL) a
// host tensor the op converts, its scaling None (the kernel's own default,
// the same value).
std::vector<CallForm> TransformersWellFormedForms(const Case& c) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  std::vector<CallForm> forms;
  auto add = [&](std::string label, bool prepared, Entry entry, auto&& edit) {
    Case form = c;
    SetCorrectCall(&form, profile, prepared, entry);
    edit(&form.call);
    forms.push_back({std::move(label), form.call});
  };
  auto as_is = [](CallSpec*) {};
  add("through the layer", /*prepared=*/false, Entry::kLayer, as_is);
  add("through the layer with the tower's max_seqlen", true, Entry::kLayer, as_is);
  add("through the tower", false, Entry::kTower, as_is);
  add("through the tower with a precomputed max_seqlen", true, Entry::kTower, as_is);
  add("through a tower with windows, one per frame", false, Entry::kTower, [](CallSpec* call) {
    if (call->entry != Entry::kTower) return;
    for (const auto& [key, value] : call->kwargs) {
      if (key == "grid_thw") call->windows = OneWindowPerFrame(value);
    }
  });
  if (!IsTransformersFlash(profile)) return forms;
  add("the attention interface", false, Entry::kDirect, as_is);
  add("the attention interface, scaling None", false, Entry::kDirect,
      [](CallSpec* call) { SetKwarg(call, "scaling", ArgLiteral::None()); });
  if (profile != Profile::kTfFlashAttention4) {
    add("the attention interface, max_length_q/k as host int64 tensors", false, Entry::kDirect,
        [&](CallSpec* call) {
          for (const char* key : {"max_length_q", "max_length_k"}) {
            SetKwarg(call, key,
                     ArgLiteral::IntScalarTensor(g.longest(), DType::kInt64, Device::kCpu));
          }
        });
  }
  return forms;
}

// The layer's cu_seqlens; the interface's cu_seq_lens_q/k where the call
// passes them (SDPA's and eager's ignore them).
void SetTransformersOffsets(CallSpec* call, const std::vector<int64_t>& offsets) {
  const ArgLiteral value = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  if (call->entry == Entry::kTower) {  // the tower's precomputed cu_seqlens (5.x)
    SetKwarg(call, "cu_seqlens", value);
    return;
  }
  if (call->entry != Entry::kDirect) {
    call->cu_seqlens = value;
    return;
  }
  for (const char* key : {"cu_seq_lens_q", "cu_seq_lens_k"}) {
    if (std::any_of(call->kwargs.begin(), call->kwargs.end(),
                    [&](const auto& kv) { return kv.first == key; })) {
      SetKwarg(call, key, value);
    }
  }
}

// The flash path's max and its dense fallback; the split path ignores
// max_seqlen, so the offsets are its one input.
void AddTransformersCorruptions(const Case& c, const AddCorruption& add) {
  const int64_t longest = c.geometry.longest();
  if (!IsTransformersFlash(c.call.profile) || longest == 0) return;
  add("the tower's max_seqlen one below the longest sequence", true, [longest](CallSpec* call) {
    if (call->entry != Entry::kDirect) {
      SetKwarg(call, "max_seqlen", ArgLiteral::Int(longest - 1));
    } else {
      SetKwarg(call, "max_length_q", ArgLiteral::Int(longest - 1));
      SetKwarg(call, "max_length_k", ArgLiteral::Int(longest - 1));
    }
  });
  // A call short of one of the four varlen keywords attends across the
  // whole pack.
  add("one varlen keyword None (the dense fallback over the whole pack)", true, [](CallSpec* call) {
    if (call->entry == Entry::kTower) {
      SetKwarg(call, "grid_thw", ArgLiteral::None());
    } else if (call->entry == Entry::kLayer) {
      call->cu_seqlens = ArgLiteral::None();
    } else {
      SetKwarg(call, "max_length_k", ArgLiteral::None());
    }
  });
}

}  // namespace

bool IsTransformersFlash(Profile profile) {
  return EngineOf(profile) == Engine::kTransformers &&
         ProfileName(profile).find("flash") != absl::string_view::npos;
}

const EngineGenerators& TransformersGenerators() {
  static const EngineGenerators kGenerators = {.make_wild_call = &MakeTransformersCall,
                                               .well_formed_forms = &TransformersWellFormedForms,
                                               .set_offsets = &SetTransformersOffsets,
                                               .add_corruptions = &AddTransformersCorruptions};
  return kGenerators;
}

}  // namespace varlen::internal
