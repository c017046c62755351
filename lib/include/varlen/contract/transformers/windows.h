// File: varlen/contract/transformers/windows.h
// -----------------------------------------------------------------------------
//
// Qwen2.5-VL's attention windows: how a vision tower with windows
// (TowerWindows, call.h) cuts the frames of its grid_thw into the segments
// its window blocks attend within, as transformers'
// get_vision_window_index does in every modelled band. The tower entry
// resolves with it; generators use it to write a geometry as the windows
// a grid makes.

#ifndef VARLEN_CONTRACT_TRANSFORMERS_WINDOWS_H_
#define VARLEN_CONTRACT_TRANSFORMERS_WINDOWS_H_

#include <cstdint>
#include <vector>

#include "varlen/contract/call.h"

namespace varlen {

struct WindowLayout {
  // cu_window_seqlens in tokens, as the tower lists them before
  // torch.unique_consecutive: the empty windows of the padding included.
  std::vector<int64_t> offsets;
  // window_index: the merged cells in window order.
  std::vector<int64_t> index;

  // The lengths of the non-empty windows, in order.
  std::vector<int64_t> lengths() const;
};

// Per frame, the grid of merged cells (spatial_merge_size² patches each)
// padded and cut into windows of cells_per_side() cells a side, row by row;
// a side that divides evenly gains a row or column of empty windows.
// REQUIRES: `sizes` holds t, h, w per image, each at least 1, h and w
// multiples of config.spatial_merge_size.
WindowLayout WindowLayoutOf(const std::vector<int64_t>& sizes, const TowerWindows& config);

}  // namespace varlen

#endif  // VARLEN_CONTRACT_TRANSFORMERS_WINDOWS_H_
