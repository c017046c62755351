#include "varlen/conformance/suite.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "expectation_report.h"
#include "gtest/gtest.h"
#include "rapidcheck/detail/Configuration.h"
#include "rapidcheck/detail/TestListener.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/report.h"
#include "varlen/cases/synth.h"
#include "varlen/conformance/corpus_suite.h"
#include "varlen/core/status.h"

namespace varlen {
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
  const absl::Status ran = backend.Run(params);
  if (absl::IsUnimplemented(ran)) {
    return absl::InternalError(
        absl::StrCat("Supports() accepted the call, then Run() answered: ", ran.message()));
  }
  VARLEN_RETURN_IF_ERROR(ran);
  return call;
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

struct PropertyRun {
  int64_t unsupported = 0;
};

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
  if (absl::IsUnimplemented(call.status()) || absl::IsUnavailable(call.status())) {
    ++run->unsupported;
    return "";
  }
  if (!call.ok()) return std::string(call.status().message());
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
  std::vector<int64_t> nonempty;
  for (size_t s = 0; s < g.seq_lens.size(); ++s) {
    if (g.seq_lens[s] > 0) nonempty.push_back(static_cast<int64_t>(s));
  }
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
  if (absl::IsUnimplemented(a.status()) || absl::IsUnavailable(a.status())) {
    ++run->unsupported;
    return "";
  }
  if (!a.ok()) return std::string(a.status().message());
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
  if (absl::IsUnimplemented(a.status()) || absl::IsUnavailable(a.status())) {
    ++run->unsupported;
    return "";
  }
  if (!a.ok()) return std::string(a.status().message());
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

struct Property {
  const char* name;
  std::string (*check)(const Backend&, const Case&, PropertyRun*);
  // Whether the written case replays the failure by itself (Numerics), or
  // is the input of a comparison that `varlen repro` does not make.
  bool case_replays;
};

constexpr Property kProperties[] = {
    {"Numerics", CheckNumerics, true},
    {"SystematicError", CheckSystematicError, false},
    {"PoisonedNeighbours", CheckPoisonedNeighbours, false},
    {"SequencePermutation", CheckSequencePermutation, false},
};

// ---------------------------------------------------------------------------
// Running a property as a test.

std::string FileSafe(absl::string_view name) {
  std::string out;
  for (char ch : name) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

rc::detail::TestParams ParamsFor(const PropertyBudget& budget, bool shrink, std::string* note) {
  rc::detail::Configuration defaults;
  defaults.testParams.disableShrinking = !shrink;
  defaults.testParams.maxSuccess = budget.cases;
  defaults.testParams.maxSize = 100;
  defaults.testParams.seed = budget.seed;
  if (budget.seed == 0) defaults.testParams.seed = std::random_device{}() * 0x100000001ULL + 1;
  if (const char* env = std::getenv("RC_PARAMS"); env != nullptr && *env != '\0') {
    const rc::detail::Configuration config = rc::detail::configFromString(env, defaults);
    *note = absl::StrCat("RC_PARAMS=\"", env, "\"");
    return config.testParams;
  }
  *note = absl::StrCat("RC_PARAMS=\"seed=", defaults.testParams.seed, "\" reruns it");
  return defaults.testParams;
}

// The manifest when it applies to `backend`.
const Expectations* ExpectationsFor(const SuiteOptions& options, const Backend& backend) {
  const Expectations* e = options.expectations.get();
  if (e == nullptr || (!e->backend.empty() && e->backend != backend.name())) return nullptr;
  return e;
}

// Expired entries and entries that match no test: a note, or a failure in a
// strict run.
class ManifestTest : public testing::Test {
 public:
  ManifestTest(std::shared_ptr<const Expectations> expectations, std::vector<std::string> tests)
      : expectations_(std::move(expectations)), tests_(std::move(tests)) {}
  void TestBody() override {
    const std::vector<std::string> problems = ManifestProblems(*expectations_, tests_, Today());
    std::cout << "[ varlen   ] " << expectations_->origin << ": " << expectations_->entries.size()
              << " entries, " << problems.size() << " expired or stale\n";
    for (const std::string& problem : problems) {
      if (expectations_->strict) {
        ADD_FAILURE() << expectations_->origin << ": " << problem;
      } else {
        std::cout << "  " << problem << "\n";
      }
    }
  }

 private:
  std::shared_ptr<const Expectations> expectations_;
  std::vector<std::string> tests_;
};

class QuietListener final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

const Property* FindProperty(absl::string_view name) {
  for (const Property& property : kProperties) {
    if (property.name == name) return &property;
  }
  return nullptr;
}

class PropertyTest : public testing::Test {
 public:
  PropertyTest(const Property& property, const Backend* backend, SuiteOptions options)
      : property_(property), backend_(backend), options_(std::move(options)) {}

  void TestBody() override {
    const Expectations* expectations = ExpectationsFor(options_, *backend_);
    const std::string test = absl::StrCat("Conformance.", property_.name);
    const ExpectationEntry* entry =
        expectations == nullptr ? nullptr
                                : FindExpectation(*expectations, test, std::nullopt, Today());
    if (entry != nullptr && entry->expect == Expect::kSkip) {
      GTEST_SKIP() << "expectations manifest: " << DescribeEntry(*entry);
    }
    PropertyRunOptions run_options;
    run_options.budget = BudgetFor(property_.name, options_.tier);
    if (expectations != nullptr) {
      // Skip entries with a dtype take that dtype out of the generated cases.
      BackendCapabilities caps = backend_->capabilities();
      std::erase_if(caps.input_dtypes, [&](DType dtype) {
        const ExpectationEntry* e = FindExpectation(*expectations, test, dtype, Today());
        return e != nullptr && e->dtype.has_value() && e->expect == Expect::kSkip;
      });
      run_options.generator = GenForwardCase(caps, run_options.budget.limits);
    }
    const PropertyRunResult result = RunProperty(property_.name, *backend_, run_options);
    std::cout << absl::StrFormat("[ varlen   ] %s on %s: %d cases in %.1f s (tier %s, %s)",
                                 property_.name, backend_->name(), result.executed, result.seconds,
                                 TierName(options_.tier), result.params_note);
    if (result.skipped_for_time > 0) {
      std::cout << "; time budget reached, " << result.skipped_for_time
                << " generated cases not run";
    }
    if (result.unsupported > 0) std::cout << "; " << result.unsupported << " unsupported";
    std::cout << "\n";
    if (result.passed) {
      if (result.unsupported > 0 && result.unsupported == result.executed) {
        GTEST_SKIP() << backend_->name() << " supports none of the generated cases";
      }
      internal::ReportUnderExpectation(entry, expectations != nullptr && expectations->strict,
                                       /*passed=*/true, "");
      return;
    }
    std::string message = result.message;
    if (result.shrunk.has_value()) {
      absl::StrAppend(&message, "\n  ", ReportFailure(*result.shrunk, result.why));
    }
    internal::ReportUnderExpectation(entry, expectations != nullptr && expectations->strict,
                                     /*passed=*/false, message);
  }

 private:
  // Writes the shrunk case where a user can move it into the corpus, and
  // says how to replay it.
  std::string ReportFailure(const Case& c, const std::string& why) const {
    absl::StatusOr<std::string> path = WriteShrunkCase(options_.failures_dir, backend_->name(),
                                                       property_.name, options_.tier, c, why);
    if (!path.ok()) return std::string(path.status().message());
    std::string command = options_.repro_command.empty()
                              ? std::string("varlen repro {file} --backend={backend}")
                              : options_.repro_command;
    command = absl::StrReplaceAll(command, {{"{file}", *path}, {"{backend}", backend_->name()}});
    return absl::StrCat("shrunk case written to ", *path, "\n  reproduce: ", command, "\n");
  }

  const Property& property_;
  const Backend* backend_;
  SuiteOptions options_;
};

}  // namespace

absl::StatusOr<std::string> WriteShrunkCase(const std::string& dir, absl::string_view backend,
                                            absl::string_view property, Tier tier, Case c,
                                            const std::string& why) {
  const Property* found = FindProperty(property);
  const bool replays = found != nullptr && found->case_replays;
  c.name = absl::StrCat(backend, "-", property, "-", c.data.seed);
  c.source = absl::StrCat("varlen conformance suite: property ", property, " on backend ", backend,
                          ", tier ", TierName(tier));
  c.description = replays ? "The shrunk failing case."
                          : absl::StrCat(
                                "The shrunk input of a failing comparison (replaying it "
                                "alone runs only the elementwise judgement). ",
                                why.substr(0, why.find('\n')));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const std::string path =
      (std::filesystem::path(dir) / absl::StrCat(FileSafe(backend), "-", property, ".json"))
          .string();
  std::ofstream file(path);
  file << WriteCase(c);
  file.close();
  if (!file)
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write the shrunk case"));
  return path;
}

std::vector<std::string> PropertyNames() {
  std::vector<std::string> names;
  for (const Property& property : kProperties) names.emplace_back(property.name);
  return names;
}

PropertyRunResult RunProperty(absl::string_view name, const Backend& backend,
                              const PropertyRunOptions& options) {
  PropertyRunResult result;
  const Property* property = FindProperty(name);
  if (property == nullptr) {
    result.message = absl::StrCat("no property named \"", name, "\"");
    return result;
  }
  const PropertyBudget& budget = options.budget;
  rc::detail::TestParams params;
  try {
    params = ParamsFor(budget, options.shrink, &result.params_note);
  } catch (const std::exception& e) {
    result.message = absl::StrCat("RC_PARAMS: ", e.what());
    return result;
  }
  const rc::Gen<Case> generator = options.generator.has_value()
                                      ? *options.generator
                                      : GenForwardCase(backend.capabilities(), budget.limits);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  PropertyRun run;
  const auto testable = [&] {
    const Case c = *generator;
    if (budget.time_budget_s > 0 && elapsed() > budget.time_budget_s &&
        !result.shrunk.has_value()) {
      ++result.skipped_for_time;
      return;
    }
    ++result.executed;
    const std::string why = property->check(backend, c, &run);
    if (!why.empty()) {
      if (!result.shrunk.has_value()) {
        result.executions_to_failure = result.executed;
        result.seconds_to_failure = elapsed();
      }
      result.shrunk = c;  // shrinking calls back with smaller failing cases: keep the last
      result.why = why;
      RC_FAIL(why);
    }
  };
  rc::detail::TestMetadata metadata;
  metadata.id = absl::StrCat(property->name, "/", backend.name());
  metadata.description = metadata.id;
  // Measurement runs (no shrinking) stay out of RapidCheck's global
  // "reproduce" report; test runs keep it.
  QuietListener quiet;
  const rc::detail::TestResult outcome =
      options.shrink
          ? rc::detail::checkTestable(testable, metadata, params)
          : rc::detail::checkProperty(rc::detail::toProperty(testable), metadata, params, quiet);
  result.seconds = elapsed();
  result.unsupported = run.unsupported;
  result.passed = outcome.template is<rc::detail::SuccessResult>();
  if (!result.passed) {
    std::ostringstream message;
    rc::detail::printResultMessage(outcome, message);
    result.message = message.str();
  }
  return result;
}

absl::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kSmoke:
      return "smoke";
    case Tier::kFull:
      return "full";
    case Tier::kNightly:
      return "nightly";
  }
  return "?";
}

absl::StatusOr<Tier> ParseTier(absl::string_view name) {
  for (Tier tier : {Tier::kSmoke, Tier::kFull, Tier::kNightly}) {
    if (TierName(tier) == name) return tier;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tier \"", name, "\" is not one of smoke, full, nightly"));
}

PropertyBudget BudgetFor(absl::string_view property, Tier tier) {
  PropertyBudget budget;
  // Numerics carries the contract and the special values; it gets the most
  // cases. The comparisons run the backend twice per case.
  const bool numerics = property == "Numerics";
  switch (tier) {
    case Tier::kSmoke:
      budget.cases = numerics ? 150 : 60;
      budget.limits.max_macs = 1'500'000;
      budget.time_budget_s = 20;
      budget.seed = 20261130;
      break;
    case Tier::kFull:
      budget.cases = numerics ? 2000 : 600;
      budget.limits.max_macs = 12'000'000;
      budget.time_budget_s = 300;
      budget.seed = 1;
      break;
    case Tier::kNightly:
      budget.cases = numerics ? 50000 : 15000;
      budget.limits.max_macs = 60'000'000;
      budget.limits.max_len = 1100;
      budget.time_budget_s = 3 * 3600;
      budget.seed = 0;  // fresh every night
      break;
  }
  return budget;
}

absl::StatusOr<SuiteOptions> ApplyEnvironment(SuiteOptions options) {
  if (const char* tier = std::getenv("VARLEN_TIER"); tier != nullptr && *tier != '\0') {
    absl::StatusOr<Tier> parsed = ParseTier(tier);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("VARLEN_TIER: ", parsed.status().message()));
    options.tier = *parsed;
  }
  if (const char* dir = std::getenv("VARLEN_FAILURES_DIR"); dir != nullptr && *dir != '\0') {
    options.failures_dir = dir;
  }
  if (const char* dir = std::getenv("VARLEN_CORPUS_DIR"); dir != nullptr && *dir != '\0') {
    options.corpus_dir = dir;
  }
  if (const char* file = std::getenv("VARLEN_EXPECTATIONS"); file != nullptr && *file != '\0') {
    absl::StatusOr<Expectations> loaded = LoadExpectations(file);
    if (!loaded.ok()) return loaded.status();
    options.expectations = std::make_shared<const Expectations>(*std::move(loaded));
  }
  return options;
}

absl::Status RegisterConformanceSuite(const SuiteOptions& options) {
  std::vector<const Backend*> backends;
  if (options.backends.empty()) {
    backends = AllBackends();
  } else {
    for (const std::string& name : options.backends) {
      const Backend* backend = FindBackend(name);
      if (backend == nullptr) {
        return absl::NotFoundError(absl::StrCat("no backend named \"", name, "\""));
      }
      backends.push_back(backend);
    }
  }
  std::vector<std::string> test_names;  // as expectations manifests match them
  if (!options.corpus_dir.empty()) {
    std::vector<std::string> names;
    for (const Backend* backend : backends) names.emplace_back(backend->name());
    VARLEN_RETURN_IF_ERROR(
        RegisterCorpusTests(options.corpus_dir, names, options.expectations.get()));
    VARLEN_ASSIGN_OR_RETURN(std::vector<std::string> files, ListCaseFiles({options.corpus_dir}));
    for (const std::string& file : files) {
      VARLEN_ASSIGN_OR_RETURN(Case c, LoadCaseFile(file));
      test_names.push_back(CorpusTestName(c.name));
    }
  }
  for (const Property& property : kProperties) {
    test_names.push_back(absl::StrCat("Conformance.", property.name));
  }
  if (options.expectations != nullptr) {
    testing::RegisterTest("Expectations", "Manifest", nullptr, nullptr, __FILE__, __LINE__,
                          [expectations = options.expectations, test_names]() -> testing::Test* {
                            return new ManifestTest(expectations, test_names);
                          });
  }
  for (const Property& property : kProperties) {
    for (const Backend* backend : backends) {
      testing::RegisterTest(
          "Conformance", absl::StrCat(property.name, "/", backend->name()).c_str(), nullptr,
          nullptr, __FILE__, __LINE__, [&property, backend, options]() -> testing::Test* {
            return new PropertyTest(property, backend, options);
          });
    }
  }
  return absl::OkStatus();
}

int ConformanceMain(int argc, char** argv, std::unique_ptr<Backend> backend,
                    const char* corpus_dir) {
  testing::InitGoogleTest(&argc, argv);
  const std::string name(backend->name());
  if (absl::Status registered = RegisterBackend(std::move(backend)); !registered.ok()) {
    std::cerr << registered.message() << "\n";
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (!absl::StartsWith(arg, "--repro=")) continue;
    const std::string file(arg.substr(8));
    absl::StatusOr<Case> c = LoadCaseFile(file);
    if (!c.ok()) {
      std::cerr << c.status().message() << "\n";
      return 2;
    }
    const Outcome outcome = RunCase(*c, *FindBackend(name));
    std::cout << FormatOutcomeText(*c, file, outcome);
    return outcome.verdict == Verdict::kFail ? 1 : 0;
  }
  SuiteOptions defaults;
  defaults.backends = {name};
  defaults.corpus_dir = corpus_dir;
  defaults.repro_command = absl::StrCat(argv[0], " --repro={file}");
  absl::StatusOr<SuiteOptions> options = ApplyEnvironment(defaults);
  if (!options.ok()) {
    std::cerr << options.status().message() << "\n";
    return 2;
  }
  if (absl::Status registered = RegisterConformanceSuite(*options); !registered.ok()) {
    std::cerr << registered.message() << "\n";
    return 2;
  }
  return RUN_ALL_TESTS();
}

}  // namespace varlen
