// The reports of `varlen check`: its text, JUnit XML, the markdown matrix,
// the error pictures, report.json, and the merge of a sharded run's
// reports into the unsharded one's.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "varlen/conformance/check.h"
#include "varlen/core/status.h"

namespace varlen {
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

constexpr char kReportFormat[] = "varlen-check-report";
constexpr int kReportVersion = 1;
constexpr CheckStatus kAllStatuses[] = {CheckStatus::kPass, CheckStatus::kFail,
                                        CheckStatus::kUnsupported, CheckStatus::kXFail,
                                        CheckStatus::kXPass};

// report.json's field `key` of `json`, as T; the error names the field.
template <typename T>
absl::StatusOr<T> Field(const nlohmann::ordered_json& json, const char* key,
                        absl::string_view where) {
  if (!json.is_object() || !json.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no field \"", key, "\""));
  }
  try {
    return json.at(key).get<T>();
  } catch (const nlohmann::ordered_json::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": field \"", key, "\" is ",
                                                   json.at(key).type_name(),
                                                   ", not the type it "
                                                   "must be"));
  }
}

absl::StatusOr<CheckStatus> ParseCheckStatus(absl::string_view name) {
  for (CheckStatus status : kAllStatuses) {
    if (CheckStatusName(status) == name) return status;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("status \"", name, "\" is none of pass, FAIL, unsupported, xfail, xpass"));
}

// Failing items with a fault, grouped by backend and signature.
struct FaultGroup {
  std::string backend;
  std::string signature;
  std::vector<const CheckItem*> items;
};

std::vector<FaultGroup> GroupFaults(const CheckReport& report) {
  std::map<std::pair<std::string, std::string>, FaultGroup> groups;
  for (const CheckItem& item : report.items) {
    if (item.status != CheckStatus::kFail || item.fault.empty()) continue;
    FaultGroup& group = groups[{item.backend, item.fault_signature}];
    group.backend = item.backend;
    group.signature = item.fault_signature;
    group.items.push_back(&item);
  }
  // Smallest cases first (those of unknown size last), then in run order.
  const auto smaller = [](const CheckItem* a, const CheckItem* b) {
    return static_cast<uint64_t>(a->tokens) < static_cast<uint64_t>(b->tokens);
  };
  std::vector<FaultGroup> sorted;
  for (auto& [key, group] : groups) {
    std::stable_sort(group.items.begin(), group.items.end(), smaller);
    sorted.push_back(std::move(group));
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const FaultGroup& a, const FaultGroup& b) {
    return a.items.size() > b.items.size();
  });
  return sorted;
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

std::vector<std::string> FaultGroupLines(const CheckReport& report) {
  std::vector<std::string> lines;
  for (const FaultGroup& group : GroupFaults(report)) {
    std::vector<std::string> names;
    for (const CheckItem* item : group.items) {
      if (names.size() == 3) break;
      names.push_back(item->shrunk.empty() ? item->name : item->shrunk);
    }
    const size_t more = group.items.size() - names.size();
    lines.push_back(absl::StrCat("  ", group.items.size(), " x ", group.signature, " [",
                                 group.backend, "]: ", absl::StrJoin(names, ", "),
                                 more > 0 ? absl::StrCat(" (+", more, " more)") : ""));
  }
  return lines;
}

std::string CheckResultText(const CheckReport& report, const CheckOptions& options) {
  std::string text = CheckMatrixMarkdown(report);
  if (!options.report_dir.empty()) {
    absl::StrAppend(&text, "report: ", options.report_dir, "/junit.xml, ", options.report_dir,
                    "/matrix.md, ", options.report_dir, "/report.json\n");
  }
  int failed = 0;
  std::map<std::string, int> faults;
  for (const CheckItem& item : report.items) {
    if (item.status != CheckStatus::kFail) continue;
    ++failed;
    if (!item.fault.empty()) ++faults[item.fault];
    absl::StrAppend(&text, "\nFAIL ", item.backend, " ", item.kind, " ", item.name, "\n",
                    item.message, "\n");
  }
  if (const std::vector<std::string> groups = FaultGroupLines(report); !groups.empty()) {
    absl::StrAppend(&text, "\nfaults of the backends, by signature:\n", absl::StrJoin(groups, "\n"),
                    "\n");
  }
  std::string of_them;
  for (const auto& [kind, count] : faults) {
    absl::StrAppend(&of_them, of_them.empty() ? " (" : ", ", count, " ", kind);
  }
  if (!of_them.empty()) absl::StrAppend(&of_them, ")");
  absl::StrAppend(&text, "summary: ", report.items.size(), " checks on ", report.backends.size(),
                  " backends, tier ", TierName(report.tier),
                  report.shard.total > 1
                      ? absl::StrCat(", shard ", report.shard.index, " of ", report.shard.total)
                      : "",
                  ": ", failed, " failed", of_them, "\n");
  return text;
}

nlohmann::ordered_json CheckReportJson(const CheckReport& report) {
  nlohmann::ordered_json counters = nlohmann::ordered_json::object();
  for (const auto& [backend, values] : report.counters) {
    counters[backend] = nlohmann::ordered_json::object();
    for (const BackendCounter& counter : values) counters[backend][counter.name] = counter.value;
  }
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  for (const CheckItem& item : report.items) {
    items.push_back({{"ordinal", item.ordinal},
                     {"backend", item.backend},
                     {"kind", item.kind},
                     {"name", item.name},
                     {"status", CheckStatusName(item.status)},
                     {"seconds", item.seconds},
                     {"message", item.message},
                     {"picture", item.picture},
                     {"shrunk", item.shrunk},
                     {"fault", item.fault},
                     {"fault_signature", item.fault_signature},
                     {"tokens", item.tokens}});
  }
  return {{"format", kReportFormat},
          {"version", kReportVersion},
          {"tier", TierName(report.tier)},
          {"shard", {{"index", report.shard.index}, {"total", report.shard.total}}},
          {"backends", report.backends},
          {"properties", report.properties},
          {"counters", counters},
          {"items", items}};
}

absl::StatusOr<CheckReport> ParseCheckReportJson(const nlohmann::ordered_json& json) {
  CheckReport report;
  VARLEN_ASSIGN_OR_RETURN(std::string format, Field<std::string>(json, "format", "report"));
  VARLEN_ASSIGN_OR_RETURN(int version, Field<int>(json, "version", "report"));
  if (format != kReportFormat || version != kReportVersion) {
    return absl::InvalidArgumentError(absl::StrCat("report: format \"", format, "\" version ",
                                                   version, " is not ", kReportFormat, " version ",
                                                   kReportVersion));
  }
  VARLEN_ASSIGN_OR_RETURN(std::string tier, Field<std::string>(json, "tier", "report"));
  VARLEN_ASSIGN_OR_RETURN(report.tier, ParseTier(tier));
  VARLEN_ASSIGN_OR_RETURN(nlohmann::ordered_json shard,
                          Field<nlohmann::ordered_json>(json, "shard", "report"));
  VARLEN_ASSIGN_OR_RETURN(report.shard.index, Field<int>(shard, "index", "report shard"));
  VARLEN_ASSIGN_OR_RETURN(report.shard.total, Field<int>(shard, "total", "report shard"));
  VARLEN_ASSIGN_OR_RETURN(report.backends,
                          Field<std::vector<std::string>>(json, "backends", "report"));
  VARLEN_ASSIGN_OR_RETURN(report.properties,
                          Field<std::vector<std::string>>(json, "properties", "report"));
  VARLEN_ASSIGN_OR_RETURN(nlohmann::ordered_json counters,
                          Field<nlohmann::ordered_json>(json, "counters", "report"));
  for (const auto& [backend, values] : counters.items()) {
    if (!values.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("report: counters of ", backend, " are not an object of name: count"));
    }
    for (const auto& [name, value] : values.items()) {
      if (!value.is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat("report: counter ", backend, ".", name, " is not a whole number"));
      }
      report.counters[backend].push_back({name, value.get<int64_t>()});
    }
  }
  VARLEN_ASSIGN_OR_RETURN(std::vector<nlohmann::ordered_json> items,
                          Field<std::vector<nlohmann::ordered_json>>(json, "items", "report"));
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string where = absl::StrCat("report item ", i);
    CheckItem item;
    VARLEN_ASSIGN_OR_RETURN(item.ordinal, Field<int64_t>(items[i], "ordinal", where));
    VARLEN_ASSIGN_OR_RETURN(item.backend, Field<std::string>(items[i], "backend", where));
    VARLEN_ASSIGN_OR_RETURN(item.kind, Field<std::string>(items[i], "kind", where));
    VARLEN_ASSIGN_OR_RETURN(item.name, Field<std::string>(items[i], "name", where));
    VARLEN_ASSIGN_OR_RETURN(std::string status, Field<std::string>(items[i], "status", where));
    VARLEN_ASSIGN_OR_RETURN(item.status, ParseCheckStatus(status));
    VARLEN_ASSIGN_OR_RETURN(item.seconds, Field<double>(items[i], "seconds", where));
    VARLEN_ASSIGN_OR_RETURN(item.message, Field<std::string>(items[i], "message", where));
    VARLEN_ASSIGN_OR_RETURN(item.picture, Field<std::string>(items[i], "picture", where));
    VARLEN_ASSIGN_OR_RETURN(item.shrunk, Field<std::string>(items[i], "shrunk", where));
    VARLEN_ASSIGN_OR_RETURN(item.fault, Field<std::string>(items[i], "fault", where));
    VARLEN_ASSIGN_OR_RETURN(item.fault_signature,
                            Field<std::string>(items[i], "fault_signature", where));
    VARLEN_ASSIGN_OR_RETURN(item.tokens, Field<int64_t>(items[i], "tokens", where));
    report.items.push_back(std::move(item));
  }
  return report;
}

absl::StatusOr<CheckReport> ReadCheckReport(const std::string& dir_or_file) {
  std::filesystem::path path(dir_or_file);
  if (std::filesystem::is_directory(path)) path /= "report.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot read the report"));
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not JSON"));
  }
  absl::StatusOr<CheckReport> report = ParseCheckReportJson(json);
  if (!report.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", report.status().message()));
  }
  return report;
}

absl::StatusOr<CheckReport> MergeCheckReports(const std::vector<CheckReport>& shards) {
  if (shards.empty()) return absl::InvalidArgumentError("no shard reports to merge");
  const CheckReport& first = shards.front();
  CheckReport merged;
  merged.tier = first.tier;
  merged.backends = first.backends;
  merged.properties = first.properties;
  std::set<int> indexes;
  for (const CheckReport& shard : shards) {
    if (shard.tier != first.tier || shard.shard.total != first.shard.total ||
        shard.backends != first.backends || shard.properties != first.properties) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", shard.shard.index, " of ", shard.shard.total, " (tier ", TierName(shard.tier),
          ", backends ", absl::StrJoin(shard.backends, ","), ") is not of the same run as shard ",
          first.shard.index, " of ", first.shard.total, " (tier ", TierName(first.tier),
          ", backends ", absl::StrJoin(first.backends, ","), ")"));
    }
    if (!indexes.insert(shard.shard.index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", shard.shard.index, " of ", shard.shard.total, " is given twice"));
    }
    merged.items.insert(merged.items.end(), shard.items.begin(), shard.items.end());
    for (const auto& [backend, values] : shard.counters) {
      std::vector<BackendCounter>& sum = merged.counters[backend];
      for (const BackendCounter& counter : values) {
        auto same = std::find_if(sum.begin(), sum.end(),
                                 [&](const BackendCounter& c) { return c.name == counter.name; });
        if (same == sum.end()) {
          sum.push_back(counter);
        } else {
          same->value += counter.value;
        }
      }
    }
  }
  for (int index = 0; index < first.shard.total; ++index) {
    if (indexes.count(index) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", index, " of ", first.shard.total, " is missing"));
    }
  }
  std::stable_sort(merged.items.begin(), merged.items.end(),
                   [](const CheckItem& a, const CheckItem& b) { return a.ordinal < b.ordinal; });
  for (size_t i = 1; i < merged.items.size(); ++i) {
    if (merged.items[i].ordinal == merged.items[i - 1].ordinal) {
      return absl::InvalidArgumentError(
          absl::StrCat("check ", merged.items[i].ordinal, " (", merged.items[i].name,
                       ") is in two shards: the reports were not made with the same shard count"));
    }
  }
  return merged;
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
      const std::string type =
          item.fault.empty() ? "" : absl::StrCat(" type=\"", XmlEscape(item.fault), "\"");
      absl::StrAppend(&cases, ">\n      <", fail ? "failure" : "skipped", " message=\"",
                      XmlEscape(first_line), "\"", type, ">", XmlEscape(item.message), "</",
                      fail ? "failure" : "skipped", ">\n    </testcase>\n");
    }
    // What the supervisor counted (workers started, faults by kind).
    std::string properties;
    if (const auto counted = report.counters.find(backend); counted != report.counters.end()) {
      for (const BackendCounter& counter : counted->second) {
        absl::StrAppend(&properties, "      <property name=\"", XmlEscape(counter.name),
                        "\" value=\"", counter.value, "\"/>\n");
      }
    }
    if (!properties.empty())
      properties = absl::StrCat("    <properties>\n", properties, "    </properties>\n");
    absl::StrAppend(&suites, "  <testsuite name=\"", XmlEscape(backend), "\" tests=\"", tests,
                    "\" failures=\"", failed, "\" skipped=\"", unsupported, "\" time=\"",
                    absl::StrFormat("%.3f", seconds), "\">\n", properties, cases,
                    "  </testsuite>\n");
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
  if (const std::vector<std::string> groups = FaultGroupLines(report); !groups.empty()) {
    absl::StrAppend(&out,
                    "\nFaults of the backends, by signature (count, signature, backend, "
                    "smallest cases):\n\n");
    for (const std::string& line : groups) {
      absl::StrAppend(&out, "- ", absl::StripLeadingAsciiWhitespace(line), "\n");
    }
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
