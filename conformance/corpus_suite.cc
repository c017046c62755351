#include "varlen/conformance/corpus_suite.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "expectation_report.h"
#include "gtest/gtest.h"
#include "safe_name.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"

namespace varlen {
namespace {

class CorpusCaseTest : public testing::Test {
 public:
  CorpusCaseTest(std::shared_ptr<const Case> c, std::string file, const Backend* backend,
                 const Expectations* expectations)
      : case_(std::move(c)),
        file_(std::move(file)),
        backend_(backend),
        expectations_(expectations) {}

  void TestBody() override {
    const ExpectationEntry* entry =
        expectations_ == nullptr
            ? nullptr
            : FindExpectation(*expectations_, CorpusTestName(case_->name), case_->geometry.dtype,
                              Today(), case_->data.distribution);
    if (entry != nullptr && entry->expect == Expect::kSkip) {
      GTEST_SKIP() << "expectations manifest: " << DescribeEntry(*entry);
    }
    const Outcome outcome = RunCase(*case_, *backend_);
    if (outcome.verdict == Verdict::kUnsupported) {
      GTEST_SKIP() << backend_->name() << ": " << outcome.unsupported.message();
    }
    internal::ReportUnderExpectation(entry, expectations_ != nullptr && expectations_->strict,
                                     outcome.verdict == Verdict::kPass,
                                     FormatOutcomeText(*case_, file_, outcome));
  }

 private:
  std::shared_ptr<const Case> case_;
  std::string file_;
  const Backend* backend_;
  const Expectations* expectations_;
};

class UnavailableTest : public testing::Test {
 public:
  explicit UnavailableTest(absl::Status why) : why_(std::move(why)) {}
  void TestBody() override { GTEST_SKIP() << why_.message(); }

 private:
  absl::Status why_;
};

}  // namespace

std::string CorpusTestName(const std::string& case_name) {
  return absl::StrCat("Corpus.", internal::SafeName(case_name));
}

absl::Status RegisterCorpusTests(const std::string& corpus_dir,
                                 const std::vector<std::string>& backend_names,
                                 const Expectations* expectations) {
  std::vector<const Backend*> backends;
  if (backend_names.empty()) {
    backends = AllBackends();
  } else {
    for (const std::string& name : backend_names) {
      const Backend* backend = FindBackend(name);
      if (backend == nullptr) {
        return absl::NotFoundError(absl::StrCat("no backend named \"", name, "\""));
      }
      backends.push_back(backend);
    }
  }
  VARLEN_ASSIGN_OR_RETURN(std::vector<std::string> files, ListCaseFiles({corpus_dir}));
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(corpus_dir, ": no case files"));
  }
  // A backend this machine cannot run (a GPU backend without a device) gets
  // one skipped test with the reason, not one per case.
  std::erase_if(backends, [&](const Backend* backend) {
    const absl::Status available = backend->Available();
    if (available.ok()) return false;
    testing::RegisterTest(
        "Corpus", absl::StrCat("all/", backend->name()).c_str(), nullptr, nullptr, __FILE__,
        __LINE__, [available]() -> testing::Test* { return new UnavailableTest(available); });
    return true;
  });
  std::map<std::string, std::string> file_of_test_name;
  for (const std::string& file : files) {
    VARLEN_ASSIGN_OR_RETURN(Case loaded, LoadCaseFile(file));
    auto c = std::make_shared<const Case>(std::move(loaded));
    const auto [seen, unique] = file_of_test_name.emplace(internal::SafeName(c->name), file);
    if (!unique) {
      return absl::AlreadyExistsError(absl::StrCat(file, ": case \"", c->name,
                                                   "\" has the same test name as ", seen->second,
                                                   ": names must be unique in a corpus"));
    }
    for (const Backend* backend : backends) {
      testing::RegisterTest(
          "Corpus", absl::StrCat(internal::SafeName(c->name), "/", backend->name()).c_str(),
          nullptr, nullptr, file.c_str(), 0, [c, file, backend, expectations]() -> testing::Test* {
            const bool applies =
                expectations != nullptr && AppliesTo(*expectations, backend->name());
            return new CorpusCaseTest(c, file, backend, applies ? expectations : nullptr);
          });
    }
  }
  return absl::OkStatus();
}

}  // namespace varlen
