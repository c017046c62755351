#include "properties.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "varlen/backend/bind.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/report.h"
#include "varlen/cases/synth.h"
#include "varlen/conformance/generators.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// ---------------------------------------------------------------------------
// Running a backend on a ground-truth launch (no contract involved).

// Returns Unimplemented when `backend` does not support the launch, the
// backend's error when its run fails, else the call with its output.
absl::StatusOr<KernelCall> RunGroundTruth(const Backend& backend, const Tensor& q, const Tensor& k,
                                          const Tensor& v, const std::vector<int64_t>& lengths,
                                          double scale) {
  KernelCall call = BindGroundTruth(q, k, v, lengths, scale, q.dtype());
  const VarlenAttentionParams params = call.params();
  VARLEN_RETURN_IF_ERROR(backend.Available());
  VARLEN_RETURN_IF_ERROR(backend.Supports(params));
  PoisonOutput(call.output());
  VARLEN_RETURN_IF_ERROR(RunSupported(backend, params));
  return call;
}

// Why a property fails when its first launch did not run: nothing when the
// backend does not support the launch (the case is counted unsupported),
// else the backend's error.
std::string FailureOf(const absl::Status& status, PropertyRun* run) {
  if (absl::IsUnimplemented(status) || absl::IsUnavailable(status)) {
    ++run->unsupported;
    return "";
  }
  return std::string(status.message());
}

// The sequences with at least one token.
std::vector<int64_t> NonEmptySequences(const Geometry& g) {
  std::vector<int64_t> nonempty;
  for (size_t s = 0; s < g.seq_lens.size(); ++s) {
    if (g.seq_lens[s] > 0) nonempty.push_back(static_cast<int64_t>(s));
  }
  return nonempty;
}

// Dense [tokens, heads, dim] copy of `t` with `extra` more tokens, filled
// with `fill`; token rows can then be moved around by CopyTokens.
Tensor WithTail(const Tensor& t, int64_t extra, double fill) {
  Tensor out = Tensor::Zeros(t.dtype(), t.device(), {t.size(0) + extra, t.size(1), t.size(2)});
  for (int64_t i = 0; i < out.numel(); ++i) out.SetDoubleAt(i, fill);
  std::memcpy(out.mutable_data<unsigned char>(), t.data<unsigned char>(),
              static_cast<size_t>(t.numel()) * DTypeSize(t.dtype()));
  return out;
}

void CopyTokens(const Tensor& from, int64_t from_token, const Tensor& to, int64_t to_token,
                int64_t count) {
  const size_t row = static_cast<size_t>(from.size(1) * from.size(2)) * DTypeSize(from.dtype());
  std::memcpy(to.mutable_data<unsigned char>() + static_cast<size_t>(to_token) * row,
              from.data<unsigned char>() + static_cast<size_t>(from_token) * row,
              static_cast<size_t>(count) * row);
}

void FillTokens(const Tensor& t, int64_t first, int64_t count, double value) {
  const int64_t row = t.size(1) * t.size(2);
  for (int64_t i = first * row; i < (first + count) * row; ++i) t.SetDoubleAt(i, value);
}

// The index of the first output element of sequence-local token `row` of a
// packing, and whether two outputs agree bit for bit over `count` tokens.
bool SameBits(const Tensor& a, int64_t a_token, const Tensor& b, int64_t b_token, int64_t count) {
  const size_t row = static_cast<size_t>(a.size(1) * a.size(2)) * DTypeSize(a.dtype());
  return std::memcmp(a.data<unsigned char>() + static_cast<size_t>(a_token) * row,
                     b.data<unsigned char>() + static_cast<size_t>(b_token) * row,
                     static_cast<size_t>(count) * row) == 0;
}

// A forward case as plain packed data: the properties below run on the
// ground-truth launch, with every layout and contract question left to
// Numerics.
Case AsPackedData(Case c, Distribution distribution) {
  c.call.layout = QLayout::kPacked;
  c.data.distribution = distribution;
  return c;
}

// ---------------------------------------------------------------------------
// The properties. Each returns "" when it holds on `c`, else why not.

std::string CheckNumerics(const Backend& backend, const Case& c, PropertyRun* run) {
  const Outcome outcome = RunCase(c, backend);
  if (outcome.verdict == Verdict::kUnsupported) {
    ++run->unsupported;
    return "";
  }
  if (outcome.verdict == Verdict::kPass) return "";
  return FormatOutcomeText(c, "generated", outcome);
}

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
  return absl::StrCat(why, "\n  geometry: ", CaseToJson(c)["geometry"].dump());
}

std::string CheckPoisonedNeighbours(const Backend& backend, const Case& generated,
                                    PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const Geometry& g = c.geometry;
  const std::vector<int64_t> nonempty = NonEmptySequences(g);
  if (nonempty.empty()) return "";
  const int64_t target = *rc::gen::elementOf(nonempty);
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  constexpr int64_t kTail = 16;  // tokens past cu_seqlens[-1] in the buffers
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const QkvTensors qkv = SynthesizeQkv(c);
  const std::array<Tensor, 3> clean = {WithTail(qkv.q, kTail, 0.0), WithTail(qkv.k, kTail, 0.0),
                                       WithTail(qkv.v, kTail, 0.0)};
  const std::array<Tensor, 3> poisoned = {WithTail(qkv.q, kTail, nan), WithTail(qkv.k, kTail, nan),
                                          WithTail(qkv.v, kTail, nan)};
  for (const Tensor& t : poisoned) {
    FillTokens(t, 0, offsets[target], nan);
    FillTokens(t, offsets[target + 1], g.total_tokens() - offsets[target + 1], nan);
  }
  absl::StatusOr<KernelCall> a =
      RunGroundTruth(backend, clean[0], clean[1], clean[2], g.seq_lens, g.scale());
  if (!a.ok()) return FailureOf(a.status(), run);
  absl::StatusOr<KernelCall> b =
      RunGroundTruth(backend, poisoned[0], poisoned[1], poisoned[2], g.seq_lens, g.scale());
  if (!b.ok()) return std::string(b.status().message());
  if (SameBits(a->output(), offsets[target], b->output(), offsets[target], g.seq_lens[target])) {
    return "";
  }
  return absl::StrCat("sequence ", target, " of ", CaseToJson(c)["geometry"].dump(),
                      " changed when the other sequences and ", kTail,
                      " tokens past the last offset were NaN: the kernel reads outside the "
                      "sequence's own tokens");
}

std::string CheckSequencePermutation(const Backend& backend, const Case& generated,
                                     PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const Geometry& g = c.geometry;
  if (g.seq_lens.size() < 2) return "";
  std::vector<size_t> order(g.seq_lens.size());
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  std::rotate(order.begin(), order.begin() + *rc::gen::inRange<size_t>(0, order.size()),
              order.end());
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  std::vector<int64_t> permuted_lengths, permuted_offsets = {0};
  for (size_t s : order) {
    permuted_lengths.push_back(g.seq_lens[s]);
    permuted_offsets.push_back(permuted_offsets.back() + g.seq_lens[s]);
  }
  const QkvTensors qkv = SynthesizeQkv(c);
  std::array<Tensor, 3> permuted;
  const std::array<const Tensor*, 3> original = {&qkv.q, &qkv.k, &qkv.v};
  for (size_t t = 0; t < 3; ++t) {
    permuted[t] = WithTail(*original[t], 0, 0.0);
    for (size_t i = 0; i < order.size(); ++i) {
      CopyTokens(*original[t], offsets[order[i]], permuted[t], permuted_offsets[i],
                 g.seq_lens[order[i]]);
    }
  }
  absl::StatusOr<KernelCall> a =
      RunGroundTruth(backend, qkv.q, qkv.k, qkv.v, g.seq_lens, g.scale());
  if (!a.ok()) return FailureOf(a.status(), run);
  absl::StatusOr<KernelCall> b =
      RunGroundTruth(backend, permuted[0], permuted[1], permuted[2], permuted_lengths, g.scale());
  if (!b.ok()) return std::string(b.status().message());
  for (size_t i = 0; i < order.size(); ++i) {
    if (!SameBits(a->output(), offsets[order[i]], b->output(), permuted_offsets[i],
                  g.seq_lens[order[i]])) {
      return absl::StrCat("sequence ", order[i], " of ", CaseToJson(c)["geometry"].dump(),
                          " changed when packed at position ", i,
                          " instead: its output depends on where it is packed");
    }
  }
  return "";
}

// A sequence launched alone (its own tensors, a batch of one) gives the
// bits it gets inside the packed batch.
std::string CheckSequenceAlone(const Backend& backend, const Case& generated, PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const Geometry& g = c.geometry;
  const std::vector<int64_t> nonempty = NonEmptySequences(g);
  if (g.seq_lens.size() < 2 || nonempty.empty()) return "";
  const int64_t target = *rc::gen::elementOf(nonempty);
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const int64_t length = g.seq_lens[target];
  const QkvTensors qkv = SynthesizeQkv(c);
  std::array<Tensor, 3> alone;
  const std::array<const Tensor*, 3> packed = {&qkv.q, &qkv.k, &qkv.v};
  for (size_t t = 0; t < 3; ++t) {
    alone[t] = Tensor::Zeros(packed[t]->dtype(), packed[t]->device(),
                             {length, packed[t]->size(1), packed[t]->size(2)});
    CopyTokens(*packed[t], offsets[target], alone[t], 0, length);
  }
  absl::StatusOr<KernelCall> a =
      RunGroundTruth(backend, qkv.q, qkv.k, qkv.v, g.seq_lens, g.scale());
  if (!a.ok()) return FailureOf(a.status(), run);
  absl::StatusOr<KernelCall> b =
      RunGroundTruth(backend, alone[0], alone[1], alone[2], {length}, g.scale());
  if (!b.ok()) return std::string(b.status().message());
  if (SameBits(a->output(), offsets[target], b->output(), 0, length)) return "";
  return absl::StrCat("sequence ", target, " of ", CaseToJson(c)["geometry"].dump(),
                      " gives other bits launched alone than packed with the others: its output "
                      "depends on the rest of the batch");
}

}  // namespace

constexpr Property kProperties[] = {
    {"Numerics", CheckNumerics, true},
    {"SystematicError", CheckSystematicError, false},
    {"PoisonedNeighbours", CheckPoisonedNeighbours, false},
    {"SequencePermutation", CheckSequencePermutation, false},
    {"SequenceAlone", CheckSequenceAlone, false},
};

absl::Span<const Property> Properties() { return kProperties; }

const Property* FindProperty(absl::string_view name) {
  for (const Property& property : kProperties) {
    if (property.name == name) return &property;
  }
  return nullptr;
}

}  // namespace varlen::internal
