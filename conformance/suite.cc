#include "varlen/conformance/suite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "expectation_report.h"
#include "gtest/gtest.h"
#include "properties.h"
#include "rapidcheck/detail/Configuration.h"
#include "rapidcheck/detail/TestListener.h"
#include "safe_name.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/limits.h"
#include "varlen/cases/numerics.h"
#include "varlen/cases/report.h"
#include "varlen/conformance/corpus_suite.h"
#include "varlen/core/status.h"
#include "varlen/run/isolation.h"

namespace varlen {
namespace {

using internal::FindProperty;
using internal::Properties;
using internal::Property;
using internal::PropertyRun;

// ---------------------------------------------------------------------------
// Running a property as a test.

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
  return e != nullptr && AppliesTo(*e, backend.name()) ? e : nullptr;
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
    run_options.budget =
        ScaleBudget(BudgetFor(property_.name, options_.tier), options_.budget_scale);
    if (expectations != nullptr) ApplySkipEntries(*expectations, test, *backend_, &run_options);
    run_options.on_shrunk = [this](const PropertyRunResult& so_far) {
      (void)WriteShrunkCase(options_.failures_dir, backend_->name(), property_.name, options_.tier,
                            so_far);
    };
    const PropertyRunResult result = RunProperty(property_.name, *backend_, run_options);
    std::cout << absl::StrFormat("[ varlen   ] %s on %s: %s (tier %s, %s)\n", property_.name,
                                 backend_->name(), DescribeRun(result), TierName(options_.tier),
                                 result.params_note);
    if (result.passed) {
      if (result.unsupported > 0 && result.unsupported == result.executed) {
        GTEST_SKIP() << backend_->name() << " supports none of the generated cases";
      }
      internal::ReportUnderExpectation(entry, expectations != nullptr && expectations->strict,
                                       /*passed=*/true, "");
      return;
    }
    std::string message = result.message;
    if (result.shrunk.has_value()) absl::StrAppend(&message, "\n  ", ReportFailure(result));
    internal::ReportUnderExpectation(entry, expectations != nullptr && expectations->strict,
                                     /*passed=*/false, message);
  }

 private:
  // Writes the shrunk case where a user can move it into the corpus, and
  // says how to replay it.
  std::string ReportFailure(const PropertyRunResult& result) const {
    absl::StatusOr<std::string> path = WriteShrunkCase(options_.failures_dir, backend_->name(),
                                                       property_.name, options_.tier, result);
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
                                            absl::string_view property, Tier tier,
                                            const PropertyRunResult& result) {
  Case c = *result.shrunk;
  const bool replays = result.shrunk_replays;
  const std::string& why = result.why;
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
  const std::string path = (std::filesystem::path(dir) /
                            absl::StrCat(internal::SafeName(backend), "-", property, ".json"))
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
  for (const Property& property : Properties()) names.emplace_back(property.name);
  return names;
}

namespace {

// One RapidCheck run of `property` over `generator`, adding to `result`:
// at most `cases` cases, none started after `time_budget_s`.
bool RunPhase(const Property& property, const Backend& backend, const rc::Gen<Case>& generator,
              rc::detail::TestParams params, double time_budget_s,
              const PropertyRunOptions& options, PropertyRunResult* result,
              int64_t* skipped_for_time) {
  const bool shrink = options.shrink;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double seconds_before = result->seconds;
  bool failed = false;
  Case smallest_failing;
  PropertyRun run;
  const auto testable = [&] {
    const Case c = *generator;
    if (options.stop_on_time && time_budget_s > 0 && elapsed() > time_budget_s && !failed) {
      ++*skipped_for_time;
      return;
    }
    // Shrinking gets the phase's time budget again, then keeps the smallest
    // case so far: every candidate of a backend that hangs costs a deadline.
    if (time_budget_s > 0 && failed &&
        seconds_before + elapsed() - result->seconds_to_failure > time_budget_s) {
      if (c == smallest_failing) RC_FAIL(result->why);  // RapidCheck's final report
      return;
    }
    if (KernelRefusesGeometry(c)) {
      ++run.unsupported;
      return;
    }
    ++result->executed;
    run.replay.reset();
    run.fault.reset();
    const std::string why = property.check(backend, c, &run);
    if (!why.empty()) {
      if (!failed) {
        result->executions_to_failure = result->executed;
        result->seconds_to_failure = seconds_before + elapsed();
      }
      failed = true;
      // Shrinking calls back with smaller failing cases: keep the last.
      smallest_failing = c;
      result->shrunk = run.replay.value_or(c);
      result->shrunk_replays = run.replay.has_value() || property.case_replays;
      result->why = why;
      result->fault = run.fault;
      if (options.on_shrunk) options.on_shrunk(*result);
      RC_FAIL(why);
    }
  };
  rc::detail::TestMetadata metadata;
  metadata.id = absl::StrCat(property.name, "/", backend.name());
  metadata.description = metadata.id;
  // Measurement runs (no shrinking) stay out of RapidCheck's global
  // "reproduce" report; test runs keep it.
  QuietListener quiet;
  const rc::detail::TestResult outcome =
      shrink ? rc::detail::checkTestable(testable, metadata, params)
             : rc::detail::checkProperty(rc::detail::toProperty(testable), metadata, params, quiet);
  result->seconds = seconds_before + elapsed();
  result->unsupported += run.unsupported;
  if (outcome.template is<rc::detail::SuccessResult>()) return true;
  std::ostringstream message;
  rc::detail::printResultMessage(outcome, message);
  result->message = message.str();
  return false;
}

}  // namespace

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
  const BackendCapabilities caps = options.capabilities.value_or(backend.capabilities());
  const rc::Gen<Case> generator =
      options.generator.has_value() ? *options.generator : GenForwardCase(caps, budget.limits);
  result.passed = RunPhase(*property, backend, generator, params, budget.time_budget_s, options,
                           &result, &result.skipped_for_time);
  if (!result.passed || options.generator.has_value() || budget.long_cases <= 0) return result;

  // The long cases: their own count and time, and a seed of their own per
  // property (derived from the same one), so that each property sees other
  // long cases.
  params.maxSuccess = budget.long_cases;
  const uint64_t index = static_cast<uint64_t>(property - Properties().data());
  params.seed += 0x9E3779B97F4A7C15ULL * (index + 1);
  const int64_t executed = result.executed;
  const double seconds = result.seconds;
  result.passed =
      RunPhase(*property, backend, GenLongForwardCase(caps, budget.long_limits), params,
               budget.long_time_budget_s, options, &result, &result.long_skipped_for_time);
  result.long_executed = result.executed - executed;
  result.long_seconds = result.seconds - seconds;
  return result;
}

void ApplySkipEntries(const Expectations& expectations, absl::string_view test,
                      const Backend& backend, PropertyRunOptions* options) {
  options->capabilities = WithoutSkippedDTypes(backend.capabilities(), expectations, test, Today());
  options->budget.limits.excluded_distributions =
      options->budget.long_limits.excluded_distributions =
          SkippedDistributions(expectations, test, Today());
}

std::string DescribeRun(const PropertyRunResult& result) {
  std::string text = absl::StrFormat("%d cases in %.1f s", result.executed - result.long_executed,
                                     result.seconds - result.long_seconds);
  if (result.skipped_for_time > 0) {
    absl::StrAppend(&text, " (time budget reached, ", result.skipped_for_time, " not run)");
  }
  if (result.long_executed > 0 || result.long_skipped_for_time > 0) {
    absl::StrAppend(
        &text, absl::StrFormat(", %d long in %.1f s", result.long_executed, result.long_seconds));
  }
  if (result.long_skipped_for_time > 0) {
    absl::StrAppend(&text, " (time budget reached, ", result.long_skipped_for_time, " not run)");
  }
  if (result.unsupported > 0) absl::StrAppend(&text, ", ", result.unsupported, " unsupported");
  return text;
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
  // cases. The comparisons run the backend twice per case. Long cases get a
  // fifth of each property's time budget (docs/conformance.md).
  const bool numerics = property == "Numerics";
  constexpr double kLongShare = 0.2;
  switch (tier) {
    case Tier::kSmoke:
      budget.cases = numerics ? 150 : 60;
      budget.limits.max_macs = 1'500'000;
      budget.time_budget_s = 20;
      budget.seed = 20261130;
      budget.long_cases = numerics ? 6 : 2;
      budget.long_limits.min_len = 1000;
      budget.long_limits.max_len = 5000;
      budget.long_limits.max_macs = 100'000'000;
      break;
    case Tier::kFull:
      budget.cases = numerics ? 2000 : 600;
      budget.limits.max_macs = 12'000'000;
      budget.time_budget_s = 60;
      budget.seed = 1;
      budget.long_cases = numerics ? 12 : 4;
      budget.long_limits.min_len = 1000;
      budget.long_limits.max_len = 16385;
      budget.long_limits.max_macs = kForwardBudgetMacs;
      break;
    case Tier::kNightly:
      budget.cases = numerics ? 50000 : 15000;
      budget.limits.max_macs = 60'000'000;
      budget.limits.max_len = 1100;
      budget.time_budget_s = 3 * 3600;
      budget.seed = 0;  // fresh every night
      budget.long_cases = numerics ? 2000 : 500;
      // Beyond 16k where a GPU runs the oracle, up to its budget.
      budget.long_limits.min_len = 1000;
      budget.long_limits.max_len = 16385;
      budget.long_limits.max_macs = kForwardBudgetMacs;
      if (GpuOracleAvailable().ok()) {
        budget.long_limits.min_len = 4000;
        budget.long_limits.max_len = 131073;
        budget.long_limits.max_macs = kGpuForwardBudget.macs;
      }
      break;
  }
  budget.long_time_budget_s = budget.time_budget_s * kLongShare;
  budget.time_budget_s -= budget.long_time_budget_s;
  return budget;
}

PropertyBudget ScaleBudget(PropertyBudget budget, double scale) {
  const auto scaled = [scale](int n) {
    return std::max(1, static_cast<int>(std::lround(n * scale)));
  };
  budget.cases = scaled(budget.cases);
  budget.long_cases = scaled(budget.long_cases);
  budget.time_budget_s *= scale;
  budget.long_time_budget_s *= scale;
  return budget;
}

absl::StatusOr<SuiteOptions> ApplyEnvironment(SuiteOptions options) {
  if (const char* tier = std::getenv("VARLEN_TIER"); tier != nullptr && *tier != '\0') {
    absl::StatusOr<Tier> parsed = ParseTier(tier);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("VARLEN_TIER: ", parsed.status().message()));
    options.tier = *parsed;
  }
  if (const char* scale = std::getenv("VARLEN_BUDGET_SCALE"); scale != nullptr && *scale != '\0') {
    if (!absl::SimpleAtod(scale, &options.budget_scale) || !(options.budget_scale > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("VARLEN_BUDGET_SCALE=\"", scale, "\": the scale must be a positive number"));
    }
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

absl::StatusOr<IsolationOptions> IsolationFromEnvironment() {
  IsolationOptions options;
  if (const char* s = std::getenv("VARLEN_DEADLINE_S"); s != nullptr && *s != '\0') {
    if (!absl::SimpleAtod(s, &options.deadline_floor_s) || !(options.deadline_floor_s > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VARLEN_DEADLINE_S=\"", s, "\": the deadline must be a positive number of seconds"));
    }
  }
  if (const char* s = std::getenv("VARLEN_WORKER_MEMORY_MB"); s != nullptr && *s != '\0') {
    if (!absl::SimpleAtoi(s, &options.memory_limit_mb) || options.memory_limit_mb <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VARLEN_WORKER_MEMORY_MB=\"", s, "\": the limit must be a positive number of MiB"));
    }
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
  }
  if (options.expectations != nullptr && !options.corpus_dir.empty()) {
    // Only the manifest's report needs the case names again.
    VARLEN_ASSIGN_OR_RETURN(std::vector<std::string> files, ListCaseFiles({options.corpus_dir}));
    for (const std::string& file : files) {
      VARLEN_ASSIGN_OR_RETURN(Case c, LoadCaseFile(file));
      test_names.push_back(CorpusTestName(c.name));
    }
  }
  for (const Property& property : Properties()) {
    test_names.push_back(absl::StrCat("Conformance.", property.name));
  }
  if (options.expectations != nullptr) {
    testing::RegisterTest("Expectations", "Manifest", nullptr, nullptr, __FILE__, __LINE__,
                          [expectations = options.expectations, test_names]() -> testing::Test* {
                            return new ManifestTest(expectations, test_names);
                          });
  }
  for (const Property& property : Properties()) {
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
  // The backend runs in worker processes, which are this program started
  // again (varlen/run/isolation.h), unless --in-process says otherwise.
  if (IsWorkerProcess()) {
    return ServeAsWorker(
        [&](absl::string_view wanted) { return wanted == name ? backend.get() : nullptr; });
  }
  bool in_process = false;
  for (int i = 1; i < argc; ++i) in_process |= absl::string_view(argv[i]) == "--in-process";
  absl::StatusOr<IsolationOptions> isolation = IsolationFromEnvironment();
  if (!isolation.ok()) {
    std::cerr << isolation.status().message() << "\n";
    return 2;
  }
  // Outlives every run: the isolated proxy refers to it.
  static Backend* const declared = backend.release();
  if (absl::Status registered = RegisterBackend(in_process ? std::unique_ptr<Backend>(declared)
                                                           : Isolate(*declared, *isolation));
      !registered.ok()) {
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
