// Numerics and SystematicError: the output judged against float64, element
// by element and then statistically over many elements.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "properties.h"
#include "property_support.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/report.h"
#include "varlen/cases/synth.h"

namespace varlen::internal {
namespace {

// Error of `value` against `exact` in ulps of the output dtype at `exact`,
// signed so that a positive value points away from zero.
double SignedUlps(double value, double exact, DType dtype) {
  int mantissa_bits = 52;
  if (dtype == DType::kBFloat16) mantissa_bits = 7;
  if (dtype == DType::kFloat16) mantissa_bits = 10;
  if (dtype == DType::kFloat32) mantissa_bits = 23;
  int exponent = 0;
  std::frexp(exact, &exponent);  // |exact| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, exponent - 1 - mantissa_bits);
  return (value - exact) / ulp * (exact < 0 ? -1.0 : 1.0);
}

struct ErrorMoments {
  double mean = 0, variance = 0, rms = 0, n = 0;
};

// Over the larger half of the elements by magnitude: there an ulp is a
// relative unit, while the error of an element near zero is the absolute
// error of its whole row, many of its own ulps in any correct kernel.
ErrorMoments Moments(const std::vector<double>& values, const std::vector<double>& oracle,
                     DType dtype) {
  std::vector<double> magnitudes;
  for (double x : oracle) {
    if (std::isfinite(x)) magnitudes.push_back(std::fabs(x));
  }
  if (magnitudes.empty()) return {};
  std::nth_element(magnitudes.begin(), magnitudes.begin() + magnitudes.size() / 2,
                   magnitudes.end());
  const double threshold = std::max(magnitudes[magnitudes.size() / 2], 1e-30);
  double sum = 0, squares = 0, n = 0;
  for (size_t i = 0; i < oracle.size(); ++i) {
    if (!std::isfinite(oracle[i]) || std::fabs(oracle[i]) < threshold) continue;
    const double u = SignedUlps(values[i], oracle[i], dtype);
    sum += u, squares += u * u, n += 1;
  }
  if (n == 0) return {};
  const double mean = sum / n;
  return {mean, std::max(0.0, squares / n - mean * mean), std::sqrt(squares / n), n};
}

// Thresholds of the statistical check (docs/conformance.md gives the
// false-alarm rate measured with them).
constexpr double kBiasZ = 6.0;            // standard errors
constexpr double kBiasFloorUlps = 0.125;  // and at least this much bias
constexpr double kRmsFactor = 1.5;        // RMS against the emulation's
constexpr double kRmsFloorUlps = 0.25;
constexpr double kMinElements = 1024;  // of the larger half

}  // namespace

std::string CheckNumerics(const Backend& backend, const Case& c, PropertyRun* run) {
  const Outcome outcome = RunCase(c, backend);
  run->fault = FaultOf(outcome.error);
  if (outcome.verdict == Verdict::kUnsupported) {
    ++run->unsupported;
    return "";
  }
  if (outcome.verdict == Verdict::kPass) return "";
  return FormatOutcomeText(c, "generated", outcome);
}

namespace {

// Numbers drawn from a case's seed, one stream per `purpose`: what a
// property adds to a generated case is then a function of the case.
class SeedDraws {
 public:
  SeedDraws(uint64_t seed, uint64_t purpose) : state_(seed * 0x9E3779B97F4A7C15ULL + purpose) {}
  uint64_t operator()(uint64_t n) {  // in [0, n)
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state_ >> 33) % n;
  }

 private:
  uint64_t state_;
};

// The generated geometry with an attention variant, drawn from the case's
// seed: a causal mask, a sliding window, a window on both sides, sinks
// alone (one head without), or a window with sinks. Unset when the backend
// computes neither windows nor sinks.
std::optional<Case> WithVariant(const Case& generated, const BackendCapabilities& caps) {
  if (!caps.windows && !caps.sinks) return std::nullopt;
  Case c = AsPackedData(generated, generated.data.distribution);
  SeedDraws next(c.data.seed, 1);
  const int64_t reach = std::max<int64_t>(c.geometry.longest(), 1);
  AttentionVariant& variant = c.geometry.variant;
  const uint64_t kind = next(5);
  if (caps.windows && kind != 3) {
    variant.window_left = kind == 0 ? -1 : static_cast<int64_t>(next(reach + 1));
    variant.window_right = kind <= 1 || kind == 4 ? 0 : static_cast<int64_t>(next(reach + 1));
  }
  if (caps.sinks && kind >= 3) {
    // Logits a softmax over this data reaches; one head without a sink.
    for (int64_t h = 0; h < c.geometry.num_heads; ++h) {
      variant.sinks.push_back(h == 1 ? -std::numeric_limits<float>::infinity()
                                     : 0.25f * static_cast<float>(next(25)) - 2.0f);
    }
  }
  if (variant.full()) return std::nullopt;
  return c;
}

// The generated geometry with rows in no sequence, drawn from the case's
// seed: before the first sequence, between sequences, after the last.
Case WithPadding(const Case& generated) {
  Case c = AsPackedData(generated, generated.data.distribution);
  SeedDraws next(c.data.seed, 2);
  std::vector<int64_t>& padding = c.geometry.padding;
  padding.assign(c.geometry.seq_lens.size() + 1, 0);
  for (int64_t& rows : padding) rows = next(3) == 0 ? 0 : 1 + static_cast<int64_t>(next(8));
  if (c.geometry.padding_rows() == 0) padding.back() = 1;
  return c;
}

// The ground truth of `c` on `backend`, judged against the float64 oracle.
std::string JudgeGroundTruth(const Backend& backend, const Case& c, absl::string_view what,
                             PropertyRun* run) {
  const QkvTensors qkv = SynthesizeQkv(c);
  absl::StatusOr<KernelCall> call = RunGroundTruth(backend, qkv.q, qkv.k, qkv.v, c.geometry);
  if (!call.ok()) return FailureOf(call.status(), run);
  const Reference reference = ComputeReference(c.geometry, qkv.q, qkv.k, qkv.v);
  const NumericReport report = JudgeOutput(c.geometry, reference, call->output(), ToleranceModel());
  if (report.passed) return "";
  return absl::StrCat(
      what, " over ", GeometryJson(c),
      ": the output does not match the float64 reference: ", SummarizeNumerics(report));
}

}  // namespace

std::string CheckAttentionVariants(const Backend& backend, const Case& generated,
                                   PropertyRun* run) {
  const std::optional<Case> c = WithVariant(generated, backend.capabilities());
  if (!c.has_value()) {
    ++run->unsupported;
    return "";
  }
  return JudgeGroundTruth(backend, *c, c->geometry.variant.Describe(), run);
}

std::string CheckPaddingRows(const Backend& backend, const Case& generated, PropertyRun* run) {
  return JudgeGroundTruth(backend, WithPadding(generated),
                          "rows in no sequence (NaN in q, k and v)", run);
}

std::string CheckSystematicError(const Backend& backend, const Case& generated, PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const Geometry& g = c.geometry;
  const QkvTensors qkv = SynthesizeQkv(c);
  absl::StatusOr<KernelCall> call =
      RunGroundTruth(backend, qkv.q, qkv.k, qkv.v, g.seq_lens, g.scale());
  if (!call.ok()) return FailureOf(call.status(), run);
  const Reference reference = ComputeReference(g, qkv.q, qkv.k, qkv.v);
  const Tensor& out = call->output();
  std::vector<double> values(static_cast<size_t>(out.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = out.DoubleAt(static_cast<int64_t>(i));
  const ErrorMoments backend_error = Moments(values, reference.oracle, g.dtype);
  const ErrorMoments same_precision = Moments(reference.emulated, reference.oracle, g.dtype);
  if (backend_error.n < kMinElements) return "";  // too few elements to judge
  const double standard_error = std::sqrt(backend_error.variance / backend_error.n +
                                          same_precision.variance / same_precision.n);
  // More biased than a same-precision kernel (whose own float32 arithmetic
  // may lean one way), by more than chance and more than the floor.
  const double excess = std::fabs(backend_error.mean) - std::fabs(same_precision.mean);
  std::string why;
  if (excess > std::max(kBiasFloorUlps, kBiasZ * standard_error)) {
    why = absl::StrFormat(
        "mean signed error %+.3f ulp (positive: away from zero) over the %.0f larger elements, a "
        "same-precision kernel's %+.3f ulp: %.1f standard errors more bias (rounding mode?)",
        backend_error.mean, backend_error.n, same_precision.mean, excess / standard_error);
  } else if (backend_error.rms > kRmsFactor * same_precision.rms + kRmsFloorUlps) {
    why = absl::StrFormat(
        "RMS error %.3f ulp over the %.0f larger elements, more than %.1f x a same-precision "
        "kernel's %.3f ulp + %.2f (accumulation precision?)",
        backend_error.rms, backend_error.n, kRmsFactor, same_precision.rms, kRmsFloorUlps);
  }
  if (why.empty()) return "";
  return absl::StrCat(why, "\n  geometry: ", GeometryJson(c));
}

}  // namespace varlen::internal
