// transformers' third entry, "tower": the vision tower's
// forward(hidden_states, grid_thw, **kwargs) (Qwen2-VL, Qwen2.5-VL's full
// attention blocks, Qwen3-VL, GLM-4V: one segment per frame) up to its
// first block's VisionAttention (docs/contract-transformers.md, H1, H2):
//
//   4.57.6  cu_seqlens computed inline from grid_thw; the tower's **kwargs
//           reach every block beside its own cu_seqlens
//   5.14.1  get_vision_cu_seqlens(grid_thw, kwargs=kwargs): a caller's
//           cu_seqlens is popped and used as it is
//   5.25.0  get_vision_attention_seqlens(grid_thw, config, kwargs=kwargs):
//           the same, then get_max_seqlen: a caller's max_seqlen, else one
//           .item() for a flash name, else None; every block receives both
//
// A tower with windows (call.tower_windows; Qwen2.5-VL, whose first block
// attends within windows) makes those as well, and its first block takes
// them in place of the frames:
//
//   4.57.6  self.get_window_index(grid_thw) on a host grid (a device grid's
//           0-d reads are not modelled), torch.tensor(..., device=
//           hidden_states.device), torch.unique_consecutive
//   5.x     get_vision_window_index(grid_thw, ..., kwargs=kwargs): a
//           caller's window_index and cu_window_seqlens when both are given
//           (both popped either way), else grid_thw.tolist(), the offsets
//           on grid_thw's device, torch.unique_consecutive; 5.25.0 then
//           get_max_seqlen(cu_window_seqlens, kwarg_name="max_window_seqlen")
//
// The tower's other reads of grid_thw (position ids, rotary and position
// embeddings) are not attention's: not modelled, and their host syncs not
// counted.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_ops.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/contract/transformers/windows.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// A grid of more frames than this is not materialized (no real tower makes
// one; torch would allocate them all).
constexpr int64_t kMaxFrames = int64_t{1} << 16;

// The keywords the tower passes every block itself: a caller's **kwargs
// holding one is Python's "got multiple values", whose message quotes the
// block's repr (its submodules and sizes), which no case can spell.
absl::Status CheckNoDuplicateBlockKeyword(const ResolveContext& ctx, const Kwargs& rest) {
  for (absl::string_view key : {"cu_seqlens", "position_embeddings"}) {
    if (!rest.contains(key)) continue;
    if (ctx.hardened()) {
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat(key, " is passed to the vision tower, which passes its own ",
                                      key, " to every block"));
    }
    return absl::UnimplementedError(
        absl::StrCat("transformers: ", key,
                     " in the tower's **kwargs beside the tower's own: Python's "
                     "TypeError \"<block> got multiple values for keyword argument '",
                     key, "'\" quotes the block's repr (not modelled)"));
  }
  return absl::OkStatus();
}

// Element [row, col] of a 2-d tensor, read as the device reads it.
int64_t GridAt(const Tensor& grid, int64_t row, int64_t col) {
  return grid.IntAtLogical(row * grid.size(1) + col);
}

// h * w in the grid's dtype (an int16 or int32 product wraps).
int64_t FrameTokens(DType dtype, int64_t h, int64_t w) {
  const int64_t product = static_cast<int64_t>(static_cast<uint64_t>(h) * static_cast<uint64_t>(w));
  if (dtype == DType::kInt16) return WrapInt16(product);
  if (dtype == DType::kInt32) return WrapInt32(product);
  return product;
}

// Whether `grid` is a grid the tower's steps before its cu_seqlens accept:
// an integer [images, 3] tensor of positive sizes. Anything else meets
// those steps first (position ids, rotary and position embeddings, read on
// the host from grid_thw.tolist() with model-specific errors), which are
// not attention's and not modelled.
absl::Status CheckGridReachesSeqlens(const Value& grid) {
  const auto earlier = [&](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat("transformers: grid_thw ", what,
                     ": the tower's position ids and embeddings read it before its cu_seqlens (not "
                     "modelled)"));
  };
  if (!grid.is_tensor() || !grid.as_tensor().has_storage()) return earlier("is not a tensor");
  const Tensor& t = grid.as_tensor();
  if (!IsIntegral(t.dtype()) || t.dim() != 2 || t.size(1) != 3) {
    return earlier("is not an integer tensor of shape [images, 3]");
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.IntAtLogical(i) < 1) return earlier("holds a size below 1");
  }
  if (t.device() == Device::kCuda && t.dtype() == DType::kInt16) {
    return absl::UnimplementedError(
        "transformers: an int16 grid_thw on the device (the dtypes of repeat_interleave's CUDA "
        "kernel are not modelled)");
  }
  return absl::OkStatus();
}

// F.pad(torch.repeat_interleave(grid_thw[:, 1] * grid_thw[:, 2],
// grid_thw[:, 0]).cumsum(dim=0, dtype=torch.int32), (1, 0), value=0): one
// segment per frame, on grid_thw's device. repeat_interleave without an
// output_size reads its repeats on the host twice (ATen's
// repeat_interleave_common: cumsum[-1].item(), then its negative check's
// (repeats >= 0).all().item()) unless there are none.
absl::StatusOr<Value> FrameOffsets(const Value& grid_value) {
  VARLEN_RETURN_IF_ERROR(CheckGridReachesSeqlens(grid_value));
  const Tensor& grid = grid_value.as_tensor();
  const int64_t images = grid.size(0);
  if (images > 0 && grid.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostSync, "torch.repeat_interleave: cumsum[-1].item()");
    RecordDeviceEvent(DeviceEventKind::kHostSync,
                      "torch.repeat_interleave: (repeats >= 0).all().item()");
  }
  int64_t frames = 0;
  for (int64_t i = 0; i < images; ++i) {
    if (GridAt(grid, i, 0) > kMaxFrames - frames) {
      return absl::UnimplementedError(absl::StrCat("transformers: a grid_thw of more than ",
                                                   kMaxFrames, " frames is not materialized"));
    }
    frames += GridAt(grid, i, 0);
  }
  std::vector<int64_t> offsets = {0};
  int32_t running = 0;  // cumsum(dtype=torch.int32) wraps
  for (int64_t i = 0; i < images; ++i) {
    const int64_t tokens = FrameTokens(grid.dtype(), GridAt(grid, i, 1), GridAt(grid, i, 2));
    for (int64_t f = 0; f < GridAt(grid, i, 0); ++f) {
      running = WrapInt32(int64_t{running} + WrapInt32(tokens));
      offsets.push_back(running);
    }
  }
  return Value::FromTensor(Tensor::FromInts(offsets, DType::kInt32, grid.device()));
}

// torch.unique_consecutive of non-decreasing offsets: the empty windows go.
std::vector<int64_t> UniqueConsecutive(std::vector<int64_t> values) {
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// Faithful: the grid's sizes when the tower's permutation into windows
// (hidden_states[window_index] after a reshape into merged cells) holds q's
// tokens; anything else fails in the tower before attention, with torch's
// messages about shapes that are not modelled.
absl::StatusOr<std::vector<int64_t>> SizesForWindows(const Value& grid, const TowerWindows& config,
                                                     int64_t tokens) {
  VARLEN_RETURN_IF_ERROR(CheckGridReachesSeqlens(grid));
  const Tensor& t = grid.as_tensor();
  std::vector<int64_t> sizes;
  int64_t patches = 0;
  for (int64_t i = 0; i < t.size(0); ++i) {
    const int64_t frames = GridAt(t, i, 0), h = GridAt(t, i, 1), w = GridAt(t, i, 2);
    if (h % config.spatial_merge_size != 0 || w % config.spatial_merge_size != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "transformers: grid_thw row ", i, " (", frames, ", ", h, ", ", w,
          ") is not whole merged cells of spatial_merge_size ", config.spatial_merge_size,
          ": the tower's patch merge fails first (not modelled)"));
    }
    if (h > tokens / w || frames > tokens / (h * w) || frames * h * w > tokens - patches) {
      patches = tokens + 1;
      break;
    }
    patches += frames * h * w;
    sizes.insert(sizes.end(), {frames, h, w});
  }
  if (patches != tokens) {
    return absl::UnimplementedError(absl::StrCat(
        "transformers: grid_thw's patches are not q's ", tokens,
        " tokens: the tower's permutation into windows fails before attention (not modelled)"));
  }
  return sizes;
}

// A caller's window_index as the tower indexes the hidden states with it,
// reshaped into merged cells of `unit` tokens: an integer vector of one
// entry per cell, each a cell. Anything else fails in the tower before
// attention.
absl::Status CheckWindowIndexIndexes(const Value& index, int64_t tokens, int64_t unit) {
  const int64_t cells = tokens / unit;
  if (tokens % unit == 0 && index.is_tensor() && index.as_tensor().has_storage() &&
      index.as_tensor().dim() == 1 && IsIntegral(index.as_tensor().dtype()) &&
      index.as_tensor().numel() == cells) {
    const Tensor& t = index.as_tensor();
    bool in_range = true;
    for (int64_t i = 0; i < t.numel() && in_range; ++i) {
      in_range = t.IntAtLogical(i) >= 0 && t.IntAtLogical(i) < cells;
    }
    if (in_range) return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat("transformers: window_index is not an index of q's ", tokens,
                   " tokens as merged cells of ", unit,
                   ": the tower's hidden_states[window_index] fails before attention (not "
                   "modelled)"));
}

// The offsets a tower with windows hands its first block, faithfully.
// `rest` is the tower's **kwargs; 5.x pops window_index and
// cu_window_seqlens from it.
absl::StatusOr<Value> WindowOffsets(const ResolveContext& ctx, const TransformersBehavior& band,
                                    const TowerWindows& config, const Value& grid, Kwargs* rest) {
  const int64_t tokens = ctx.call.q.size(0);
  if (band.tower_windows_from_vision_utils) {
    const Value index = rest->get("window_index"), given = rest->get("cu_window_seqlens");
    rest->erase("window_index");
    rest->erase("cu_window_seqlens");
    if (!index.is_none() && !given.is_none()) {
      VARLEN_RETURN_IF_ERROR(CheckWindowIndexIndexes(index, tokens, config.merge_unit()));
      ctx.Note("tower: the caller's window_index and cu_window_seqlens, used as they are");
      return given;
    }
  }
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, SizesForWindows(grid, config, tokens));
  const bool device_grid = grid.as_tensor().device() == Device::kCuda;
  Device device = grid.as_tensor().device();
  if (!band.tower_windows_from_vision_utils) {
    if (device_grid) {
      return absl::UnimplementedError(
          "transformers 4.57.6: get_window_index iterates a device grid_thw as 0-d tensors, "
          "whose host reads in torch.arange, F.pad, reshape and .item() are not modelled");
    }
    device = ctx.call.q.device();  // hidden_states.device
  } else if (device_grid) {
    RecordDeviceEvent(DeviceEventKind::kHostSync, "get_vision_window_index: grid_thw.tolist()");
  }
  const std::vector<int64_t> offsets = UniqueConsecutive(WindowLayoutOf(sizes, config).offsets);
  if (device == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy,
                      "torch.tensor(cu_window_seqlens, device=...)");
    // ATen's CUDA unique_consecutive reads its output's length on the host.
    RecordDeviceEvent(DeviceEventKind::kHostSync, "torch.unique_consecutive: the length .item()");
  }
  ctx.Note(absl::StrCat("tower: cu_window_seqlens from grid_thw, ", offsets.size() - 1,
                        " non-empty windows of ", config.cells_per_side(), " x ",
                        config.cells_per_side(), " merged cells (int32, on ", DeviceName(device),
                        ")"));
  return Value::FromTensor(Tensor::FromInts(offsets, DType::kInt32, device));
}

// Hardened: grid_thw is an integer [N, 3] tensor of positive sizes whose
// patches are q's tokens, read once on the host. Returns its sizes.
absl::StatusOr<std::vector<int64_t>> HardenedGridSizes(const ResolveContext& ctx,
                                                       const Value& grid_value,
                                                       const std::optional<TowerWindows>& windows) {
  const auto refuse = [&](absl::string_view rule) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("grid_thw is ", grid_value.Repr(), ": ", rule));
  };
  if (!grid_value.is_tensor() || !IsIntegral(grid_value.as_tensor().dtype()) ||
      grid_value.as_tensor().dim() != 2 || grid_value.as_tensor().size(1) != 3 ||
      !grid_value.as_tensor().has_storage()) {
    return refuse("the tower takes an integer tensor of shape [images, 3] (t, h, w per image)");
  }
  const std::vector<int64_t> sizes = grid_value.as_tensor().ToHostInts("grid_thw.tolist()");
  const int64_t tokens = ctx.call.q.size(0);
  int64_t patches = 0;
  for (size_t i = 0; i < sizes.size(); i += 3) {
    const int64_t t = sizes[i], h = sizes[i + 1], w = sizes[i + 2];
    if (t < 1 || h < 1 || w < 1) {
      return refuse(absl::StrCat("image ", i / 3, " has t, h, w = ", t, ", ", h, ", ", w,
                                 "; each must be at least 1"));
    }
    if (windows.has_value() &&
        (h % windows->spatial_merge_size != 0 || w % windows->spatial_merge_size != 0)) {
      return refuse(absl::StrCat("image ", i / 3, " has h, w = ", h, ", ", w,
                                 "; each must be a multiple of spatial_merge_size ",
                                 windows->spatial_merge_size));
    }
    if (h > tokens / w || t > tokens / (h * w) || t * h * w > tokens - patches) {
      return refuse(absl::StrCat("its frames hold more than the ", tokens, " tokens of q"));
    }
    patches += t * h * w;
  }
  if (patches != tokens) {
    return refuse(absl::StrCat("its frames hold ", patches, " tokens, q holds ", tokens));
  }
  return sizes;
}

// Hardened: the offsets `what` of the grid's `whose` ("frames", "windows"),
// made on q's device, or a caller's `precomputed` ones when they are the same.
absl::StatusOr<Value> HardenedOffsets(const ResolveContext& ctx,
                                      const std::vector<int64_t>& offsets, absl::string_view what,
                                      absl::string_view whose, const Value& precomputed) {
  if (precomputed.is_none()) {
    const Device device = ctx.call.q.device();
    if (device == Device::kCuda) {
      RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy,
                        absl::StrCat("torch.tensor(", what, ", device=q.device)"));
    }
    return Value::FromTensor(Tensor::FromInts(offsets, DType::kInt32, device));
  }
  if (!precomputed.is_tensor()) return precomputed;  // the layer names it
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> given,
                          CheckTokenOffsets(precomputed.as_tensor(), what, std::nullopt));
  if (given != offsets) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat(what, " is [", absl::StrJoin(given, ", "), "], grid_thw's ",
                                    whose, " are [", absl::StrJoin(offsets, ", "),
                                    "]: a precomputed ", what, " must be the tower's own"));
  }
  return precomputed;
}

// The frames' offsets of checked grid sizes.
std::vector<int64_t> FrameOffsetsOf(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> offsets = {0};
  for (size_t i = 0; i < sizes.size(); i += 3) {
    for (int64_t f = 0; f < sizes[i]; ++f) {
      offsets.push_back(offsets.back() + sizes[i + 1] * sizes[i + 2]);
    }
  }
  return offsets;
}

// Hardened windows: a caller's window_index and cu_window_seqlens together
// or not at all, each the grid's own.
absl::StatusOr<Value> HardenedWindowOffsets(const ResolveContext& ctx,
                                            const std::vector<int64_t>& sizes,
                                            const TowerWindows& config, const Value& index,
                                            const Value& given) {
  if (index.is_none() != given.is_none()) {
    const absl::string_view present = index.is_none() ? "cu_window_seqlens" : "window_index";
    const absl::string_view missing = index.is_none() ? "window_index" : "cu_window_seqlens";
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat(present, " is given without ", missing,
                                    ": the tower takes the two together or recomputes both, "
                                    "dropping the one given"));
  }
  const WindowLayout windows = WindowLayoutOf(sizes, config);
  if (!index.is_none()) {
    const bool index_ok = index.is_tensor() && index.as_tensor().has_storage() &&
                          IsIntegral(index.as_tensor().dtype()) && index.as_tensor().dim() == 1 &&
                          index.as_tensor().ToHostInts("window_index.tolist()") == windows.index;
    if (!index_ok) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat("window_index is ", index.Repr(),
                                      ": a precomputed window_index must be the tower's own (",
                                      windows.index.size(), " merged cells in window order)"));
    }
  }
  return HardenedOffsets(ctx, UniqueConsecutive(windows.offsets), "cu_window_seqlens", "windows",
                         given);
}

}  // namespace

absl::StatusOr<AttentionCall> TowerLayerCall(const AttentionCall& call, Profile profile, Mode mode,
                                             std::vector<std::string>* notes) {
  const ResolveContext ctx{call, LookedUpKwargs(call.kwargs), mode,
                           BehaviorOf(kLatestSglangVersion), notes};
  const TransformersBehavior& band = TransformersBehaviorOf(ctx);
  const std::optional<TowerWindows>& windows = call.tower_windows;
  const Value grid = ctx.kwargs.get("grid_thw");
  Kwargs rest;  // the tower's **kwargs after what its helpers pop
  for (const auto& [key, value] : call.kwargs.items()) {
    if (key != "grid_thw") rest.set(key, value);
  }
  const auto pop = [&rest](absl::string_view key) {
    Value value = rest.get(key);
    rest.erase(key);
    return value;
  };
  if (ctx.hardened()) {
    VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes,
                            HardenedGridSizes(ctx, grid, windows));
    VARLEN_ASSIGN_OR_RETURN(Value cu, HardenedOffsets(ctx, FrameOffsetsOf(sizes), "cu_seqlens",
                                                      "frames", pop("cu_seqlens")));
    if (windows.has_value()) {
      // The frames are the full-attention blocks'; this block takes the
      // windows and their max.
      const Value index = pop("window_index"), given = pop("cu_window_seqlens");
      VARLEN_ASSIGN_OR_RETURN(cu, HardenedWindowOffsets(ctx, sizes, *windows, index, given));
      rest.erase("max_seqlen");
      if (Value max = pop("max_window_seqlen"); !max.is_none()) rest.set("max_seqlen", max);
    }
    VARLEN_RETURN_IF_ERROR(CheckNoDuplicateBlockKeyword(ctx, rest));
    AttentionCall layer = call;
    layer.entry = Entry::kLayer;
    layer.cu_seqlens = cu;
    layer.kwargs = rest;
    return layer;
  }

  Value cu;
  if (band.tower_takes_precomputed_cu_seqlens) cu = pop("cu_seqlens");
  if (cu.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(cu, FrameOffsets(grid));
    ctx.Note(
        "tower: cu_seqlens from grid_thw, one segment per frame (int32, on grid_thw's device)");
  } else {
    ctx.Note("tower: the caller's cu_seqlens, used as it is");
  }
  // get_max_seqlen(cu, config, kwargs, kwarg_name): the caller's wins, else
  // one .item() where the implementation's name holds "flash".
  const auto tower_max = [&](const Value& offsets, absl::string_view key) -> absl::StatusOr<Value> {
    Value max = pop(key);
    if (max.is_none() && IsFlashName(profile)) {
      const ResolveContext tower{call, LookedUpKwargs(Kwargs{}), mode, ctx.sglang, notes};
      VARLEN_ASSIGN_OR_RETURN(max, LayerMaxSeqlen(tower, offsets));
    }
    return max;
  };
  Value max;
  if (band.caller_max_wins) {
    VARLEN_ASSIGN_OR_RETURN(max, tower_max(cu, "max_seqlen"));
  }
  if (windows.has_value()) {
    // The first block is a window block: the frames and their max go to the
    // full-attention blocks.
    VARLEN_ASSIGN_OR_RETURN(cu, WindowOffsets(ctx, band, *windows, grid, &rest));
    if (band.caller_max_wins) {
      VARLEN_ASSIGN_OR_RETURN(max, tower_max(cu, "max_window_seqlen"));
    }
  }
  if (band.caller_max_wins) rest.set("max_seqlen", max);  // every block's max_seqlen=...
  VARLEN_RETURN_IF_ERROR(CheckNoDuplicateBlockKeyword(ctx, rest));
  AttentionCall layer = call;
  layer.entry = Entry::kLayer;
  layer.cu_seqlens = cu;
  layer.kwargs = rest;
  return layer;
}

}  // namespace varlen::internal

namespace varlen {

WindowLayout WindowLayoutOf(const std::vector<int64_t>& sizes, const TowerWindows& config) {
  const int64_t side = config.cells_per_side(), merge = config.spatial_merge_size;
  WindowLayout layout;
  layout.offsets = {0};
  int64_t first_cell = 0;
  for (size_t i = 0; i + 2 < sizes.size(); i += 3) {
    const int64_t t = sizes[i], rows = sizes[i + 1] / merge, cols = sizes[i + 2] / merge;
    const int64_t windows_h = rows / side + 1, windows_w = cols / side + 1;  // padded
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t wh = 0; wh < windows_h; ++wh) {
        for (int64_t ww = 0; ww < windows_w; ++ww) {
          int64_t cells = 0;
          for (int64_t r = wh * side; r < std::min(rows, (wh + 1) * side); ++r) {
            for (int64_t c = ww * side; c < std::min(cols, (ww + 1) * side); ++c) {
              layout.index.push_back(first_cell + (f * rows + r) * cols + c);
              ++cells;
            }
          }
          layout.offsets.push_back(layout.offsets.back() + cells * config.merge_unit());
        }
      }
    }
    first_cell += t * rows * cols;
  }
  return layout;
}

std::vector<int64_t> WindowLayout::lengths() const {
  std::vector<int64_t> out;
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] > offsets[i - 1]) out.push_back(offsets[i] - offsets[i - 1]);
  }
  return out;
}

}  // namespace varlen
