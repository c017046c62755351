// Tests the graph-cache mutants against the corpus cases made for them: each
// passes its case's call alone and fails it once the warmup call has filled
// its cache, while the correct kernel passes both.

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mutants.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"

namespace varlen {
namespace {

using ::testing::Contains;

Case CorpusCase(const std::string& name) {
  const char* source = std::getenv("VARLEN_SOURCE_DIR");
  const std::string dir = source != nullptr ? source : ".";
  absl::StatusOr<Case> c = LoadCaseFile(dir + "/corpus/regressions/" + name + ".json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Case{};
}

// A fresh mutant (an empty cache) named `name`.
std::unique_ptr<Backend> FreshMutant(const std::string& name) {
  for (Mutant& m : CacheMutants()) {
    if (m.name == name) return std::move(m.backend);
  }
  ADD_FAILURE() << "no mutant " << name;
  return nullptr;
}

struct Target {
  const char* mutant;
  const char* killer;  // the corpus case made for it
  const char* other;   // a corpus case it survives
};

constexpr Target kTargets[] = {
    {"cache_without_scale", "cudnn-graph-cache-stale-scale-4014",
     "cudnn-graph-cache-stale-dtype-4270"},
    {"cache_without_dtype", "cudnn-graph-cache-stale-dtype-4270",
     "cudnn-graph-cache-stale-scale-4014"},
};

TEST(CacheMutantsTest, AreAmongAllMutants) {
  std::vector<std::string> names;
  for (const Mutant& m : AllMutants()) names.push_back(m.name);
  for (const Target& target : kTargets) EXPECT_THAT(names, Contains(target.mutant));
}

TEST(CacheMutantsTest, TheCallAlonePassesAndTheWarmupMakesItFail) {
  for (const Target& target : kTargets) {
    SCOPED_TRACE(target.mutant);
    const Case c = CorpusCase(target.killer);
    ASSERT_EQ(c.warmup.size(), 1u);
    Case alone = c;
    alone.warmup.clear();
    EXPECT_EQ(RunCase(alone, *FreshMutant(target.mutant)).verdict, Verdict::kPass);

    const Outcome killed = RunCase(c, *FreshMutant(target.mutant));
    EXPECT_EQ(killed.verdict, Verdict::kFail) << FormatOutcomeText(c, target.killer, killed);
    EXPECT_EQ(killed.observed, Observed::kCorruption);
    ASSERT_EQ(killed.warmups.size(), 1u);
    EXPECT_EQ(killed.warmups[0].observed, Observed::kSuccess) << "the first call builds correctly";

    EXPECT_EQ(RunCase(c, *FindBackend("cpu_flash")).verdict, Verdict::kPass);
    EXPECT_EQ(RunCase(CorpusCase(target.other), *FreshMutant(target.mutant)).verdict,
              Verdict::kPass);
  }
}

TEST(CacheMutantsTest, ConcurrentCallsOfOneKeyAllPass) {
  // Run() may be called from several threads: the same call from each must
  // build one graph and replay it correctly everywhere.
  for (const Target& target : kTargets) {
    SCOPED_TRACE(target.mutant);
    Case c = CorpusCase(target.killer);
    c.warmup.clear();
    const std::unique_ptr<Backend> mutant = FreshMutant(target.mutant);
    std::vector<Verdict> verdicts(4, Verdict::kFail);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < verdicts.size(); ++i) {
      threads.emplace_back([&, i] { verdicts[i] = RunCase(c, *mutant).verdict; });
    }
    for (std::thread& t : threads) t.join();
    for (Verdict v : verdicts) EXPECT_EQ(v, Verdict::kPass);
  }
}

}  // namespace
}  // namespace varlen
