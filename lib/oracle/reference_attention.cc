#include "varlen/oracle/reference_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "varlen/backend/elements.h"

namespace varlen {
namespace {

using kernels::LoadAsDouble;
using kernels::StoreFromDouble;

// One (sequence, head) block. Acc is the accumulation type; when
// `round_probabilities` is set, softmax probabilities are rounded to the
// input dtype before they multiply v, as a low-precision kernel does.
template <typename In, typename Out, typename Acc>
void AttendHead(const VarlenAttentionParams& p, int b, const SequenceView& s, int head,
                bool round_probabilities) {
  const int kv_head = KvHeadFor(p, head);
  const int64_t q_base = s.q_offset + head * p.q_head_stride;
  const int64_t k_base = s.k_offset + kv_head * p.k_head_stride;
  const int64_t v_base = s.v_offset + kv_head * p.v_head_stride;
  const int64_t o_base = s.o_offset + head * p.o_head_stride;
  const Acc scale = static_cast<Acc>(p.softmax_scale);

  std::vector<Acc> scores(static_cast<size_t>(s.keys));
  std::vector<Acc> row(static_cast<size_t>(p.head_dim_v));
  for (int64_t i = 0; i < s.rows; ++i) {
    const int64_t q_row = q_base + i * p.q_token_stride;
    const KeyRange keys = KeysOfRow(p, b, s, i);
    Acc max_score = -std::numeric_limits<Acc>::infinity();
    if (p.sinks != nullptr) max_score = static_cast<Acc>(p.sinks[head]);
    for (int64_t j = keys.first; j < keys.last; ++j) {
      const int64_t k_row = k_base + j * p.k_token_stride;
      Acc dot = 0;
      for (int d = 0; d < p.head_dim_qk; ++d) {
        dot += static_cast<Acc>(LoadAsDouble<In>(p.q, q_row + d)) *
               static_cast<Acc>(LoadAsDouble<In>(p.k, k_row + d));
      }
      scores[j] = dot * scale;
      max_score = std::max(max_score, scores[j]);
    }
    Acc denominator = 0;
    for (int64_t j = keys.first; j < keys.last; ++j) {
      scores[j] = std::exp(scores[j] - max_score);
      denominator += scores[j];
    }
    if (p.sinks != nullptr) denominator += std::exp(static_cast<Acc>(p.sinks[head]) - max_score);
    std::fill(row.begin(), row.end(), Acc{0});
    for (int64_t j = keys.first; j < keys.last; ++j) {
      const Acc weight = round_probabilities
                             ? static_cast<Acc>(RoundToDType(scores[j], p.input_dtype))
                             : scores[j];
      const int64_t v_row = v_base + j * p.v_token_stride;
      for (int d = 0; d < p.head_dim_v; ++d) {
        row[d] += weight * static_cast<Acc>(LoadAsDouble<In>(p.v, v_row + d));
      }
    }
    const int64_t o_row = o_base + i * p.o_token_stride;
    for (int d = 0; d < p.head_dim_v; ++d) {
      const double value =
          keys.first >= keys.last ? 0.0 : static_cast<double>(row[d] / denominator);
      StoreFromDouble<Out>(p.o, o_row + d, value);
    }
  }
}

template <typename In, typename Out, typename Acc>
void AttendAll(const VarlenAttentionParams& p, bool round_probabilities) {
  for (int b = 0; b < p.batch; ++b) {
    const SequenceView s = SequenceAt(p, b);
    for (int h = 0; h < p.num_heads_q; ++h) {
      AttendHead<In, Out, Acc>(p, b, s, h, round_probabilities);
    }
  }
}

}  // namespace

void ReferenceAttention(const VarlenAttentionParams& params, ReferencePrecision precision) {
  VARLEN_DISPATCH_FLOAT_TYPES(params.input_dtype, In, [&] {
    VARLEN_DISPATCH_FLOAT_TYPES(params.output_dtype, Out, [&] {
      if (precision == ReferencePrecision::kFloat64) {
        AttendAll<In, Out, double>(params, /*round_probabilities=*/false);
      } else if (params.input_dtype == DType::kFloat64) {
        AttendAll<In, Out, double>(params, /*round_probabilities=*/false);
      } else {
        AttendAll<In, Out, float>(params, /*round_probabilities=*/true);
      }
    });
  });
}

}  // namespace varlen
