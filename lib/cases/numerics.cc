#include "varlen/cases/numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "varlen/backend/bind.h"
#include "varlen/cases/phase_clock.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

// Sentinel NaNs with payloads no arithmetic produces (x86 and CUDA both
// return the default NaN from invalid operations).
constexpr uint32_t kPoisonF32 = 0x7fe5a5a5u;
constexpr uint16_t kPoisonF16 = 0x7e5au;
constexpr uint16_t kPoisonBF16 = 0x7fdau;
constexpr uint64_t kPoisonF64 = 0x7ffda5a5a5a5a5a5ull;

bool IsPoisoned(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: {
      uint32_t bits;
      std::memcpy(&bits, t.data<float>() + i, sizeof bits);
      return bits == kPoisonF32;
    }
    case DType::kFloat16:
      return t.data<uint16_t>()[i] == kPoisonF16;
    case DType::kBFloat16:
      return t.data<uint16_t>()[i] == kPoisonBF16;
    case DType::kFloat64: {
      uint64_t bits;
      std::memcpy(&bits, t.data<double>() + i, sizeof bits);
      return bits == kPoisonF64;
    }
    default:
      return false;
  }
}

std::vector<double> RunReference(const Geometry& g, const Tensor& q, const Tensor& k,
                                 const Tensor& v, DType output_dtype, ReferencePrecision precision,
                                 OracleDevice device, absl::Status* status,
                                 double* logit_rounding = nullptr) {
  KernelCall call =
      BindGroundTruth(FlattenBatch(q), FlattenBatch(k), FlattenBatch(v), g.SequenceStarts(),
                      g.seq_lens, g.scale(), output_dtype, g.variant);
  if (device == OracleDevice::kGpu) {
    if (absl::Status ran = GpuReferenceAttention(call.params(), precision); !ran.ok()) {
      status->Update(ran);
      return {};
    }
  } else if (precision == ReferencePrecision::kEmulated && g.dtype == DType::kFloat64) {
    // A float64 kernel computes what the oracle computes, in its own order:
    // the naive loop's sums stand for it, so the bound is float64 noise
    // rather than zero.
    ReferenceAttention(call.params(), ReferencePrecision::kFloat64);
  } else {
    FastReferenceAttention(call.params(), precision, /*threads=*/0, logit_rounding);
  }
  std::vector<double> out(static_cast<size_t>(call.output().numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = call.output().DoubleAt(static_cast<int64_t>(i));
  return out;
}

// Both NaN, or the same infinity. Where the reference is NaN or infinite a
// kernel must be too; NaN against infinity is judged by either reference,
// since a probability rounded to zero turns Inf * p into NaN.
bool SameNonFinite(double actual, double expected) {
  if (std::isnan(expected)) return std::isnan(actual);
  return std::isinf(expected) && actual == expected;
}

// `t` ([T, H, D], any strides) as a contiguous copy in which each of g's
// sequences runs backwards (`reverse_tokens`) and each row's head dim runs
// backwards (`reverse_dim`). Tokens in no sequence stay in place.
Tensor Reordered(const Tensor& t, const Geometry& g, bool reverse_tokens, bool reverse_dim) {
  Tensor out = Tensor::Zeros(t.dtype(), t.device(), t.shape());
  const int64_t tokens = t.size(0), heads = t.size(1), dim = t.size(2);
  std::vector<int64_t> source_token(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) source_token[static_cast<size_t>(i)] = i;
  if (reverse_tokens) {
    const std::vector<int64_t> starts = g.SequenceStarts();
    for (size_t s = 0; s < starts.size(); ++s) {
      std::reverse(source_token.begin() + starts[s],
                   source_token.begin() + starts[s] + g.seq_lens[s]);
    }
  }
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t from = source_token[static_cast<size_t>(i)] * t.strides()[0] +
                             h * t.strides()[1] + (reverse_dim ? dim - 1 - d : d) * t.strides()[2];
        out.SetDoubleAt((i * heads + h) * dim + d, t.DoubleAt(from));
      }
    }
  }
  return out;
}

}  // namespace

absl::Status GpuOracleAvailable() { return GpuReferenceAvailable(); }

void RunExactKernel(const VarlenAttentionParams& params) {
  FastReferenceAttention(params, ReferencePrecision::kFloat64);
}

absl::StatusOr<OracleDevice> OracleDeviceFor(const Geometry& g, const ForwardBudget& cpu_budget) {
  if (FitsForwardBudget(g, cpu_budget)) return OracleDevice::kCpu;
  const std::string size =
      absl::StrCat(AttentionMacs(g), " multiply-adds, ", TensorElements(g), " elements");
  if (!FitsForwardBudget(g, kGpuForwardBudget)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the geometry exceeds the CPU and the GPU budgets (", size, ")"));
  }
  if (g.dtype == DType::kFloat64 || std::max(g.head_dim, g.head_dim_v) > kGpuReferenceMaxHeadDim) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the geometry exceeds the CPU budget (", size, ") and the GPU oracle takes neither ",
        "float64 inputs nor head dims over ", kGpuReferenceMaxHeadDim));
  }
  if (absl::Status gpu = GpuReferenceAvailable(); !gpu.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the geometry exceeds the CPU budget (", size,
                     ") and no GPU oracle runs here: ", gpu.message()));
  }
  return OracleDevice::kGpu;
}

Reference ComputeReference(const Geometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                           OracleDevice device) {
  Reference r;
  // Float32 inputs: the oracle's pass also measures what rounding each
  // logit once costs (ToleranceModel; the GPU oracle does not measure it).
  {
    ScopedPhase timed(Phase::kOracle);
    r.oracle = RunReference(g, q, k, v, DType::kFloat64, ReferencePrecision::kFloat64, device,
                            &r.status, g.dtype == DType::kFloat32 ? &r.logit_rounding : nullptr);
  }
  ScopedPhase timed(Phase::kEmulation);
  r.emulated = RunReference(g, q, k, v, g.dtype, ReferencePrecision::kEmulated, device, &r.status);
  // In float32 the order of the sums is most of a correct kernel's error
  // once logits are large (the rounding of each partial sum of Q K^T grows
  // with it), and the emulation has one order. So float32 is emulated twice,
  // the second time with both sums backwards: the head dim of q and k
  // reversed (Q K^T) and each sequence's keys and values reversed (P V).
  // Attention is unchanged by either, so the oracle stands for both.
  std::vector<double> reordered;
  const Tensor flat_q = FlattenBatch(q), flat_k = FlattenBatch(k), flat_v = FlattenBatch(v);
  if (g.dtype == DType::kFloat32 && r.status.ok() && flat_q.has_storage() &&
      flat_q.size(0) == flat_k.size(0) && flat_k.size(0) == flat_v.size(0)) {
    reordered = RunReference(g, Reordered(flat_q, g, false, true), Reordered(flat_k, g, true, true),
                             Reordered(flat_v, g, true, false), g.dtype,
                             ReferencePrecision::kEmulated, device, &r.status);
  }
  if (!r.status.ok()) return r;
  double noise = 0.0;
  for (size_t i = 0; i < r.oracle.size(); ++i) {
    // Non-finite elements are judged by kind, not by size.
    if (!std::isfinite(r.oracle[i]) || !std::isfinite(r.emulated[i])) continue;
    r.emulation_error = std::max(r.emulation_error, std::fabs(r.emulated[i] - r.oracle[i]));
    if (i < reordered.size() && std::isfinite(reordered[i])) {
      r.emulation_error = std::max(r.emulation_error, std::fabs(reordered[i] - r.oracle[i]));
    }
    const double ref = RoundToDType(r.oracle[i], g.dtype);
    const double shifted = RoundToDType(RoundToDType(ref + 0.3, g.dtype) - 0.3, g.dtype);
    noise = std::max(noise, std::fabs(shifted - ref));
  }
  r.noise_floor = 2.0 * noise;
  return r;
}

void PoisonOutput(const Tensor& output) {
  for (int64_t i = 0; i < output.numel(); ++i) {
    switch (output.dtype()) {
      case DType::kFloat32:
        std::memcpy(output.mutable_data<float>() + i, &kPoisonF32, sizeof kPoisonF32);
        break;
      case DType::kFloat16:
        output.mutable_data<uint16_t>()[i] = kPoisonF16;
        break;
      case DType::kBFloat16:
        output.mutable_data<uint16_t>()[i] = kPoisonBF16;
        break;
      case DType::kFloat64:
        std::memcpy(output.mutable_data<double>() + i, &kPoisonF64, sizeof kPoisonF64);
        break;
      default:
        break;
    }
  }
}

NumericReport JudgeOutput(const Geometry& g, const Reference& reference, const Tensor& output,
                          const ToleranceModel& tolerance) {
  ScopedPhase timed(Phase::kJudge);
  CountCaseJudged();
  NumericReport report;
  report.emulation_error = reference.emulation_error;
  report.logit_rounding = reference.logit_rounding;
  report.noise_floor = reference.noise_floor;
  report.tolerance_factor = tolerance.factor;
  report.bound = tolerance.factor * std::max(reference.emulation_error, reference.logit_rounding) +
                 reference.noise_floor;
  report.per_sequence_max_error.assign(g.seq_lens.size(), 0.0);
  const int64_t heads = g.num_heads, dim = g.head_dim_v;
  report.heads = heads;
  report.per_sequence_head_max_error.assign(g.seq_lens.size() * static_cast<size_t>(heads), 0.0);
  const int64_t row_elements = heads * dim;
  report.elements = (g.total_tokens() - g.padding_rows()) * row_elements;
  report.padding_elements = g.padding_rows() * row_elements;

  bool have_bad_element = false;
  const std::vector<int64_t> starts = g.SequenceStarts();
  int64_t next_row = 0;  // the first row no sequence before has covered
  const auto count_padding = [&](int64_t first, int64_t last) {
    for (int64_t i = first * row_elements; i < last * row_elements; ++i) {
      report.padding_unwritten += IsPoisoned(output, i);
    }
  };
  for (size_t s = 0; s < g.seq_lens.size(); ++s) {
    count_padding(next_row, starts[s]);
    next_row = starts[s] + g.seq_lens[s];
    for (int64_t row = 0, token = starts[s]; row < g.seq_lens[s]; ++row, ++token) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < dim; ++d) {
          const int64_t i = (token * heads + h) * dim + d;
          const double expected = reference.oracle[i];
          const double actual = output.DoubleAt(i);
          const ElementLocation here{static_cast<int64_t>(s), row, h, d, expected, actual};
          const bool unwritten = IsPoisoned(output, i);
          const bool non_finite = !unwritten && std::isfinite(expected) && !std::isfinite(actual);
          const bool lost_non_finite = !unwritten && !std::isfinite(expected) &&
                                       !SameNonFinite(actual, expected) &&
                                       !SameNonFinite(actual, reference.emulated[i]);
          double& cell = report.per_sequence_head_max_error[s * heads + h];
          if (unwritten || non_finite || lost_non_finite) {
            cell = std::numeric_limits<double>::infinity();
            report.unwritten += unwritten;
            report.non_finite += non_finite;
            report.lost_non_finite += lost_non_finite;
            if (!have_bad_element) report.worst = here;
            have_bad_element = true;
            continue;
          }
          if (!std::isfinite(expected)) continue;  // propagated as the reference does
          const double error = std::fabs(actual - expected);
          report.per_sequence_max_error[s] = std::max(report.per_sequence_max_error[s], error);
          cell = std::max(cell, error);
          if (std::fabs(expected) > reference.noise_floor) {
            report.max_rel_error = std::max(report.max_rel_error, error / std::fabs(expected));
          }
          if (error > report.max_abs_error) {
            report.max_abs_error = error;
            if (!have_bad_element) report.worst = here;
          }
        }
      }
    }
  }
  count_padding(next_row, g.total_tokens());
  report.passed = report.unwritten == 0 && report.non_finite == 0 && report.lost_non_finite == 0 &&
                  report.max_abs_error <= report.bound;
  return report;
}

std::string SummarizeNumerics(const NumericReport& r) {
  const std::string yardstick = r.logit_rounding > r.emulation_error
                                    ? absl::StrFormat("logit rounding %.3g (emulation %.3g)",
                                                      r.logit_rounding, r.emulation_error)
                                    : absl::StrFormat("emulation %.3g", r.emulation_error);
  std::string text = absl::StrFormat(
      "max abs error %.3g %s bound %.3g (%.3g x %s + noise %.3g), max rel error %.3g",
      r.max_abs_error, r.max_abs_error <= r.bound ? "<=" : ">", r.bound, r.tolerance_factor,
      yardstick, r.noise_floor, r.max_rel_error);
  if (r.unwritten > 0)
    absl::StrAppend(&text, "; ", r.unwritten, " of ", r.elements, " elements never written");
  if (r.non_finite > 0)
    absl::StrAppend(&text, "; ", r.non_finite, " NaN/Inf where the reference is finite");
  if (r.lost_non_finite > 0)
    absl::StrAppend(&text, "; ", r.lost_non_finite,
                    " elements not NaN/Inf (or of another kind) where the reference is");
  if (r.padding_elements > 0) {
    absl::StrAppend(&text, "; padding rows (not judged): ",
                    r.padding_unwritten == r.padding_elements ? "left unwritten"
                    : r.padding_unwritten == 0
                        ? "written"
                        : absl::StrCat(r.padding_unwritten, " of ", r.padding_elements,
                                       " elements left unwritten"));
  }
  if (!r.passed && r.worst.sequence >= 0) {
    absl::StrAppend(
        &text,
        absl::StrFormat("; worst at sequence %d row %d head %d dim %d: expected %.6g, got %.6g",
                        r.worst.sequence, r.worst.row, r.worst.head, r.worst.dim, r.worst.expected,
                        r.worst.actual));
  }
  return text;
}

}  // namespace varlen
