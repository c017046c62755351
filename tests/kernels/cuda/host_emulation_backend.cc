// The CUDA kernel's block program run on the CPU, as a backend checked by
// the whole conformance suite (corpus replay and generated properties).
//
// It plans the launch with PlanForwardLaunch (sm_90 limits), visits the
// grid block by block, and in each block does what flash_forward.cuh does,
// step for step, with the same tile_math.h functions on the same shared-
// memory tiles: tile loads through TileElementSource, S = Q K^T in float32,
// SoftmaxTileRow per row, the accumulator rescaled and P V added (row by
// row over each row's keys where the kernel does: AccumulateAttended), and the
// epilogue through FinalizeOutput. What it cannot stand for is the device's
// own part: the thread and warp mapping, the barriers and the tensor-core
// fragments (whose float32 sums run in another order); a GPU run of the
// cuda backend through the same suite checks those.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "launch_plan.h"
#include "tile_math.h"
#include "varlen/backend/backend.h"
#include "varlen/conformance/suite.h"

namespace varlen::cuda_kernels {
namespace {

template <TileElement E>
void RunBlock(const VarlenAttentionParams& p, const TileShape& t, int64_t block_x, int head,
              int sequence) {
  using S = Storage<E>;
  const int kD = t.head_dim, kRows = t.block_rows, kKeys = t.block_keys;
  const SequenceView view = SequenceAt(p, sequence);
  const int64_t first_row = block_x * kRows;
  if (first_row >= view.rows) return;
  const int64_t rows = std::min<int64_t>(kRows, view.rows - first_row);
  const int kv_head = KvHeadFor(p, head);

  // The block's shared memory.
  std::vector<S> q_tile(static_cast<size_t>(kRows * kD)), k_tile(static_cast<size_t>(kKeys * kD)),
      v_tile(static_cast<size_t>(kKeys * kD)), p_tile(static_cast<size_t>(kRows * kKeys));
  std::vector<float> scores(static_cast<size_t>(kRows * kKeys)),
      acc(static_cast<size_t>(kRows * kD), 0.0f);
  std::vector<RowState> row_state(static_cast<size_t>(kRows), InitialRowState());
  const auto load = [](std::vector<S>& tile, const void* source, const TileSource& from) {
    for (int e = 0; e < static_cast<int>(tile.size()); ++e) {
      const int64_t at = TileElementSource(from, e);
      tile[e] = at < 0 ? S(0) : static_cast<const S*>(source)[at];
    }
  };

  load(q_tile, p.q,
       {view.q_offset + first_row * p.q_token_stride + head * p.q_head_stride, p.q_token_stride,
        rows, p.head_dim_qk, kD});
  const float scale = static_cast<float>(p.softmax_scale);
  for (int64_t first_key = 0; first_key < view.keys; first_key += kKeys) {
    const int valid_keys = static_cast<int>(std::min<int64_t>(kKeys, view.keys - first_key));
    load(k_tile, p.k,
         {view.k_offset + first_key * p.k_token_stride + kv_head * p.k_head_stride,
          p.k_token_stride, valid_keys, p.head_dim_qk, kD});
    load(v_tile, p.v,
         {view.v_offset + first_key * p.v_token_stride + kv_head * p.v_head_stride,
          p.v_token_stride, valid_keys, p.head_dim_v, kD});
    const bool mask_values = HasWindow(p) && std::any_of(v_tile.begin(), v_tile.end(), [](S x) {
                               return !IsFiniteValue(Decode<E>(x));
                             });
    for (int r = 0; r < kRows; ++r) {
      float* row = &scores[static_cast<size_t>(r * kKeys)];
      for (int c = 0; c < kKeys; ++c) {
        float s = 0.0f;
        for (int i = 0; i < kD; ++i)
          s += Decode<E>(q_tile[r * kD + i]) * Decode<E>(k_tile[c * kD + i]);
        row[c] = s;
      }
      float factor = 1.0f;
      TileColumns attended{0, kKeys};
      if (r < rows) {
        const KeyRange keys = KeysOfRow(p, sequence, view, first_row + r);
        attended = AttendedColumns(keys, first_key, valid_keys);
        factor = SoftmaxTileRow<E>(row, attended, kKeys, scale, &row_state[r]);
      } else {
        std::fill_n(row, kKeys, 0.0f);
      }
      if (!mask_values) attended = {0, kKeys};
      for (int c = 0; c < kKeys; ++c) p_tile[r * kKeys + c] = Encode<E>(row[c]);
      for (int j = 0; j < kD; ++j) {
        acc[r * kD + j] =
            AccumulateAttended<E>(&p_tile[static_cast<size_t>(r * kKeys)], v_tile.data(), kD, j,
                                  attended, acc[r * kD + j] * factor);
      }
    }
  }

  S* o = static_cast<S*>(p.o);
  const int64_t o_base = view.o_offset + first_row * p.o_token_stride + head * p.o_head_stride;
  for (int64_t r = 0; r < rows; ++r) {
    const KeyRange keys = KeysOfRow(p, sequence, view, first_row + r);
    for (int j = 0; j < p.head_dim_v; ++j) {
      o[o_base + r * p.o_token_stride + j] = Encode<E>(
          FinalizeOutput(acc[r * kD + j], row_state[r], keys.first < keys.last, SinkOf(p, head)));
    }
  }
}

template <TileElement E>
void RunGrid(const VarlenAttentionParams& p, const LaunchPlan& plan) {
  for (int z = 0; z < plan.sequences; ++z) {
    for (int y = 0; y < plan.heads; ++y) {
      for (int64_t x = 0; x < plan.row_blocks; ++x) RunBlock<E>(p, plan.tile, x, y, z);
    }
  }
}

class CudaHostEmulationBackend final : public Backend {
 public:
  absl::string_view name() const override { return "cuda_host_emulation"; }
  absl::string_view description() const override {
    return "the cuda kernel's block program and tile arithmetic, run on the CPU";
  }
  BackendCapabilities capabilities() const override {
    BackendCapabilities caps = KernelCapabilities();
    caps.device = "cpu";
    // One block after the other on one core, head dims padded to the
    // kernel's buckets (32 and up): long sequences are the device run's; here
    // the suite's long cases are kept to 2,048 tokens.
    caps.max_tokens = 2048;
    return caps;
  }
  absl::Status Supports(const VarlenAttentionParams& params) const override {
    if (absl::Status s = Backend::Supports(params); !s.ok()) return s;
    return PlanForwardLaunch(params, kSm90Limits).status();
  }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    absl::StatusOr<LaunchPlan> plan = PlanForwardLaunch(params, kSm90Limits);
    if (!plan.ok()) return plan.status();
    switch (plan->element) {
      case TileElement::kFloat32:
        RunGrid<TileElement::kFloat32>(params, *plan);
        break;
      case TileElement::kFloat16:
        RunGrid<TileElement::kFloat16>(params, *plan);
        break;
      case TileElement::kBFloat16:
        RunGrid<TileElement::kBFloat16>(params, *plan);
        break;
    }
    return absl::OkStatus();
  }
};

}  // namespace
}  // namespace varlen::cuda_kernels

VARLEN_CONFORMANCE_MAIN(::varlen::cuda_kernels::CudaHostEmulationBackend)
