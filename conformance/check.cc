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

void ReplayCorpus(const CheckOptions& options, const std::vector<const Backend*>& backends,
                  const std::vector<std::pair<std::string, Case>>& cases, CheckReport* report) {
  std::map<std::string, std::map<CheckStatus, int>> tallies;
  std::map<std::string, double> seconds;
  for (const auto& [file, c] : cases) {
    CaseRunner runner(c);
    for (const Backend* backend : backends) {
      CheckItem item{std::string(backend->name()), "corpus", c.name};
      const ExpectationEntry* entry = EntryFor(options, item.backend, CorpusTestName(c.name),
                                               c.geometry.dtype, c.data.distribution);
      if (!SkippedByExpectation(entry, &item)) {
        const auto start = std::chrono::steady_clock::now();
        const Outcome outcome = runner.Run(*backend);
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
    options.progress(absl::StrFormat("[%s] corpus: %d cases, %s (%.1f s)", name, cases.size(),
                                     counts, seconds[name]));
  }
}

void RunProperties(const CheckOptions& options, const Backend& backend, CheckReport* report) {
  for (const std::string& property : PropertyNames()) {
    CheckItem item{std::string(backend.name()), "property", property};
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

std::string CheckResultText(const CheckReport& report, const CheckOptions& options) {
  std::string text = CheckMatrixMarkdown(report);
  if (!options.report_dir.empty()) {
    absl::StrAppend(&text, "report: ", options.report_dir, "/junit.xml, ", options.report_dir,
                    "/matrix.md\n");
  }
  int failed = 0;
  for (const CheckItem& item : report.items) {
    if (item.status != CheckStatus::kFail) continue;
    ++failed;
    absl::StrAppend(&text, "\nFAIL ", item.backend, " ", item.kind, " ", item.name, "\n",
                    item.message, "\n");
  }
  absl::StrAppend(&text, "summary: ", report.items.size(), " checks on ", report.backends.size(),
                  " backends, tier ", TierName(options.tier), ": ", failed, " failed\n");
  return text;
}

namespace {

std::string XmlEscape(absl::string_view text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&apos;"}});
}

// Green (0) through yellow (1, the bound) to red (4 x the bound and more).
std::string CellColor(double ratio) {
  if (std::isinf(ratio)) return "#000000";
  const auto mix = [](double t, int a, int b) { return static_cast<int>(a + (b - a) * t); };
  if (ratio <= 1.0) {
    const double t = std::clamp(ratio, 0.0, 1.0);
    return absl::StrFormat("#%02x%02x%02x", mix(t, 0x2e, 0xf2), mix(t, 0x9e, 0xd3),
                           mix(t, 0x4f, 0x2c));
  }
  const double t = std::clamp((ratio - 1.0) / 3.0, 0.0, 1.0);
  return absl::StrFormat("#%02x%02x%02x", mix(t, 0xf2, 0xc0), mix(t, 0xd3, 0x1a),
                         mix(t, 0x2c, 0x1a));
}

}  // namespace

absl::string_view CheckStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kUnsupported:
      return "unsupported";
    case CheckStatus::kXFail:
      return "xfail";
    case CheckStatus::kXPass:
      return "xpass";
  }
  return "?";
}

bool CheckReport::passed() const {
  return std::none_of(items.begin(), items.end(),
                      [](const CheckItem& item) { return item.status == CheckStatus::kFail; });
}

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
  for (const Backend* backend : backends) report.backends.emplace_back(backend->name());
  report.properties = PropertyNames();
  ReplayCorpus(options, backends, cases, &report);
  for (const Backend* backend : backends) RunProperties(options, *backend, &report);
  for (const Backend* backend : backends) {
    report.counters[std::string(backend->name())] = backend->counters();
  }
  if (!options.report_dir.empty()) {
    const std::filesystem::path dir(options.report_dir);
    VARLEN_RETURN_IF_ERROR(WriteFile(dir / "junit.xml", CheckJUnitXml(report)));
    VARLEN_RETURN_IF_ERROR(WriteFile(dir / "matrix.md", CheckMatrixMarkdown(report)));
  }
  return report;
}

std::string CheckJUnitXml(const CheckReport& report) {
  std::string suites;
  int total = 0, failures = 0, skipped = 0;
  double total_seconds = 0;
  for (const std::string& backend : report.backends) {
    std::string cases;
    int tests = 0, failed = 0, unsupported = 0;
    double seconds = 0;
    for (const CheckItem& item : report.items) {
      if (item.backend != backend) continue;
      ++tests;
      seconds += item.seconds;
      absl::StrAppend(&cases, "    <testcase classname=\"", XmlEscape(backend), ".", item.kind,
                      "\" name=\"", XmlEscape(item.name), "\" time=\"",
                      absl::StrFormat("%.3f", item.seconds), "\"");
      if (item.status == CheckStatus::kPass) {
        absl::StrAppend(&cases, "/>\n");
        continue;
      }
      if (item.status == CheckStatus::kXPass) {  // passed; the note says what to do
        absl::StrAppend(&cases, ">\n      <system-out>", XmlEscape(item.message),
                        "</system-out>\n    </testcase>\n");
        continue;
      }
      const bool fail = item.status == CheckStatus::kFail;
      failed += fail;
      unsupported += !fail;  // unsupported, skipped and expected failures
      const std::string first_line = item.message.substr(0, item.message.find('\n'));
      absl::StrAppend(&cases, ">\n      <", fail ? "failure" : "skipped", " message=\"",
                      XmlEscape(first_line), "\">", XmlEscape(item.message), "</",
                      fail ? "failure" : "skipped", ">\n    </testcase>\n");
    }
    absl::StrAppend(&suites, "  <testsuite name=\"", XmlEscape(backend), "\" tests=\"", tests,
                    "\" failures=\"", failed, "\" skipped=\"", unsupported, "\" time=\"",
                    absl::StrFormat("%.3f", seconds), "\">\n", cases, "  </testsuite>\n");
    total += tests, failures += failed, skipped += unsupported, total_seconds += seconds;
  }
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                      "<testsuites name=\"varlen check\" tests=\"", total, "\" failures=\"",
                      failures, "\" skipped=\"", skipped, "\" time=\"",
                      absl::StrFormat("%.3f", total_seconds), "\">\n", suites, "</testsuites>\n");
}

std::string CheckMatrixMarkdown(const CheckReport& report) {
  std::string out = "| backend | corpus |";
  std::string rule = "|---|---|";
  for (const std::string& property : report.properties) {
    absl::StrAppend(&out, " ", property, " |");
    absl::StrAppend(&rule, "---|");
  }
  absl::StrAppend(&out, "\n", rule, "\n");
  for (const std::string& backend : report.backends) {
    std::map<CheckStatus, int> corpus;
    std::map<std::string, std::string> cells;
    for (const CheckItem& item : report.items) {
      if (item.backend != backend) continue;
      if (item.kind == "corpus") {
        ++corpus[item.status];
      } else {
        cells[item.name] = item.status == CheckStatus::kFail
                               ? "**FAIL**"
                               : std::string(CheckStatusName(item.status));
      }
    }
    std::string counts;
    for (const auto& [status, count] : corpus) {
      const std::string cell = absl::StrCat(count, " ", CheckStatusName(status));
      absl::StrAppend(&counts, counts.empty() ? "" : ", ",
                      status == CheckStatus::kFail ? absl::StrCat("**", cell, "**") : cell);
    }
    absl::StrAppend(&out, "| ", backend, " | ", counts, " |");
    for (const std::string& property : report.properties) {
      absl::StrAppend(&out, " ", cells.count(property) ? cells[property] : "-", " |");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string ErrorPictureSvg(const std::string& title, const NumericReport& report) {
  const int64_t heads = std::max<int64_t>(report.heads, 1);
  const int64_t sequences = static_cast<int64_t>(report.per_sequence_head_max_error.size()) / heads;
  constexpr int kCell = 14, kLeft = 90, kTop = 56;
  const int64_t shown = std::min<int64_t>(sequences, 512);  // a picture, not a dump
  const int64_t width = kLeft + heads * kCell + 20, height = kTop + shown * kCell + 40;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"4\" y=\"16\" font-size=\"13\">%s</text>\n"
      "<text x=\"4\" y=\"32\">largest |error| per sequence x head, in units of the bound %.3g "
      "(green within, red beyond, black: unwritten or wrong NaN/Inf)</text>\n"
      "<text x=\"%d\" y=\"%d\">heads -&gt;</text>\n",
      width, height, XmlEscape(title), report.bound, kLeft, kTop - 6);
  for (int64_t s = 0; s < shown; ++s) {
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"4\" y=\"%d\">sequence %d</text>\n",
                                          kTop + s * kCell + 11, s));
    for (int64_t h = 0; h < heads; ++h) {
      const double error = report.per_sequence_head_max_error[s * heads + h];
      const double ratio = report.bound > 0 ? error / report.bound : (error > 0 ? 1e9 : 0);
      absl::StrAppend(
          &svg, absl::StrFormat("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\">"
                                "<title>sequence %d head %d: %s</title></rect>\n",
                                kLeft + h * kCell, kTop + s * kCell, kCell - 1, kCell - 1,
                                CellColor(ratio), s, h,
                                std::isinf(error)
                                    ? std::string("unwritten or wrong NaN/Inf")
                                    : absl::StrFormat("%.3g (%.2f x bound)", error, ratio)));
    }
  }
  if (shown < sequences) {
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"4\" y=\"%d\">... %d more sequences</text>\n",
                                          kTop + shown * kCell + 16, sequences - shown));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace varlen
