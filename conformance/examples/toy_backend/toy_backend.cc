// A small, correct attention backend written the way a backend author
// would: it implements varlen::Backend, declares what it supports, and
// gets the whole conformance suite (corpus replay and generated properties)
// from one line at the bottom: a conformance binary of its own, or, built
// with TOY_BACKEND_AS_PLUGIN, a plugin that `varlen check --load=` runs.
//
// The kernel: for each sequence and query head, float32 logits, the row
// maximum subtracted before exp, float32 sums, the output rounded once to
// the input dtype. Dense inputs only, so it declares no strided support.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "varlen/backend/backend.h"
#ifdef TOY_BACKEND_AS_PLUGIN
#include "varlen/backend/plugin.h"
#else
#include "varlen/conformance/suite.h"
#endif

namespace {

using varlen::DType;

float Load(const void* base, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return static_cast<float>(varlen::Float16BitsToDouble(static_cast<const uint16_t*>(base)[i]));
    case DType::kBFloat16:
      return static_cast<float>(
          varlen::BFloat16BitsToDouble(static_cast<const uint16_t*>(base)[i]));
    default:
      return static_cast<const float*>(base)[i];
  }
}

void Store(void* base, int64_t i, DType dtype, float value) {
  switch (dtype) {
    case DType::kFloat16:
      static_cast<uint16_t*>(base)[i] = varlen::DoubleToFloat16Bits(value);
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = varlen::DoubleToBFloat16Bits(value);
      break;
    default:
      static_cast<float*>(base)[i] = value;
  }
}

class ToyBackend final : public varlen::Backend {
 public:
  absl::string_view name() const override { return "toy"; }
  absl::string_view description() const override {
    return "an example out-of-tree backend: float32 softmax attention, dense inputs";
  }
  varlen::BackendCapabilities capabilities() const override {
    return {.input_dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16},
            .max_head_dim = 256,
            .grouped_query_attention = true,
            .distinct_value_head_dim = true,
            .device = "cpu"};
  }

  absl::Status Run(const varlen::VarlenAttentionParams& p) const override {
    std::vector<float> logits;
    std::vector<float> row(static_cast<size_t>(p.head_dim_v));
    for (int b = 0; b < p.batch; ++b) {
      const varlen::SequenceView s = varlen::SequenceAt(p, b);  // the offset math, done once
      logits.resize(static_cast<size_t>(s.keys));
      for (int h = 0; h < p.num_heads_q; ++h) {
        const int kv = varlen::KvHeadFor(p, h);
        for (int64_t i = 0; i < s.rows; ++i) {
          const int64_t q_row = s.q_offset + i * p.q_token_stride + h * p.q_head_stride;
          float max_logit = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < s.keys; ++j) {
            const int64_t k_row = s.k_offset + j * p.k_token_stride + kv * p.k_head_stride;
            float dot = 0.0f;
            for (int d = 0; d < p.head_dim_qk; ++d) {
              dot += Load(p.q, q_row + d, p.input_dtype) * Load(p.k, k_row + d, p.input_dtype);
            }
            logits[j] = dot * static_cast<float>(p.softmax_scale);
            max_logit = std::max(max_logit, logits[j]);
          }
          float sum = 0.0f;
          std::fill(row.begin(), row.end(), 0.0f);
          for (int64_t j = 0; j < s.keys; ++j) {
            const float weight = std::exp(logits[j] - max_logit);
            sum += weight;
            const int64_t v_row = s.v_offset + j * p.v_token_stride + kv * p.v_head_stride;
            for (int d = 0; d < p.head_dim_v; ++d)
              row[d] += weight * Load(p.v, v_row + d, p.input_dtype);
          }
          const int64_t o_row = s.o_offset + i * p.o_token_stride + h * p.o_head_stride;
          for (int d = 0; d < p.head_dim_v; ++d) {
            Store(p.o, o_row + d, p.output_dtype, s.keys == 0 ? 0.0f : row[d] / sum);
          }
        }
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

#ifdef TOY_BACKEND_AS_PLUGIN
VARLEN_BACKEND_PLUGIN(ToyBackend)
#else
VARLEN_CONFORMANCE_MAIN(ToyBackend)
#endif
