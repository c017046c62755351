#include "varlen/conformance/check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "safe_name.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"
#include "varlen/conformance/corpus_suite.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::error_code ignored;
  std::filesystem::create_directories(path.parent_path(), ignored);
  std::ofstream file(path);
  file << text;
  file.close();
  if (!file) return absl::PermissionDeniedError(absl::StrCat(path.string(), ": cannot write"));
  return absl::OkStatus();
}

// Draws the picture of a failing outcome with numbers; returns its path or "".
std::string DrawPicture(const CheckOptions& options, const std::string& backend,
                        const std::string& name, const Outcome& outcome) {
  if (options.report_dir.empty() || !outcome.numerics.has_value()) return "";
  const std::filesystem::path path = std::filesystem::path(options.report_dir) / "pictures" /
                                     internal::SafeName(backend) /
                                     (internal::SafeName(name) + ".svg");
  const std::string title = absl::StrCat(name, " on ", backend);
  if (!WriteFile(path, ErrorPictureSvg(title, *outcome.numerics)).ok()) return "";
  return path.string();
}

std::vector<const Backend*> ChooseBackends(const std::vector<std::string>& names,
                                           absl::Status* status) {
  std::vector<const Backend*> backends;
  if (names.empty()) {
    for (const Backend* b : AllBackends()) {
      if (b->Available().ok()) backends.push_back(b);
    }
    return backends;
  }
  for (const std::string& name : names) {
    const Backend* b = FindBackend(name);
    if (b == nullptr) {
      *status = absl::NotFoundError(absl::StrCat("no backend named \"", name, "\""));
      return {};
    }
    backends.push_back(b);
  }
  return backends;
}

// The manifest when it applies to `backend`, else null.
const Expectations* ExpectationsFor(const CheckOptions& options, absl::string_view backend) {
  for (const auto& e : options.expectations) {
    if (AppliesTo(*e, backend)) return e.get();
  }
  return nullptr;
}

// The manifest entry for `test` on `backend`, or null.
const ExpectationEntry* EntryFor(const CheckOptions& options, absl::string_view backend,
                                 const std::string& test, std::optional<DType> dtype,
                                 std::optional<Distribution> distribution = std::nullopt) {
  const Expectations* e = ExpectationsFor(options, backend);
  return e == nullptr ? nullptr : FindExpectation(*e, test, dtype, Today(), distribution);
}

// A skip entry: the item is not run.
bool SkippedByExpectation(const ExpectationEntry* entry, CheckItem* item) {
  if (entry == nullptr || entry->expect != Expect::kSkip) return false;
  item->status = CheckStatus::kUnsupported;
  item->message = absl::StrCat("skipped by the expectations manifest: ", DescribeEntry(*entry));
  return true;
}

// Turns the pass or fail of `item` into what the manifest entry says of it.
void ApplyExpectation(const CheckOptions& options, const ExpectationEntry* entry, CheckItem* item) {
  const Expectations* manifest = ExpectationsFor(options, item->backend);
  if (entry == nullptr) return;
  const std::string described = DescribeEntry(*entry);
  const bool failed = item->status == CheckStatus::kFail;
  if (failed && entry->expect != Expect::kSkip) {
    item->status = CheckStatus::kXFail;
    item->message = absl::StrCat(
        entry->expect == Expect::kFlaky ? "failure tolerated (flaky): " : "expected failure: ",
        described, "\n", item->message);
  } else if (item->status == CheckStatus::kPass && entry->expect == Expect::kFail) {
    const bool strict = manifest != nullptr && manifest->strict;
    item->status = strict ? CheckStatus::kFail : CheckStatus::kXPass;
    item->message = absl::StrCat("XPASS: passed, but the expectations manifest says ", described,
                                 strict ? "; remove the entry" : "");
  }
}

// Numbers the run's checks in their fixed order and says which belong to
// this shard.
class ShardCounter {
 public:
  explicit ShardCounter(Shard shard) : shard_(shard) {}
  // The next check's ordinal when it is this shard's.
  std::optional<int64_t> Next() {
    const int64_t ordinal = next_++;
    if (!shard_.Owns(ordinal)) return std::nullopt;
    return ordinal;
  }

 private:
  Shard shard_;
  int64_t next_ = 0;
};

void NoteFault(const std::optional<Fault>& fault, CheckItem* item) {
  if (!fault.has_value()) return;
  item->fault = std::string(FaultKindName(fault->kind));
  item->fault_signature = FaultSignature(*fault);
}

void ReplayCorpus(const CheckOptions& options, const std::vector<const Backend*>& backends,
                  const std::vector<std::pair<std::string, Case>>& cases, ShardCounter* shard,
                  CheckReport* report) {
  std::map<std::string, std::map<CheckStatus, int>> tallies;
  std::map<std::string, double> seconds;
  std::map<std::string, int> counted;
  for (const auto& [file, c] : cases) {
    std::optional<CaseRunner> runner;  // made for the first backend of this shard
    for (const Backend* backend : backends) {
      const std::optional<int64_t> ordinal = shard->Next();
      if (!ordinal.has_value()) continue;
      if (!runner.has_value()) runner.emplace(c);
      CheckItem item{std::string(backend->name()), "corpus", c.name};
      item.ordinal = *ordinal;
      item.tokens = c.geometry.total_tokens();
      ++counted[item.backend];
      const ExpectationEntry* entry = EntryFor(options, item.backend, CorpusTestName(c.name),
                                               c.geometry.dtype, c.data.distribution);
      if (!SkippedByExpectation(entry, &item)) {
        const auto start = std::chrono::steady_clock::now();
        const Outcome outcome = runner->Run(*backend);
        item.seconds = SecondsSince(start);
        switch (outcome.verdict) {
          case Verdict::kPass:
            item.status = CheckStatus::kPass;
            break;
          case Verdict::kUnsupported:
            item.status = CheckStatus::kUnsupported;
            item.message = std::string(outcome.unsupported.message());
            break;
          case Verdict::kFail:
            item.status = CheckStatus::kFail;
            item.message = FormatOutcomeText(c, file, outcome);
            item.picture = DrawPicture(options, item.backend, c.name, outcome);
            NoteFault(FaultOf(outcome.error), &item);
            break;
        }
        ApplyExpectation(options, entry, &item);
      }
      ++tallies[item.backend][item.status];
      seconds[item.backend] += item.seconds;
      report->items.push_back(std::move(item));
    }
  }
  if (!options.progress) return;
  for (const Backend* backend : backends) {
    const std::string name(backend->name());
    std::string counts;
    for (const auto& [status, count] : tallies[name]) {
      absl::StrAppend(&counts, counts.empty() ? "" : ", ", count, " ", CheckStatusName(status));
    }
    options.progress(absl::StrFormat("[%s] corpus: %d cases, %s (%.1f s)", name, counted[name],
                                     counts, seconds[name]));
  }
}

void RunProperties(const CheckOptions& options, const Backend& backend, ShardCounter* shard,
                   CheckReport* report) {
  for (const std::string& property : PropertyNames()) {
    const std::optional<int64_t> ordinal = shard->Next();
    if (!ordinal.has_value()) continue;
    CheckItem item{std::string(backend.name()), "property", property};
    item.ordinal = *ordinal;
    const std::string test = absl::StrCat("Conformance.", property);
    const ExpectationEntry* entry = EntryFor(options, item.backend, test, std::nullopt);
    if (SkippedByExpectation(entry, &item)) {
      if (options.progress) {
        options.progress(absl::StrFormat("[%s] %s: skipped", backend.name(), property));
      }
      report->items.push_back(std::move(item));
      continue;
    }
    PropertyRunOptions run;
    run.budget = ScaleBudget(BudgetFor(property, options.tier), options.budget_scale);
    run.stop_on_time = !options.counts_only;
    if (const Expectations* e = ExpectationsFor(options, item.backend); e != nullptr) {
      ApplySkipEntries(*e, test, backend, &run);
    }
    const std::string failures = (std::filesystem::path(options.report_dir) / "failures").string();
    if (!options.report_dir.empty()) {
      run.on_shrunk = [&](const PropertyRunResult& so_far) {
        (void)WriteShrunkCase(failures, backend.name(), property, options.tier, so_far);
      };
    }
    const PropertyRunResult result = RunProperty(property, backend, run);
    item.seconds = result.seconds;
    if (result.passed) {
      item.status = result.executed > 0 && result.unsupported == result.executed
                        ? CheckStatus::kUnsupported
                        : CheckStatus::kPass;
      if (item.status == CheckStatus::kUnsupported) {
        item.message = "supports none of the generated cases";
      }
    } else {
      item.status = CheckStatus::kFail;
      item.message = result.message;
      NoteFault(result.fault, &item);
      if (result.shrunk.has_value()) item.tokens = result.shrunk->geometry.total_tokens();
      if (result.shrunk.has_value() && !options.report_dir.empty()) {
        absl::StatusOr<std::string> path =
            WriteShrunkCase(failures, backend.name(), property, options.tier, result);
        if (path.ok()) {
          item.shrunk = *path;
          const auto command = options.repro_commands.find(item.backend);
          absl::StrAppend(&item.message, "\nshrunk case: ", *path, "\nreproduce: ",
                          command == options.repro_commands.end()
                              ? absl::StrCat("varlen repro ", *path, " --backend=", backend.name())
                              : absl::StrReplaceAll(command->second, {{"{file}", *path}}));
        }
        const Outcome outcome = RunCase(*result.shrunk, backend);
        item.picture = DrawPicture(options, item.backend, property, outcome);
      }
    }
    ApplyExpectation(options, entry, &item);
    if (options.progress) {
      options.progress(
          absl::StrFormat("[%s] %s: %s, %s%s", backend.name(), property,
                          CheckStatusName(item.status), DescribeRun(result),
                          item.shrunk.empty() ? "" : absl::StrCat(", shrunk case ", item.shrunk)));
    }
    report->items.push_back(std::move(item));
  }
}

}  // namespace

absl::StatusOr<CheckReport> RunCheck(const CheckOptions& options) {
  absl::Status status;
  std::vector<const Backend*> backends = ChooseBackends(options.backends, &status);
  VARLEN_RETURN_IF_ERROR(status);
  std::vector<std::unique_ptr<Backend>> isolated;
  for (const Backend*& backend : backends) {
    auto how = options.isolation.find(std::string(backend->name()));
    if (how == options.isolation.end()) how = options.isolation.find("*");
    if (how == options.isolation.end()) continue;
    isolated.push_back(Isolate(*backend, how->second));
    backend = isolated.back().get();
  }
  std::vector<std::pair<std::string, Case>> cases;
  if (!options.corpus_dir.empty()) {
    VARLEN_ASSIGN_OR_RETURN(std::vector<std::string> files, ListCaseFiles({options.corpus_dir}));
    for (const std::string& file : files) {
      VARLEN_ASSIGN_OR_RETURN(Case c, LoadCaseFile(file));
      cases.emplace_back(file, std::move(c));
    }
  }
  CheckReport report;
  report.tier = options.tier;
  report.shard = options.shard;
  for (const Backend* backend : backends) report.backends.emplace_back(backend->name());
  report.properties = PropertyNames();
  ShardCounter shard(options.shard);
  ReplayCorpus(options, backends, cases, &shard, &report);
  for (const Backend* backend : backends) RunProperties(options, *backend, &shard, &report);
  for (const Backend* backend : backends) {
    report.counters[std::string(backend->name())] = backend->counters();
  }
  if (!options.report_dir.empty()) {
    VARLEN_RETURN_IF_ERROR(WriteCheckReport(report, options.report_dir));
  }
  return report;
}

absl::Status WriteCheckReport(const CheckReport& report, const std::string& dir) {
  const std::filesystem::path path(dir);
  VARLEN_RETURN_IF_ERROR(WriteFile(path / "junit.xml", CheckJUnitXml(report)));
  VARLEN_RETURN_IF_ERROR(WriteFile(path / "matrix.md", CheckMatrixMarkdown(report)));
  return WriteFile(path / "report.json", CheckReportJson(report).dump(2) + "\n");
}

}  // namespace varlen
