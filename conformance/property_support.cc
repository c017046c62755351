#include "property_support.h"

#include <cstring>

#include "varlen/backend/fault.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/phase_clock.h"
#include "varlen/core/status.h"

namespace varlen::internal {

namespace {

absl::StatusOr<KernelCall> RunLaunch(const Backend& backend, KernelCall call) {
  const VarlenAttentionParams params = call.params();
  VARLEN_RETURN_IF_ERROR(backend.Available());
  VARLEN_RETURN_IF_ERROR(backend.Supports(params));
  PoisonOutput(call.output());
  ScopedPhase timed(Phase::kBackend);
  VARLEN_RETURN_IF_ERROR(RunSupported(backend, params));
  return call;
}

}  // namespace

absl::StatusOr<KernelCall> RunGroundTruth(const Backend& backend, const Tensor& q, const Tensor& k,
                                          const Tensor& v, const std::vector<int64_t>& lengths,
                                          double scale, const AttentionVariant& variant) {
  return RunLaunch(backend, BindGroundTruth(q, k, v, lengths, scale, q.dtype(), variant));
}

absl::StatusOr<KernelCall> RunGroundTruth(const Backend& backend, const Tensor& q, const Tensor& k,
                                          const Tensor& v, const Geometry& g) {
  return RunLaunch(backend, BindGroundTruth(q, k, v, g.SequenceStarts(), g.seq_lens, g.scale(),
                                            q.dtype(), g.variant));
}

std::string FailureOf(const absl::Status& status, PropertyRun* run) {
  if (absl::IsUnimplemented(status) || absl::IsUnavailable(status)) {
    ++run->unsupported;
    return "";
  }
  return FailureOfLaterCall(status, run);
}

std::string FailureOfLaterCall(const absl::Status& status, PropertyRun* run) {
  if (std::optional<Fault> fault = FaultOf(status)) {
    run->fault = fault;
    return DescribeFault(*fault);
  }
  return std::string(status.message());
}

std::vector<int64_t> NonEmptySequences(const Geometry& g) {
  std::vector<int64_t> nonempty;
  for (size_t s = 0; s < g.seq_lens.size(); ++s) {
    if (g.seq_lens[s] > 0) nonempty.push_back(static_cast<int64_t>(s));
  }
  return nonempty;
}

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

bool SameBits(const Tensor& a, int64_t a_token, const Tensor& b, int64_t b_token, int64_t count) {
  const size_t row = static_cast<size_t>(a.size(1) * a.size(2)) * DTypeSize(a.dtype());
  return std::memcmp(a.data<unsigned char>() + static_cast<size_t>(a_token) * row,
                     b.data<unsigned char>() + static_cast<size_t>(b_token) * row,
                     static_cast<size_t>(count) * row) == 0;
}

Case AsPackedData(Case c, Distribution distribution) {
  c.call.layout = QLayout::kPacked;
  c.data.distribution = distribution;
  return c;
}

std::string GeometryJson(const Case& c) { return CaseToJson(c)["geometry"].dump(); }

}  // namespace varlen::internal
