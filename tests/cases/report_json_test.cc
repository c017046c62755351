// The JSON report agrees with the text report: every line `varlen repro`
// prints has its counterpart in OutcomeToJson, with the same facts, on every
// corpus case (on the float64 oracle) and on a call-level backend. A new text
// line without a JSON field fails here.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"

namespace varlen {
namespace {

// The geometry line's variant, from the JSON report's window and sinks.
std::string VariantText(int64_t left, int64_t right, bool sinks) {
  std::string text = left < 0 && right == 0    ? ", causal"
                     : left >= 0 || right >= 0 ? absl::StrCat(", window (", left, ", ", right, ")")
                                               : (sinks ? ", full attention" : "");
  return sinks ? absl::StrCat(text, " + sinks") : text;
}

using json = nlohmann::json;

std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// The text report's counts line, rebuilt from the JSON counts.
std::string CountsLine(const json& counts) {
  return absl::StrCat(
      Plural(counts["host_syncs"], "host sync", "host syncs"), ", ",
      Plural(counts["host_to_device_copies"], "host-to-device copy", "host-to-device copies"), ", ",
      Plural(counts["device_to_host_copies"], "device-to-host copy", "device-to-host copies"), ", ",
      Plural(counts["casts"], "cast", "casts"));
}

// "  label:      value" -> (label, value); false for any other line.
bool SplitLabelled(const std::string& line, std::string* label, std::string* value) {
  if (line.size() < 4 || line.substr(0, 2) != "  " || line[2] == ' ') return false;
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon > 13) return false;
  *label = line.substr(2, colon - 2);
  for (char ch : *label) {
    if (ch < 'a' || ch > 'z') return false;
  }
  const size_t start = line.find_first_not_of(' ', colon + 1);
  *value = start == std::string::npos ? "" : line.substr(start);
  return true;
}

std::string Str(const json& j) { return j.get<std::string>(); }

// The lines after lines[*i] up to the next labelled field, joined: a
// field's value that spans lines (a Python error). Advances *i past them.
std::string Continuation(const std::vector<std::string>& lines, size_t* i) {
  std::vector<std::string> more;
  std::string label, value;
  while (*i + 1 < lines.size() && !SplitLabelled(lines[*i + 1], &label, &value)) {
    more.push_back(lines[++*i]);
  }
  return absl::StrJoin(more, "\n");
}

// Checks every line of `text` against `j`; records the labels it met.
void ExpectAgreement(const std::string& text, const json& j, std::set<std::string>* labels) {
  ASSERT_EQ(j["schema"], kOutcomeJsonSchema);
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  ASSERT_FALSE(lines.empty());
  ASSERT_EQ(lines.back(), "");  // the block ends with a newline
  lines.pop_back();
  EXPECT_EQ(lines[0], absl::StrCat("case ", Str(j["case"]), "  (", Str(j["file"]), ")"));
  size_t note = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::string label, value;
    if (!SplitLabelled(line, &label, &value)) {
      ADD_FAILURE() << "a text line outside any labelled field: " << line;
      continue;
    }
    labels->insert(label);
    if (label == "source") {
      EXPECT_EQ(value, Str(j["source"]));
    } else if (label == "about") {
      EXPECT_EQ(value, Str(j["description"]));
    } else if (label == "call") {
      const json& call = j["call"];
      EXPECT_TRUE(absl::StartsWith(value, absl::StrCat(Str(j["profile"]), " ", Str(j["mode"]))))
          << value;
      EXPECT_THAT(value, ::testing::HasSubstr(absl::StrCat(", ", Str(call["entry"]))));
      EXPECT_EQ(absl::StrContains(value, "cuda-graph mode"), call["graph_mode"].get<bool>());
      EXPECT_EQ(absl::StrContains(value, ", layout " + Str(call["layout"])),
                Str(call["layout"]) != "packed");
      EXPECT_EQ(absl::StrContains(value, ", rotary"), call["rotary"].get<bool>());
      EXPECT_EQ(absl::StrContains(value, ", windows (window_size "), call.contains("windows"));
      if (call.contains("windows")) {
        const json& w = call["windows"];
        EXPECT_THAT(value,
                    ::testing::HasSubstr(absl::StrCat(
                        ", windows (window_size ", w["window_size"].get<int64_t>(), ", patch_size ",
                        w["patch_size"].get<int64_t>(), ", spatial_merge_size ",
                        w["spatial_merge_size"].get<int64_t>(), ")")));
      }
      EXPECT_TRUE(absl::EndsWith(value, ", backend " + Str(j["backend"]))) << value;
      if (Str(j["mode"]) == "faithful") {
        EXPECT_THAT(value, ::testing::HasSubstr(Str(j[Str(j["engine"])])));
      }
    } else if (label == "geometry") {
      const json& g = j["geometry"];
      const std::vector<int64_t> lens = g["seq_lens"];
      const std::vector<int64_t> padding = g["padding"];
      int64_t tokens = 0;
      for (int64_t n : lens) tokens += n;
      for (int64_t n : padding) tokens += n;
      EXPECT_EQ(value,
                absl::StrCat(
                    "seq_lens ",
                    lens.size() > 16 ? absl::StrCat(lens.size(), " sequences, ", tokens, " tokens")
                                     : absl::StrCat("[", absl::StrJoin(lens, ", "), "]"),
                    ", heads ", g["num_heads"].get<int64_t>(), "/",
                    g["num_kv_heads"].get<int64_t>(), ", head_dim ", g["head_dim"].get<int64_t>(),
                    "/", g["head_dim_v"].get<int64_t>(), ", ", Str(g["dtype"]),
                    VariantText(g["window"][0], g["window"][1], !g["sinks"].empty()),
                    padding.empty() ? ""
                                    : absl::StrCat(", padding rows [", absl::StrJoin(padding, ", "),
                                                   "] (before, between and after the sequences)")));
    } else if (label == "data") {
      const json& data = j["data"];
      if (data.contains("files")) {
        const json& files = data["files"];
        EXPECT_EQ(value,
                  absl::StrCat("q, k, v from ", Str(files["q"]), ", ", Str(files["k"]), ", ",
                               Str(files["v"]), data["read"].get<bool>() ? "" : " (not read)"));
      } else {
        EXPECT_EQ(value, absl::StrCat("seed ", data["seed"].get<uint64_t>(), ", ",
                                      Str(data["distribution"]), " values"));
      }
    } else if (label == "platform") {
      EXPECT_EQ(value, Str(j["platform"]));
    } else if (label == "passed") {
      EXPECT_EQ(value, Str(j["call"]["passed"]));
    } else if (label == "warmup") {
      const json& warmups = j["warmup"];
      EXPECT_TRUE(absl::StartsWith(
          value, Plural(static_cast<int64_t>(warmups.size()), "call", "calls") + " first"));
      for (size_t w = 0; w < warmups.size(); ++w) {
        ASSERT_LT(i + 1, lines.size());
        const std::string& entry = lines[++i];
        EXPECT_TRUE(absl::StartsWith(entry, absl::StrCat("    [", w, "] "))) << entry;
        EXPECT_TRUE(absl::EndsWith(entry, absl::StrCat(": ", Str(warmups[w]["verdict"]), ", ",
                                                       Str(warmups[w]["summary"]))))
            << entry;
        if (warmups[w].contains("error")) {
          ASSERT_LT(i + 1, lines.size());
          EXPECT_EQ(lines[++i], "        " + Str(warmups[w]["error"]));
        }
      }
    } else if (label == "builder") {
      EXPECT_EQ(value, CountsLine(j["builder_device_events"]));
    } else if (label == "resolution") {
      ASSERT_LT(note, j["notes"].size());
      EXPECT_EQ(value, Str(j["notes"][note++]));
    } else if (label == "unread") {
      const std::vector<std::string> keys = j["unread_keywords"];
      EXPECT_EQ(value, absl::StrCat(absl::StrJoin(keys, ", "),
                                    " (passed, never read: they change nothing)"));
    } else if (label == "device") {
      const json& events = j["device_events"];
      EXPECT_EQ(value, CountsLine(events));
      for (const json& e : events["events"]) {
        ASSERT_LT(i + 1, lines.size());
        EXPECT_EQ(lines[++i], absl::StrCat("              ", Str(e["kind"]), ": ", Str(e["what"])));
      }
    } else if (label == "resolved") {
      EXPECT_TRUE(j.contains("resolved"));
    } else if (label == "kernel") {
      EXPECT_EQ(value, Str(j["kernel"]));
    } else if (label == "predicted") {
      EXPECT_EQ(value, absl::StrCat(Str(j["engine_call"]["predicted"]), " (faithful mode, ",
                                    Str(j["engine_call"]["judged_against"]), ")"));
    } else if (label == "engine") {
      EXPECT_EQ(value, "forward " + Str(j["engine_call"]["forward"]));
    } else if (label == "observed") {
      EXPECT_EQ(value, CountsLine(j["engine_call"]["observed_device_events"]));
    } else if (label == "numerics") {
      EXPECT_EQ(value, Str(j["numerics"]["summary"]));
    } else if (label == "outcome") {
      EXPECT_EQ(value, Str(j["outcome"]));
      // The Python error, as Python prints it (the dispatcher's spans lines).
      const std::string error = Continuation(lines, &i);
      if (!error.empty()) {
        EXPECT_EQ(error, Str(j["error"]["text"]));
        EXPECT_FALSE(j.contains("fault"));
      }
    } else if (label == "expected") {
      std::string expected = value;
      if (const std::string more = Continuation(lines, &i); !more.empty()) {
        absl::StrAppend(&expected, "\n", more);
      }
      EXPECT_EQ(expected, Str(j["expected"]));
    } else if (label == "verdict") {
      EXPECT_EQ(value, Str(j["verdict"]));
      std::vector<std::string> mismatches;
      while (i + 1 < lines.size()) mismatches.push_back(lines[++i]);
      std::vector<std::string> want;
      for (const json& m : j["mismatches"]) want.push_back("    - " + Str(m));
      EXPECT_EQ(mismatches, want);
    } else {
      ADD_FAILURE() << "a text line without a JSON counterpart: " << line;
    }
  }
  EXPECT_EQ(note, j.contains("notes") ? j["notes"].size() : 0u);
}

void ExpectAgreement(const Case& c, const std::string& origin, const Backend& backend,
                     std::set<std::string>* labels) {
  SCOPED_TRACE(origin);
  const Outcome o = RunCase(c, backend);
  ExpectAgreement(FormatOutcomeText(c, origin, o), json::parse(OutcomeToJson(c, origin, o).dump()),
                  labels);
}

TEST(ReportJsonTest, AgreesWithTheTextReportOnEveryCorpusCase) {
  const absl::StatusOr<std::vector<std::string>> files = ListCaseFiles({VARLEN_TEST_CORPUS_DIR});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_GT(files->size(), 100u);
  const Backend* oracle = FindBackend("cpu_reference");
  ASSERT_NE(oracle, nullptr);
  std::set<std::string> labels;
  for (const std::string& file : *files) {
    const absl::StatusOr<Case> c = LoadCaseFile(file);
    ASSERT_TRUE(c.ok()) << c.status();
    ExpectAgreement(*c, file, *oracle, &labels);
  }
  // The corpus reaches every field of a kernel-level run.
  for (const char* label : {"source", "about", "call", "geometry", "data", "platform", "passed",
                            "warmup", "builder", "resolution", "unread", "device", "resolved",
                            "kernel", "numerics", "outcome", "expected", "verdict"}) {
    EXPECT_TRUE(labels.count(label)) << "no corpus case shows the " << label << " line";
  }
}

// An engine's own backend class that raises what faithful mode predicts for
// a call without sequence_lengths, and counts no device events.
class RaisingEngineBackend final : public Backend {
 public:
  absl::string_view name() const override { return "raising_engine"; }
  absl::string_view description() const override { return "a call-level backend that raises"; }
  BackendCapabilities capabilities() const override { return {}; }
  absl::Status Available() const override { return absl::OkStatus(); }
  absl::Status Supports(const VarlenAttentionParams&) const override { return absl::OkStatus(); }
  absl::Status Run(const VarlenAttentionParams&) const override {
    return absl::InternalError("a call-level backend is never run at kernel level");
  }
  bool call_level() const override { return true; }
  absl::StatusOr<EngineCallResult> CallEngine(const AttentionCall&, Profile) const override {
    EngineCallResult result;
    result.raised_type = "RuntimeError";
    result.raised_message =
        "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend";
    result.device_events = DeviceEventCounts{};
    return result;
  }
};

TEST(ReportJsonTest, AgreesWithTheTextReportOnACallLevelRun) {
  const absl::StatusOr<Case> c = ParseCase(R"({
    "name": "call-level", "source": "test", "mode": "faithful",
    "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": 16, "dtype": "bfloat16"},
    "call": {"profile": "flashinfer_cudnn",
             "cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32", "device": "cuda"},
             "kwargs": {"max_seqlen": 5}}})",
                                           "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  std::set<std::string> labels;
  ExpectAgreement(*c, "x.json", RaisingEngineBackend(), &labels);
  for (const char* label : {"predicted", "engine", "observed"}) {
    EXPECT_TRUE(labels.count(label)) << "the call-level run shows no " << label << " line";
  }
}

// A case whose q, k and v are in files it was not read beside (parsed from
// text): the data line names the files and says they were not read.
TEST(ReportJsonTest, AgreesOnACaseWhoseValuesAreInFiles) {
  const absl::StatusOr<Case> c = ParseCase(R"({
    "name": "files", "source": "test", "mode": "faithful",
    "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": 16, "dtype": "bfloat16"},
    "data": {"files": {"q": "a.q.npy", "k": "a.k.npy", "v": "a.v.npy"}},
    "call": {"profile": "sdpa",
             "cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32", "device": "cuda"}}})",
                                           "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const Backend* oracle = FindBackend("cpu_reference");
  ASSERT_NE(oracle, nullptr);
  std::set<std::string> labels;
  ExpectAgreement(*c, "x.json", *oracle, &labels);
  const Outcome o = RunCase(*c, *oracle);
  EXPECT_THAT(
      FormatOutcomeText(*c, "x.json", o),
      ::testing::HasSubstr("  data:       q, k, v from a.q.npy, a.k.npy, a.v.npy (not read)\n"));
}

}  // namespace
}  // namespace varlen
