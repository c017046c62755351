// The float64 reference as a backend under test. It consumes resolved
// arguments like any other backend, so it shows what a mathematically exact
// kernel computes when handed them: any disagreement with the oracle is the
// arguments' fault, not the arithmetic's. It runs the naive definition while
// the judge runs the blocked oracle, so every case on it also checks one
// against the other.

#include "varlen/backend/backend.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

class CpuReferenceBackend final : public Backend {
 public:
  absl::string_view name() const override { return "cpu_reference"; }
  absl::string_view description() const override {
    return "float64 accumulation on the CPU, output rounded to the input dtype";
  }
  BackendCapabilities capabilities() const override {
    return {.input_dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
            .max_head_dim = 512,
            .grouped_query_attention = true,
            .distinct_value_head_dim = true,
            .strided_inputs = true,
            .windows = true,
            .sinks = true,
            .device = "cpu"};
  }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    ReferenceAttention(params, ReferencePrecision::kFloat64);
    return absl::OkStatus();
  }
};

}  // namespace
}  // namespace varlen

VARLEN_BACKEND(cpu_reference, ::varlen::CpuReferenceBackend)
