#include "varlen/cases/case.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varlen {
namespace {

// Bitwise-faithful equality for values read from JSON: NaN equals NaN and
// -0.0 differs from 0.0, so a round trip is checked exactly.
bool SameDouble(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

bool SameDoubles(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameDouble(a[i], b[i])) return false;
  }
  return true;
}

constexpr std::array<std::pair<Distribution, absl::string_view>, 8> kDistributions = {{
    {Distribution::kNormal, "normal"},
    {Distribution::kUniform, "uniform"},
    {Distribution::kSparseSmallIntegers, "sparse_small_integers"},
    {Distribution::kLargeLogits, "large_logits"},
    {Distribution::kDominantLogit, "dominant_logit"},
    {Distribution::kConstantRows, "constant_rows"},
    {Distribution::kNonFinite, "non_finite"},
    {Distribution::kSubnormal, "subnormal"},
}};

constexpr std::array<std::pair<QLayout, absl::string_view>, 4> kLayouts = {{
    {QLayout::kPacked, "packed"},
    {QLayout::kBatched, "batched"},
    {QLayout::kFusedQkv, "fused_qkv"},
    {QLayout::kBatchedFusedQkv, "batched_fused_qkv"},
}};

// The spelling of `value` in `table`.
template <typename Enum, size_t N>
absl::string_view NameIn(const std::array<std::pair<Enum, absl::string_view>, N>& table,
                         Enum value) {
  for (const auto& [entry, name] : table) {
    if (entry == value) return name;
  }
  return "?";
}

// The value spelled `name` in `table`, or an error naming `what` and the
// spellings.
template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseIn(const std::array<std::pair<Enum, absl::string_view>, N>& table,
                             absl::string_view what, absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const auto& [entry, spelled] : table) {
    if (spelled == name) return entry;
    names.push_back(spelled);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " \"", name, "\" is not one of ", absl::StrJoin(names, ", ")));
}

}  // namespace

absl::string_view QLayoutName(QLayout layout) { return NameIn(kLayouts, layout); }

absl::StatusOr<QLayout> ParseQLayout(absl::string_view name) {
  return ParseIn(kLayouts, "layout", name);
}

QLayout UnfusedLayout(QLayout layout) {
  switch (layout) {
    case QLayout::kFusedQkv:
      return QLayout::kPacked;
    case QLayout::kBatchedFusedQkv:
      return QLayout::kBatched;
    default:
      return layout;
  }
}

int64_t Geometry::total_tokens() const {
  return std::accumulate(seq_lens.begin(), seq_lens.end(), padding_rows());
}

int64_t Geometry::padding_rows() const {
  return std::accumulate(padding.begin(), padding.end(), int64_t{0});
}

std::vector<int64_t> Geometry::SequenceStarts() const {
  std::vector<int64_t> starts;
  starts.reserve(seq_lens.size());
  int64_t row = 0;
  for (size_t i = 0; i < seq_lens.size(); ++i) {
    if (i < padding.size()) row += padding[i];
    starts.push_back(row);
    row += seq_lens[i];
  }
  return starts;
}

int64_t Geometry::longest() const {
  return seq_lens.empty() ? 0 : *std::max_element(seq_lens.begin(), seq_lens.end());
}

double Geometry::scale() const {
  return softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

absl::string_view DistributionName(Distribution d) { return NameIn(kDistributions, d); }

absl::StatusOr<Distribution> ParseDistribution(absl::string_view name) {
  return ParseIn(kDistributions, "distribution", name);
}

bool TensorLiteral::operator==(const TensorLiteral& other) const {
  return dtype == other.dtype && device == other.device && shape == other.shape &&
         ints == other.ints && SameDoubles(floats, other.floats) && step == other.step;
}

Tensor MakeTensor(const TensorLiteral& t) {
  const Shape shape = t.shape.value_or(
      Shape{static_cast<int64_t>(IsFloatingPoint(t.dtype) ? t.floats.size() : t.ints.size())});
  const Tensor dense = IsFloatingPoint(t.dtype)
                           ? Tensor::FromDoubles(t.floats, t.dtype, t.device, shape)
                           : Tensor::FromInts(t.ints, t.dtype, t.device, shape);
  if (t.step == 1 || shape.empty()) return dense;
  Shape base_shape = shape;
  base_shape[0] *= t.step;
  const Tensor base = Tensor::Zeros(t.dtype, t.device, base_shape);
  Shape strides = base.strides();
  strides[0] *= t.step;
  const Tensor view = base.AsStrided(shape, strides, 0);
  const size_t size = DTypeSize(t.dtype);
  for (int64_t i = 0; i < dense.numel(); ++i) {
    std::memcpy(base.mutable_data<unsigned char>() + view.StorageIndex(i) * size,
                dense.data<unsigned char>() + i * size, size);
  }
  return view;
}

ArgLiteral ArgLiteral::Int(int64_t v) {
  ArgLiteral a;
  a.kind = Kind::kInt;
  a.i = v;
  return a;
}

ArgLiteral ArgLiteral::Float(double v) {
  ArgLiteral a;
  a.kind = Kind::kFloat;
  a.f = v;
  return a;
}

ArgLiteral ArgLiteral::Str(std::string v) {
  ArgLiteral a;
  a.kind = Kind::kStr;
  a.s = std::move(v);
  return a;
}

ArgLiteral ArgLiteral::Tensor(TensorLiteral t) {
  ArgLiteral a;
  a.kind = Kind::kTensor;
  a.tensor = std::move(t);
  return a;
}

ArgLiteral ArgLiteral::IntTensor(std::vector<int64_t> values, DType dtype, Device device) {
  TensorLiteral t;
  t.dtype = dtype;
  t.device = device;
  t.ints = std::move(values);
  return Tensor(std::move(t));
}

ArgLiteral ArgLiteral::IntScalarTensor(int64_t value, DType dtype, Device device) {
  ArgLiteral a = IntTensor({value}, dtype, device);
  a.tensor.shape = Shape{};
  return a;
}

bool ArgLiteral::operator==(const ArgLiteral& other) const {
  if (kind != other.kind) return false;
  switch (kind) {
    case Kind::kNone:
    case Kind::kEmptyLikeQ:
      return true;
    case Kind::kBool:
      return b == other.b;
    case Kind::kInt:
      return i == other.i;
    case Kind::kFloat:
      return SameDouble(f, other.f);
    case Kind::kStr:
      return s == other.s;
    case Kind::kTensor:
      return tensor == other.tensor;
    case Kind::kList:
      return list == other.list;
    case Kind::kSingletonCache:
      return cache_has_data == other.cache_has_data && (!cache_has_data || tensor == other.tensor);
  }
  return false;
}

absl::string_view MetadataBuilderName(MetadataSpec::Builder builder) {
  switch (builder) {
    case MetadataSpec::Builder::kPlain:
      return "plain";
    case MetadataSpec::Builder::kFlashinferCudnn:
      return "flashinfer_cudnn";
    case MetadataSpec::Builder::kManual:
      return "manual";
  }
  return "?";
}

absl::string_view ExpectedOutcomeName(Expectation::Outcome outcome) {
  switch (outcome) {
    case Expectation::Outcome::kError:
      return "error";
    case Expectation::Outcome::kSuccess:
      return "success";
    case Expectation::Outcome::kSilentCorruption:
      return "silent_corruption";
  }
  return "?";
}

}  // namespace varlen
