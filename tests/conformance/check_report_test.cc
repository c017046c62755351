// The check report's file form and the merge of a sharded run's reports.

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varlen/conformance/check.h"
#include "varlen/run/shard.h"

namespace varlen {
namespace {

using ::testing::HasSubstr;

CheckItem Item(int64_t ordinal, const std::string& name, CheckStatus status,
               const std::string& fault = "", int64_t tokens = -1) {
  CheckItem item{"cpu_flash", ordinal < 3 ? "corpus" : "property", name, status};
  item.ordinal = ordinal;
  item.seconds = 0.25;
  item.message = status == CheckStatus::kFail ? "why\nin full" : "";
  item.fault = fault;
  item.fault_signature = fault.empty() ? "" : fault + ": signal 11 (SIGSEGV)";
  item.tokens = tokens;
  return item;
}

// Five checks, as one run makes them.
CheckReport Whole() {
  CheckReport report;
  report.tier = Tier::kFull;
  report.backends = {"cpu_flash"};
  report.properties = {"Numerics", "SequenceAlone"};
  report.items = {Item(0, "a", CheckStatus::kPass), Item(1, "b", CheckStatus::kFail, "CRASH", 40),
                  Item(2, "c", CheckStatus::kUnsupported), Item(3, "Numerics", CheckStatus::kXFail),
                  Item(4, "SequenceAlone", CheckStatus::kFail, "CRASH", 7)};
  report.counters["cpu_flash"] = {{"workers_started", 3}, {"crash", 2}};
  return report;
}

// Shard `index` of `total` of Whole(), as that shard's run makes it.
CheckReport ShardOf(int index, int total) {
  CheckReport shard = Whole();
  shard.shard = {index, total};
  shard.items.clear();
  for (const CheckItem& item : Whole().items) {
    if (shard.shard.Owns(item.ordinal)) shard.items.push_back(item);
  }
  shard.counters["cpu_flash"] = {{"workers_started", 1 + index}, {"crash", 1}};
  return shard;
}

std::vector<std::string> Verdicts(const CheckReport& report) {
  std::vector<std::string> out;
  for (const CheckItem& item : report.items) {
    out.push_back(absl::StrCat(item.ordinal, " ", item.kind, " ", item.name, " ",
                               CheckStatusName(item.status), " ", item.fault));
  }
  return out;
}

TEST(CheckReportTest, RoundTripsThroughJson) {
  const CheckReport whole = Whole();
  absl::StatusOr<CheckReport> back =
      ParseCheckReportJson(nlohmann::ordered_json::parse(CheckReportJson(whole).dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Verdicts(*back), Verdicts(whole));
  EXPECT_EQ(back->tier, Tier::kFull);
  EXPECT_EQ(back->items[1].message, "why\nin full");
  EXPECT_EQ(back->items[1].fault_signature, "CRASH: signal 11 (SIGSEGV)");
  EXPECT_EQ(CheckReportJson(*back), CheckReportJson(whole));
}

TEST(CheckReportTest, BadFilesNameTheField) {
  nlohmann::ordered_json json = CheckReportJson(Whole());
  json["items"][1]["status"] = "broken";
  EXPECT_THAT(ParseCheckReportJson(json).status().message(), HasSubstr("\"broken\""));
  json = CheckReportJson(Whole());
  json["items"][0].erase("ordinal");
  EXPECT_THAT(ParseCheckReportJson(json).status().message(),
              HasSubstr("report item 0: no field \"ordinal\""));
  json = CheckReportJson(Whole());
  json["version"] = 99;
  EXPECT_FALSE(ParseCheckReportJson(json).ok());
  EXPECT_FALSE(ParseCheckReportJson(nlohmann::ordered_json::array()).ok());
}

TEST(CheckReportTest, ShardsMergeIntoTheWholeRun) {
  for (int total : {1, 2, 3, 7}) {
    std::vector<CheckReport> shards;
    for (int index = total - 1; index >= 0; --index) shards.push_back(ShardOf(index, total));
    absl::StatusOr<CheckReport> merged = MergeCheckReports(shards);
    ASSERT_TRUE(merged.ok()) << merged.status();
    EXPECT_EQ(Verdicts(*merged), Verdicts(Whole())) << total << " shards";
    EXPECT_EQ(merged->shard.total, 1);
    int64_t started = 0;
    for (const BackendCounter& c : merged->counters["cpu_flash"]) {
      if (c.name == "workers_started") started = c.value;
    }
    EXPECT_EQ(started, total * (total + 1) / 2);  // added up
  }
}

TEST(CheckReportTest, MergeRefusesWhatIsNotOneRun) {
  EXPECT_THAT(MergeCheckReports({ShardOf(0, 2)}).status().message(),
              HasSubstr("shard 1 of 2 is missing"));
  EXPECT_THAT(MergeCheckReports({ShardOf(0, 2), ShardOf(0, 2)}).status().message(),
              HasSubstr("given twice"));
  CheckReport other = ShardOf(1, 2);
  other.tier = Tier::kSmoke;
  EXPECT_THAT(MergeCheckReports({ShardOf(0, 2), other}).status().message(),
              HasSubstr("not of the same run"));
  EXPECT_FALSE(MergeCheckReports({}).ok());
}

TEST(CheckReportTest, FaultsAreGroupedBySignature) {
  const std::vector<std::string> lines = FaultGroupLines(Whole());
  ASSERT_EQ(lines.size(), 1u);
  // The smallest case first.
  EXPECT_EQ(lines[0], "  2 x CRASH: signal 11 (SIGSEGV) [cpu_flash]: SequenceAlone, b");
  const std::string text = CheckResultText(Whole(), {});
  EXPECT_THAT(text, HasSubstr("2 failed (2 CRASH)"));
  EXPECT_THAT(CheckJUnitXml(Whole()), HasSubstr("type=\"CRASH\""));
  EXPECT_THAT(CheckJUnitXml(Whole()),
              HasSubstr("<property name=\"workers_started\" value=\"3\"/>"));
  EXPECT_THAT(CheckMatrixMarkdown(Whole()), HasSubstr("- 2 x CRASH"));
}

TEST(CheckReportTest, AGroupListsItsThreeSmallestCasesAndThoseOfUnknownSizeLast) {
  CheckReport report = Whole();
  report.items = {Item(0, "unknown", CheckStatus::kFail, "CRASH"),
                  Item(1, "big", CheckStatus::kFail, "CRASH", 900),
                  Item(2, "small", CheckStatus::kFail, "CRASH", 3),
                  Item(3, "also_small", CheckStatus::kFail, "CRASH", 3),
                  Item(4, "middle", CheckStatus::kFail, "CRASH", 50)};
  EXPECT_EQ(
      FaultGroupLines(report),
      std::vector<std::string>{
          "  5 x CRASH: signal 11 (SIGSEGV) [cpu_flash]: small, also_small, middle (+2 more)"});
}

TEST(ShardTest, ReadsGoogleTestsVariables) {
  unsetenv("GTEST_TOTAL_SHARDS");
  unsetenv("GTEST_SHARD_INDEX");
  absl::StatusOr<Shard> none = ShardFromEnvironment();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->total, 1);
  setenv("GTEST_TOTAL_SHARDS", "4", 1);
  setenv("GTEST_SHARD_INDEX", "3", 1);
  absl::StatusOr<Shard> last = ShardFromEnvironment();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->index, 3);
  EXPECT_TRUE(last->Owns(7));
  EXPECT_FALSE(last->Owns(8));
  setenv("GTEST_SHARD_INDEX", "4", 1);
  EXPECT_THAT(ShardFromEnvironment().status().message(), HasSubstr("GTEST_SHARD_INDEX=4"));
  setenv("GTEST_SHARD_INDEX", "x", 1);
  EXPECT_THAT(ShardFromEnvironment().status().message(), HasSubstr("not a whole number"));
  unsetenv("GTEST_SHARD_INDEX");
  EXPECT_THAT(ShardFromEnvironment().status().message(), HasSubstr("only GTEST_TOTAL_SHARDS"));
  unsetenv("GTEST_TOTAL_SHARDS");
}

}  // namespace
}  // namespace varlen
