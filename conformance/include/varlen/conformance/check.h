// File: varlen/conformance/check.h
// -----------------------------------------------------------------------------
//
// The main job, `varlen check`: the regression corpus and the generated
// properties on every chosen backend, with reports that a CI system and a
// person can read:
//
//   DIR/junit.xml        one testsuite per backend, one testcase per corpus
//                        case and per property
//   DIR/matrix.md        backend x (corpus, each property): pass, fail,
//                        unsupported, xfail, xpass
//   DIR/pictures/*.svg   for each failing case with numbers, its largest
//                        error per sequence x head, in units of the bound
//   DIR/failures/*.json  the shrunk case of each failing property
//   DIR/report.json      all of it, for `varlen report --merge` to join the
//                        reports of a sharded run into the unsharded one
//
// A run can be split into shards, as GoogleTest's are (GTEST_TOTAL_SHARDS,
// GTEST_SHARD_INDEX): each check (a backend's corpus case, a backend's
// property) belongs to one shard, so the shards of a CI matrix or a job
// array together run every check once, and their merged report is the
// unsharded run's.
//
// Example:
//   CheckOptions options;
//   options.corpus_dir = "corpus/regressions";
//   options.report_dir = "check-report";
//   absl::StatusOr<CheckReport> report = RunCheck(options);

#ifndef VARLEN_CONFORMANCE_CHECK_H_
#define VARLEN_CONFORMANCE_CHECK_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "varlen/cases/numerics.h"
#include "varlen/conformance/expectations.h"
#include "varlen/conformance/suite.h"
#include "varlen/run/isolation.h"
#include "varlen/run/shard.h"

namespace varlen {

struct CheckOptions {
  std::vector<std::string> backends;  // empty: every available registered backend
  std::string corpus_dir;             // empty: no corpus replay
  Tier tier = Tier::kSmoke;
  // Multiplies the tier's case counts and time budgets (ScaleBudget): below
  // 1 for slow backends (an interpreter), above for a long run.
  double budget_scale = 1.0;
  std::string report_dir;  // empty: no files
  // Known gaps (expectations.h), matched by the suite's test names
  // (Corpus.<case>, Conformance.<property>); a backend gets the first
  // manifest that applies to it. A failure it expects is XFAIL; an
  // unexpected pass is XPASS, a failure when strict.
  std::vector<std::shared_ptr<const Expectations>> expectations;
  // One line per finished step (a backend's corpus, a property), for a
  // terminal.
  std::function<void(const std::string& line)> progress;
  // How a failure's shrunk case is replayed, per backend, "{file}" standing
  // for the case file; unlisted: "varlen repro {file} --backend=<name>".
  std::map<std::string, std::string> repro_commands;
  // How each backend runs in worker processes (varlen/run/isolation.h), so
  // that a crash or a hang is a failing case and the run goes on: by the
  // backend's name, "*" for those not named. A backend with neither runs in
  // this process.
  std::map<std::string, IsolationOptions> isolation;
  Shard shard;
  // Counts, not time, bound each property's generation
  // (PropertyRunOptions::stop_on_time): the same checks on a fast machine
  // and a slow one, as the shards of a run need to add up to it.
  bool counts_only = false;
};

enum class CheckStatus {
  kPass,
  kFail,
  kUnsupported,  // or skipped by an expectation
  kXFail,        // failed as the expectations manifest says (or a tolerated flaky failure)
  kXPass,        // passed although expected to fail (a failure in a strict manifest)
};

absl::string_view CheckStatusName(CheckStatus status);  // "pass", "FAIL", ..., "xpass"

struct CheckItem {
  std::string backend;
  std::string kind;  // "corpus" or "property"
  std::string name;  // the case's name or the property's
  CheckStatus status = CheckStatus::kPass;
  double seconds = 0;
  std::string message = {};  // the full report of a failure, why unsupported, the expectation
  std::string picture = {};  // path of its error picture, when one was drawn
  std::string shrunk = {};   // path of the shrunk case of a failing property
  // When the failure was a fault of the backend (varlen/backend/fault.h):
  // its kind ("CRASH", ...) and the signature that groups its repeats.
  std::string fault = {};
  std::string fault_signature = {};
  int64_t ordinal = 0;  // its place in the unsharded run's order
  // The query tokens of its case (of a failing property's shrunk case; -1
  // when there is none): a fault group lists its smallest cases first.
  int64_t tokens = -1;
};

struct CheckReport {
  Tier tier = Tier::kSmoke;
  Shard shard;  // after a merge: {0, 1}
  std::vector<std::string> backends;
  // Per backend, what it counted (BackendCounter), the supervisor's counts
  // (workers_started, crash, timeout, ...) among them when isolated.
  std::map<std::string, std::vector<BackendCounter>> counters;
  std::vector<std::string> properties;
  std::vector<CheckItem> items;
  bool passed() const;
};

// Runs everything, writing the report files as it goes. Errors: an unknown
// backend, an invalid case file, an unwritable report folder.
absl::StatusOr<CheckReport> RunCheck(const CheckOptions& options);

// The report as DIR/report.json holds it, and back. Parse errors name the
// field and what it should be.
nlohmann::ordered_json CheckReportJson(const CheckReport& report);
absl::StatusOr<CheckReport> ParseCheckReportJson(const nlohmann::ordered_json& json);

// Reads DIR/report.json (or the file itself, when given one).
absl::StatusOr<CheckReport> ReadCheckReport(const std::string& dir_or_file);

// Joins the reports of one run's shards into the report of the unsharded
// run: every check once, in the run's order, counters added up. Errors:
// shards of different runs (tier, total, backends), one shard twice, a
// shard missing.
absl::StatusOr<CheckReport> MergeCheckReports(const std::vector<CheckReport>& shards);

// Writes junit.xml, matrix.md and report.json under `dir`.
absl::Status WriteCheckReport(const CheckReport& report, const std::string& dir);

// The faults among the failures, grouped by signature, most frequent first:
// "  12 x CRASH: signal 11 (SIGSEGV) at Kernel() k.cc:40 [fault_backend]: case-a, ...".
std::vector<std::string> FaultGroupLines(const CheckReport& report);

std::string CheckJUnitXml(const CheckReport& report);
std::string CheckMatrixMarkdown(const CheckReport& report);

// What `varlen check` prints when it is done: the matrix, where the report
// went, each failure in full, and the summary line.
std::string CheckResultText(const CheckReport& report, const CheckOptions& options);

// An SVG heat map of report.per_sequence_head_max_error / report.bound:
// sequences down, heads across; green within the bound, red beyond it,
// black where an element was unwritten or wrongly (non-)finite.
std::string ErrorPictureSvg(const std::string& title, const NumericReport& report);

}  // namespace varlen

#endif  // VARLEN_CONFORMANCE_CHECK_H_
