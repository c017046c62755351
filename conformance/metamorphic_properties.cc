// The metamorphic properties: launches that must give the same bits as the
// packed batch (a sequence alone, the batch split, the sequences permuted,
// the neighbours poisoned, GQA against repeated KV heads), and a shift of
// every logit that must change nothing but rounding. They run on the
// ground-truth launch, without the contract.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "properties.h"
#include "property_support.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/synth.h"
#include "varlen/conformance/generators.h"

namespace varlen::internal {
namespace {

// Sequences [first, first + count) of `qkv`, launched on their own.
absl::StatusOr<KernelCall> RunSlice(const Backend& backend, const Geometry& g,
                                    const QkvTensors& qkv, size_t first, size_t count) {
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const std::vector<int64_t> lengths(g.seq_lens.begin() + first,
                                     g.seq_lens.begin() + first + count);
  const int64_t tokens = offsets[first + count] - offsets[first];
  std::array<Tensor, 3> slice;
  const std::array<const Tensor*, 3> packed = {&qkv.q, &qkv.k, &qkv.v};
  for (size_t t = 0; t < 3; ++t) {
    slice[t] = Tensor::Zeros(packed[t]->dtype(), packed[t]->device(),
                             {tokens, packed[t]->size(1), packed[t]->size(2)});
    CopyTokens(*packed[t], offsets[first], slice[t], 0, tokens);
  }
  return RunGroundTruth(backend, slice[0], slice[1], slice[2], lengths, g.scale());
}

// Launches each slice [first, end) of the sequences of `c` on its own and
// compares its output with its rows of the packed run.
std::string CompareSlices(const Backend& backend, const Case& c,
                          const std::vector<std::pair<size_t, size_t>>& slices, const char* what,
                          PropertyRun* run) {
  const Geometry& g = c.geometry;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const QkvTensors qkv = SynthesizeQkv(c);
  absl::StatusOr<KernelCall> packed =
      RunGroundTruth(backend, qkv.q, qkv.k, qkv.v, g.seq_lens, g.scale());
  if (!packed.ok()) return FailureOf(packed.status(), run);
  for (const auto& [first, end] : slices) {
    absl::StatusOr<KernelCall> alone = RunSlice(backend, g, qkv, first, end - first);
    if (!alone.ok()) return FailureOfLaterCall(alone.status(), run);
    if (!SameBits(packed->output(), offsets[first], alone->output(), 0,
                  offsets[end] - offsets[first])) {
      return absl::StrCat("sequences [", first, ", ", end, ") of ", GeometryJson(c), " ", what,
                          " give other bits than in the packed batch: the output depends on the "
                          "rest of the batch");
    }
  }
  return "";
}

}  // namespace

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
  if (!b.ok()) return FailureOfLaterCall(b.status(), run);
  if (SameBits(a->output(), offsets[target], b->output(), offsets[target], g.seq_lens[target])) {
    return "";
  }
  return absl::StrCat("sequence ", target, " of ", GeometryJson(c),
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
  if (!b.ok()) return FailureOfLaterCall(b.status(), run);
  for (size_t i = 0; i < order.size(); ++i) {
    if (!SameBits(a->output(), offsets[order[i]], b->output(), permuted_offsets[i],
                  g.seq_lens[order[i]])) {
      return absl::StrCat("sequence ", order[i], " of ", GeometryJson(c),
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
  const std::vector<int64_t> nonempty = NonEmptySequences(c.geometry);
  if (c.geometry.seq_lens.size() < 2 || nonempty.empty()) return "";
  const size_t target = static_cast<size_t>(*rc::gen::elementOf(nonempty));
  return CompareSlices(backend, c, {{target, target + 1}}, "launched alone", run);
}

// The batch split in two at a sequence boundary and launched as two
// batches gives the bits of the joined launch.
std::string CheckSplitJoin(const Backend& backend, const Case& generated, PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const size_t n = c.geometry.seq_lens.size();
  if (n < 2) return "";
  const size_t split = *rc::gen::inRange<size_t>(1, n);
  return CompareSlices(backend, c, {{0, split}, {split, n}}, "launched as a batch of their own",
                       run);
}

// Adding one constant to every logit of a row changes nothing but rounding.
// The case gets one head dimension d0 with q = a and k = 0 (the base) or
// k = c (the shifted batch): every logit moves by scale * a * c, exactly
// representable, so the float64 result of both is the same. The shifted
// output is judged against the base's float64 result, with the bound of a
// same-precision kernel on the shifted batch (which loses precision on
// large logits too). A kernel without the max subtraction overflows or
// underflows exp().
std::string CheckLogitShift(const Backend& backend, const Case& generated, PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const Geometry& g = c.geometry;
  if (g.total_tokens() == 0) return "";
  const double shift = *rc::gen::element(-1e4, -300.0, -90.0, 90.0, 300.0, 1e4);
  const int64_t d0 = *rc::gen::inRange<int64_t>(0, g.head_dim);
  constexpr double kQueryValue = 16;
  const QkvTensors base = SynthesizeQkv(c);
  const QkvTensors shifted = SynthesizeQkv(c);
  auto set_dim = [&](const Tensor& t, double value) {
    for (int64_t i = d0; i < t.numel(); i += g.head_dim) t.SetDoubleAt(i, value);
  };
  set_dim(base.q, kQueryValue);
  set_dim(shifted.q, kQueryValue);
  set_dim(base.k, 0.0);
  set_dim(shifted.k, shift / (g.scale() * kQueryValue));  // rounded to the dtype once, here
  absl::StatusOr<KernelCall> call =
      RunGroundTruth(backend, shifted.q, shifted.k, shifted.v, g.seq_lens, g.scale());
  if (!call.ok()) return FailureOf(call.status(), run);
  // The bound is the same-precision kernel's error on the shifted batch
  // against the base's result: for float64 inputs that kernel is the oracle
  // itself, and what the shift costs it in float64 is the whole bound.
  Reference reference = ComputeReference(g, shifted.q, shifted.k, shifted.v);
  reference.oracle = ComputeReference(g, base.q, base.k, base.v).oracle;
  reference.emulation_error = 0;
  for (size_t i = 0; i < reference.oracle.size(); ++i) {
    const double error = std::fabs(reference.emulated[i] - reference.oracle[i]);
    if (std::isfinite(error))
      reference.emulation_error = std::max(reference.emulation_error, error);
  }
  const NumericReport report = JudgeOutput(g, reference, call->output(), ToleranceModel());
  if (report.passed) return "";
  return absl::StrCat("every logit of ", GeometryJson(c), " shifted by about ", shift,
                      " (head dim ", d0, " of q set to ", kQueryValue,
                      ", of k to the shift): the output moved away from the unshifted float64 "
                      "result: ",
                      SummarizeNumerics(report));
}

// Grouped-query attention gives the bits of the same attention with each
// KV head repeated for the query heads that share it.
std::string CheckGqaRepeatedKv(const Backend& backend, const Case& generated, PropertyRun* run) {
  const Case c = AsPackedData(generated, Distribution::kNormal);
  const Geometry& g = c.geometry;
  if (g.num_heads == g.num_kv_heads) return "";
  const int64_t group = g.num_heads / g.num_kv_heads;
  const QkvTensors qkv = SynthesizeQkv(c);
  auto repeat_heads = [&](const Tensor& t) {
    const int64_t dim = t.size(2);
    Tensor out = Tensor::Zeros(t.dtype(), t.device(), {t.size(0), g.num_heads, dim});
    const size_t bytes = static_cast<size_t>(dim) * DTypeSize(t.dtype());
    for (int64_t token = 0; token < t.size(0); ++token) {
      for (int64_t h = 0; h < g.num_heads; ++h) {
        std::memcpy(out.mutable_data<unsigned char>() +
                        static_cast<size_t>(token * g.num_heads + h) * bytes,
                    t.data<unsigned char>() +
                        static_cast<size_t>(token * g.num_kv_heads + h / group) * bytes,
                    bytes);
      }
    }
    return out;
  };
  absl::StatusOr<KernelCall> grouped =
      RunGroundTruth(backend, qkv.q, qkv.k, qkv.v, g.seq_lens, g.scale());
  if (!grouped.ok()) return FailureOf(grouped.status(), run);
  absl::StatusOr<KernelCall> repeated = RunGroundTruth(backend, qkv.q, repeat_heads(qkv.k),
                                                       repeat_heads(qkv.v), g.seq_lens, g.scale());
  if (!repeated.ok()) return FailureOfLaterCall(repeated.status(), run);
  if (SameBits(grouped->output(), 0, repeated->output(), 0, g.total_tokens())) return "";
  return absl::StrCat(GeometryJson(c), " with ", g.num_kv_heads,
                      " KV heads gives other bits than with each KV head repeated for its ", group,
                      " query heads: query head h must read KV head h / ", group);
}

}  // namespace varlen::internal
