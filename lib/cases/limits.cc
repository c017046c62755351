#include "varlen/cases/limits.h"

#include <algorithm>

namespace varlen {

int64_t AttentionMacs(const Geometry& g) {
  // Saturate: the answer only has to be compared with the budget.
  int64_t total = 0;
  for (int64_t len : g.seq_lens) {
    const double macs = static_cast<double>(len) * static_cast<double>(len) *
                        static_cast<double>(g.num_heads) *
                        static_cast<double>(g.head_dim + g.head_dim_v);
    total = static_cast<int64_t>(std::min(static_cast<double>(total) + macs, 9.0e18));
  }
  return total;
}

int64_t TensorElements(const Geometry& g) {
  const int64_t t = g.total_tokens();
  return t * g.num_heads * (g.head_dim + g.head_dim_v) +
         t * g.num_kv_heads * (g.head_dim + g.head_dim_v);
}

bool FitsForwardBudget(const Geometry& g, const ForwardBudget& budget) {
  return AttentionMacs(g) <= budget.macs && TensorElements(g) <= budget.elements;
}

}  // namespace varlen
