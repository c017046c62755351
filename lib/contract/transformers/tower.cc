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
// The tower's other reads of grid_thw (position ids, rotary and position
// embeddings, Qwen2.5-VL's windows) are not attention's: not modelled, and
// their host syncs not counted.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_ops.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
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

// Hardened: grid_thw is an integer [N, 3] tensor of positive sizes whose
// frames hold q's tokens, read once on the host; a precomputed cu_seqlens
// must be its frames' offsets. The offsets it makes live where q does
// (wherever the grid was left).
absl::StatusOr<Value> HardenedFrameOffsets(const ResolveContext& ctx, const Value& grid_value,
                                           const Value& precomputed) {
  const auto refuse = [&](absl::string_view rule) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("grid_thw is ", grid_value.Repr(), ": ", rule));
  };
  if (!grid_value.is_tensor() || !IsIntegral(grid_value.as_tensor().dtype()) ||
      grid_value.as_tensor().dim() != 2 || grid_value.as_tensor().size(1) != 3 ||
      !grid_value.as_tensor().has_storage()) {
    return refuse("the tower takes an integer tensor of shape [images, 3] (t, h, w per image)");
  }
  const Tensor& grid = grid_value.as_tensor();
  const std::vector<int64_t> sizes = grid.ToHostInts("grid_thw.tolist()");
  const int64_t tokens = ctx.call.q.size(0);
  std::vector<int64_t> offsets = {0};
  for (size_t i = 0; i < sizes.size(); i += 3) {
    const int64_t t = sizes[i], h = sizes[i + 1], w = sizes[i + 2];
    if (t < 1 || h < 1 || w < 1) {
      return refuse(absl::StrCat("image ", i / 3, " has t, h, w = ", t, ", ", h, ", ", w,
                                 "; each must be at least 1"));
    }
    for (int64_t f = 0; f < t; ++f) {  // every frame holds a token: at most `tokens` steps
      if (h > tokens / w || offsets.back() + h * w > tokens) {
        return refuse(absl::StrCat("its frames hold more than the ", tokens, " tokens of q"));
      }
      offsets.push_back(offsets.back() + h * w);
    }
  }
  if (offsets.back() != tokens) {
    return refuse(absl::StrCat("its frames hold ", offsets.back(), " tokens, q holds ", tokens));
  }
  if (precomputed.is_none()) {
    const Device device = ctx.call.q.device();
    if (device == Device::kCuda) {
      RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy,
                        "torch.tensor(frame offsets, device=q.device)");
    }
    return Value::FromTensor(Tensor::FromInts(offsets, DType::kInt32, device));
  }
  if (!precomputed.is_tensor()) return precomputed;  // the layer names it
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> given,
                          CheckTokenOffsets(precomputed.as_tensor(), "cu_seqlens", std::nullopt));
  if (given != offsets) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("cu_seqlens is [", absl::StrJoin(given, ", "),
                                    "], grid_thw's frames are [", absl::StrJoin(offsets, ", "),
                                    "]: a precomputed cu_seqlens must be the tower's own"));
  }
  return precomputed;
}

}  // namespace

absl::StatusOr<AttentionCall> TowerLayerCall(const AttentionCall& call, Profile profile, Mode mode,
                                             std::vector<std::string>* notes) {
  const ResolveContext ctx{call, LookedUpKwargs(call.kwargs), mode,
                           BehaviorOf(kLatestSglangVersion), notes};
  const TransformersBehavior& band = TransformersBehaviorOf(ctx);
  const Value grid = ctx.kwargs.get("grid_thw");
  Kwargs rest;  // the tower's **kwargs after what its helpers pop
  for (const auto& [key, value] : call.kwargs.items()) {
    if (key != "grid_thw") rest.set(key, value);
  }
  Value cu;
  if (ctx.hardened() || band.tower_takes_precomputed_cu_seqlens) {
    cu = rest.get("cu_seqlens");
    rest.erase("cu_seqlens");
  }
  if (ctx.hardened()) {
    VARLEN_ASSIGN_OR_RETURN(cu, HardenedFrameOffsets(ctx, grid, cu));
  } else if (cu.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(cu, FrameOffsets(grid));
    ctx.Note(
        "tower: cu_seqlens from grid_thw, one segment per frame (int32, on grid_thw's device)");
  } else {
    ctx.Note("tower: the caller's cu_seqlens, used as it is");
  }
  if (!ctx.hardened() && band.caller_max_wins) {
    // get_max_seqlen(cu_seqlens, config, kwargs): the caller's wins, else
    // one .item() where the implementation's name holds "flash".
    Value max = rest.get("max_seqlen");
    rest.erase("max_seqlen");
    if (max.is_none() && IsFlashName(profile)) {
      const ResolveContext tower{call, LookedUpKwargs(Kwargs{}), mode, ctx.sglang, notes};
      VARLEN_ASSIGN_OR_RETURN(max, LayerMaxSeqlen(tower, cu));
    }
    rest.set("max_seqlen", max);  // every block's max_seqlen=max_seqlen
  }
  VARLEN_RETURN_IF_ERROR(CheckNoDuplicateBlockKeyword(ctx, rest));
  AttentionCall layer = call;
  layer.entry = Entry::kLayer;
  layer.cu_seqlens = cu;
  layer.kwargs = rest;
  return layer;
}

}  // namespace varlen::internal
