// Tests cases whose q, k and v come from .npy files: reading them (relative
// to the case file), the shapes accepted in each layout, the errors, the
// canonical spelling, warmups, and a case read without its files.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/registry.h"
#include "varlen/cases/case.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/npy.h"
#include "varlen/cases/synth.h"

namespace varlen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

// A fresh folder per test, removed afterwards.
class DataFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("varlen-data-files-") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // 0.25 * (i + 1) - offset at flat index i: every value distinct and exact in bfloat16.
  static std::vector<double> Ramp(int64_t n, double offset) {
    std::vector<double> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = std::fmod(0.25 * static_cast<double>(i + 1), 8.0) - offset;
    return values;
  }

  void WriteArray(const std::string& name, const std::vector<double>& values, const Shape& shape) {
    ASSERT_TRUE(WriteNpy(Path(name), values, shape).ok());
  }

  // fa3 over [3, 5], 2 heads of dim 8, its values in q.npy, k.npy, v.npy.
  static json Fa3Case() {
    return json::parse(R"({
      "name": "fa3-recorded", "source": "unit test", "mode": "faithful",
      "geometry": {"seq_lens": [3, 5], "num_heads": 2, "head_dim": 8, "dtype": "bfloat16"},
      "data": {"files": {"q": "q.npy", "k": "k.npy", "v": "v.npy"}},
      "call": {"profile": "fa3",
               "cu_seqlens": {"tensor": [0, 3, 8], "dtype": "int32", "device": "cuda"},
               "kwargs": {"max_seqlen": 5}}
    })");
  }

  void WriteCaseFile(const json& j, const std::string& name = "case.json") {
    std::ofstream(Path(name)) << j.dump(2);
  }

  fs::path dir_;
};

std::vector<double> Values(const Tensor& t) {
  std::vector<double> values(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) values[i] = t.DoubleAt(t.StorageIndex(i));
  return values;
}

TEST_F(DataFilesTest, ValuesComeFromTheFilesBesideTheCase) {
  WriteArray("q.npy", Ramp(8 * 2 * 8, 1.0), {8, 2, 8});
  WriteArray("k.npy", Ramp(8 * 2 * 8, 2.0), {8, 2, 8});
  WriteArray("v.npy", Ramp(8 * 2 * 8, 3.0), {8, 2, 8});
  WriteCaseFile(Fa3Case());
  absl::StatusOr<Case> c = LoadCaseFile(Path("case.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  const QkvTensors qkv = SynthesizeQkv(*c);
  EXPECT_EQ(Values(qkv.q), Ramp(128, 1.0));
  EXPECT_EQ(Values(qkv.k), Ramp(128, 2.0));
  EXPECT_EQ(Values(qkv.v), Ramp(128, 3.0));
  // The canonical spelling keeps the names as written, and reads back equal.
  const std::string written = WriteCase(*c);
  EXPECT_EQ(json::parse(written)["data"],
            json::parse(R"({"files": {"q": "q.npy", "k": "k.npy", "v": "v.npy"}})"));
  absl::StatusOr<Case> reread = ParseCase(written);
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(*reread, *c);
}

TEST_F(DataFilesTest, AFusedProjectionTakesItsPartsAsTheCallPassesThem) {
  // q, k, v as qkv.split() column views, 2 heads and 1 kv head: the files
  // hold each part's own [T, H, D] values.
  json j = Fa3Case();
  j["geometry"]["num_kv_heads"] = 1;
  j["call"]["layout"] = "fused_qkv";
  WriteArray("q.npy", Ramp(8 * 2 * 8, 1.0), {8, 2, 8});
  WriteArray("k.npy", Ramp(8 * 1 * 8, 2.0), {8, 1, 8});
  WriteArray("v.npy", Ramp(8 * 1 * 8, 3.0), {8, 1, 8});
  WriteCaseFile(j);
  absl::StatusOr<Case> c = LoadCaseFile(Path("case.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  const QkvTensors qkv = SynthesizeQkv(*c);
  EXPECT_FALSE(qkv.q.is_contiguous());
  EXPECT_EQ(Values(qkv.q), Ramp(128, 1.0));
  EXPECT_EQ(Values(qkv.k), Ramp(64, 2.0));
  EXPECT_EQ(Values(qkv.v), Ramp(64, 3.0));
}

TEST_F(DataFilesTest, MergedHeadsTakeEitherShape) {
  // vLLM's [1, T, H * D] q, viewed with its heads apart by the layer.
  json j = Fa3Case();
  j["engine"] = "vllm";
  j["call"] = json::parse(R"({"profile": "FLASH_ATTN/fa2", "layout": "batched",
      "merged_heads": true, "seq_len": 8,
      "cu_seqlens": {"tensor": [0, 3, 8], "dtype": "int32", "device": "cuda"},
      "kwargs": {"max_seqlen": 5}})");
  WriteArray("q.npy", Ramp(128, 1.0), {1, 8, 16});    // as the call passes q
  WriteArray("k.npy", Ramp(128, 2.0), {1, 8, 2, 8});  // heads apart
  WriteArray("v.npy", Ramp(128, 3.0), {1, 8, 16});
  WriteCaseFile(j);
  absl::StatusOr<Case> c = LoadCaseFile(Path("case.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  const QkvTensors qkv = SynthesizeQkv(*c);
  EXPECT_EQ(Values(qkv.q), Ramp(128, 1.0));
  EXPECT_EQ(Values(qkv.k), Ramp(128, 2.0));
}

TEST_F(DataFilesTest, AWrongShapeNamesBothShapesItWouldTake) {
  WriteArray("q.npy", Ramp(128, 1.0), {16, 8});
  WriteArray("k.npy", Ramp(128, 2.0), {8, 2, 8});
  WriteArray("v.npy", Ramp(128, 3.0), {8, 2, 8});
  WriteCaseFile(Fa3Case());
  absl::StatusOr<Case> c = LoadCaseFile(Path("case.json"));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("case.json: $.data.files.q (q.npy): an array of "
                                              "shape (16, 8), where this case's q is [8, 2, 8] "
                                              "as the call passes it"));
}

TEST_F(DataFilesTest, AMissingFileIsNamed) {
  WriteArray("q.npy", Ramp(128, 1.0), {8, 2, 8});
  WriteArray("k.npy", Ramp(128, 2.0), {8, 2, 8});
  WriteCaseFile(Fa3Case());
  absl::StatusOr<Case> c = LoadCaseFile(Path("case.json"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("$.data.files.v (v.npy): "));
  EXPECT_THAT(c.status().message(), HasSubstr("v.npy: no such file"));
}

TEST_F(DataFilesTest, FilesExcludeASeedAndADistribution) {
  json j = Fa3Case();
  j["data"]["seed"] = 3;
  absl::StatusOr<Case> c = ParseCase(j.dump(), "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("$.data.files: q, k and v come from the files, so seed and distribution "
                        "must be absent"));
  j = Fa3Case();
  j["data"]["files"].erase("v");
  c = ParseCase(j.dump(), "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("$.data.files.v"));
}

TEST_F(DataFilesTest, ACaseReadWithoutItsFilesRunsResolutionOnlyAndSaysWhy) {
  absl::StatusOr<Case> c = ParseCase(Fa3Case().dump(), "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  CaseRunner runner(*c);
  const Outcome outcome = runner.Run(*FindBackend("cpu_reference"));
  EXPECT_THAT(outcome.resolution_only_reason,
              HasSubstr("q, k and v are in the files $.data.files names, and this case was read "
                        "without them"));
  // Nothing passes by accident where the values were never read.
  for (double x : Values(SynthesizeQkv(*c).q)) EXPECT_TRUE(std::isnan(x));
}

TEST_F(DataFilesTest, TheBackendComputesOnTheFilesValues) {
  // v constant 2 on every key: each written row of the output is 2.
  WriteArray("q.npy", Ramp(128, 1.0), {8, 2, 8});
  WriteArray("k.npy", Ramp(128, 2.0), {8, 2, 8});
  WriteArray("v.npy", std::vector<double>(128, 2.0), {8, 2, 8});
  json j = Fa3Case();
  // A warmup draws its own values: the files are the case's own call's.
  j["warmup"] = json::array({json::parse(R"({"geometry": {"seq_lens": [2, 6]},
      "call": {"cu_seqlens": {"tensor": [0, 2, 8]}, "kwargs": {"max_seqlen": 6}}})")});
  WriteCaseFile(j);
  absl::StatusOr<Case> c = LoadCaseFile(Path("case.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->warmup.size(), 1u);
  EXPECT_FALSE(c->warmup[0].patched.data.files.has_value());
  RunOptions options;
  options.keep_output = true;
  CaseRunner runner(*c, options);
  const Outcome outcome = runner.Run(*FindBackend("cpu_reference"));
  EXPECT_TRUE(outcome.resolution_only_reason.empty()) << outcome.resolution_only_reason;
  ASSERT_TRUE(outcome.output.has_value());
  for (double x : Values(*outcome.output)) EXPECT_EQ(x, 2.0);
  EXPECT_EQ(outcome.verdict, Verdict::kPass);
}

TEST_F(DataFilesTest, AbsoluteNamesServeAProcessWithAnotherWorkingFolder) {
  WriteCaseFile(Fa3Case());
  absl::StatusOr<Case> c = ParseCase(Fa3Case().dump(), "x.json");
  ASSERT_TRUE(c.ok());
  c->data.files_directory = dir_.string();
  const QkvFiles files = AbsoluteDataFiles(c->data);
  EXPECT_EQ(files.q, Path("q.npy"));
  EXPECT_EQ(files.v, Path("v.npy"));
}

}  // namespace
}  // namespace varlen
