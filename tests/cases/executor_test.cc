// Tests the executor end to end on the cpu_reference backend and on small test backends, plus
// reports.

#include "varlen/cases/executor.h"

#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/backend.h"
#include "varlen/backend/elements.h"
#include "varlen/backend/params.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/report.h"
#include "varlen/core/status.h"
#include "varlen/oracle/reference_attention.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using json = nlohmann::json;

constexpr char kSeedMessage[] =
    "RuntimeError: sequence_lengths should be prepared for vision flashinfer_cudnn attention "
    "backend";

const Backend& Reference() {
  const Backend* backend = FindBackend("cpu_reference");
  EXPECT_NE(backend, nullptr);
  return *backend;
}

Case ParseOrDie(const json& j) {
  absl::StatusOr<Case> c = ParseCase(j.dump(), "x.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Case{};
}

// The corpus README's first example: flashinfer_cudnn called directly with
// token cu_seqlens and max_seqlen, no sequence_lengths key.
json SeedCase() {
  return json::parse(R"({
    "name": "flashinfer-cudnn-seed-missing-sequence-lengths",
    "source": "SGLang #19003; contract rule 11",
    "mode": "faithful",
    "geometry": {"seq_lens": [48, 72], "num_heads": 16, "head_dim": 72, "dtype": "bfloat16"},
    "data": {"seed": 1, "distribution": "normal"},
    "call": {
      "profile": "flashinfer_cudnn",
      "cu_seqlens": {"tensor": [0, 48, 120], "dtype": "int32", "device": "cuda"},
      "kwargs": {"max_seqlen": 72}
    },
    "expect": {
      "outcome": "error",
      "error": "RuntimeError",
      "message": "sequence_lengths should be prepared for vision flashinfer_cudnn attention backend"
    }
  })");
}

json HardenedTwin() {
  json j = SeedCase();
  j["name"] = "flashinfer-cudnn-seed-hardened";
  j["mode"] = "hardened";
  j["expect"] = {{"outcome", "success"}};
  return j;
}

// fa3 over [3, 5], 2 heads of dim 8, int32 cu_seqlens on cuda.
json Fa3Case() {
  return json::parse(R"({
    "name": "fa3-small",
    "source": "unit test",
    "mode": "faithful",
    "geometry": {"seq_lens": [3, 5], "num_heads": 2, "head_dim": 8, "dtype": "bfloat16"},
    "call": {
      "profile": "fa3",
      "cu_seqlens": {"tensor": [0, 3, 8], "dtype": "int32", "device": "cuda"},
      "kwargs": {"max_seqlen": 5}
    }
  })");
}

// fa3 told max_seqlen 100 for [100, 300]: the grid covers 128 rows.
json TooSmallMaxSeqlen(const char* outcome) {
  return json::parse(R"({
    "name": "fa3-max-seqlen-too-small",
    "source": "contract rule 24",
    "mode": "faithful",
    "geometry": {"seq_lens": [100, 300], "num_heads": 2, "head_dim": 8, "dtype": "bfloat16"},
    "call": {
      "profile": "fa3",
      "cu_seqlens": {"tensor": [0, 100, 400], "dtype": "int32", "device": "cuda"},
      "kwargs": {"max_seqlen": 100}
    },
    "expect": {"outcome": ")" +
                     std::string(outcome) + R"("}
  })");
}

// A backend whose capabilities admit float16 only.
class Float16OnlyBackend final : public Backend {
 public:
  absl::string_view name() const override { return "fp16_only"; }
  absl::string_view description() const override { return "float16 inputs only"; }
  BackendCapabilities capabilities() const override {
    return {.input_dtypes = {DType::kFloat16}, .max_head_dim = 512, .device = "cpu"};
  }
  absl::Status Run(const VarlenAttentionParams&) const override {
    return absl::InternalError("must not run");
  }
};

// A backend that is not available on this machine.
class UnavailableBackend final : public Backend {
 public:
  absl::string_view name() const override { return "unavailable"; }
  absl::string_view description() const override { return "needs a device"; }
  BackendCapabilities capabilities() const override { return Reference().capabilities(); }
  absl::Status Available() const override { return absl::UnavailableError("no device here"); }
  absl::Status Run(const VarlenAttentionParams&) const override {
    return absl::InternalError("must not run");
  }
};

// Computes exactly, then overwrites every output element of one sequence.
class GarbageBackend final : public Backend {
 public:
  explicit GarbageBackend(int bad_sequence) : bad_sequence_(bad_sequence) {}
  absl::string_view name() const override { return "garbage"; }
  absl::string_view description() const override { return "corrupts one sequence"; }
  BackendCapabilities capabilities() const override { return Reference().capabilities(); }
  absl::Status Run(const VarlenAttentionParams& p) const override {
    absl::Status status = Reference().Run(p);
    if (!status.ok()) return status;
    const SequenceView s = SequenceAt(p, bad_sequence_);
    VARLEN_DISPATCH_FLOAT_TYPES(p.output_dtype, T, [&] {
      for (int64_t row = 0; row < s.rows; ++row) {
        for (int h = 0; h < p.num_heads_q; ++h) {
          for (int d = 0; d < p.head_dim_v; ++d) {
            kernels::StoreFromDouble<T>(
                p.o, s.o_offset + row * p.o_token_stride + h * p.o_head_stride + d, 100.0);
          }
        }
      }
    });
    return absl::OkStatus();
  }

 private:
  int bad_sequence_;
};

// A backend whose run fails.
class FailingBackend final : public Backend {
 public:
  absl::string_view name() const override { return "failing"; }
  absl::string_view description() const override { return "always fails"; }
  BackendCapabilities capabilities() const override { return Reference().capabilities(); }
  absl::Status Run(const VarlenAttentionParams&) const override {
    return absl::InternalError("launch failed");
  }
};

// ---------------------------------------------------------------------------
// Errors

TEST(ExecutorTest, FaithfulSeedCaseRaisesTheSglangError) {
  const Case c = ParseOrDie(SeedCase());
  const Outcome o = RunCase(c, Reference());
  EXPECT_EQ(o.backend, "cpu_reference");
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.error_stage, "resolution");
  EXPECT_EQ(FormatPythonError(o.error), kSeedMessage);
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_THAT(o.mismatches, IsEmpty());
  ASSERT_TRUE(o.resolution.has_value());
  EXPECT_FALSE(o.resolution->args.has_value());
  EXPECT_EQ(o.resolution->counts().host_syncs, 0);
  EXPECT_FALSE(o.numerics.has_value());
  EXPECT_TRUE(o.kernel.empty());
}

TEST(ExecutorTest, WrongExpectedMessageFailsNamingBothTexts) {
  json j = SeedCase();
  j["expect"]["message"] = "something else";
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("expected RuntimeError: something else; raised " +
                                        std::string(kSeedMessage)));
}

TEST(ExecutorTest, WrongExpectedErrorKindFails) {
  json j = SeedCase();
  j["expect"]["error"] = "ValueError";
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches,
              ElementsAre("expected ValueError: sequence_lengths should be prepared for vision "
                          "flashinfer_cudnn attention backend; raised " +
                          std::string(kSeedMessage)));
}

TEST(ExecutorTest, ExpectedErrorThatDoesNotHappenFails) {
  json j = Fa3Case();
  j["expect"] = {{"outcome", "error"}, {"error", "RuntimeError"}, {"message", "boom"}};
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("expected RuntimeError: boom; observed success"));
}

TEST(ExecutorTest, ErrorWhenSuccessIsExpectedFails) {
  json j = SeedCase();
  j["expect"] = {{"outcome", "success"}};
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("expected success; observed error"));
}

TEST(ExecutorTest, BuilderErrorIsReportedAtTheBuilderStage) {
  const Case c = ParseOrDie(json::parse(R"json({
    "name": "builder-plain-empty-cu-hardened",
    "source": "contract rule 5",
    "mode": "hardened",
    "geometry": {"seq_lens": [], "num_heads": 4, "head_dim": 64, "dtype": "bfloat16"},
    "call": {
      "profile": "fa3",
      "forward_metadata": {"builder": "plain", "cu_seqlens": {"tensor": [0], "dtype": "int32", "device": "cuda"}}
    },
    "expect": {"outcome": "error", "error": "ValueError",
               "message": "cu_seqlens=[0] describes no sequence: the metadata builders need at least one (B+1 >= 2 entries)"}
  })json"));
  const Outcome o = RunCase(c, Reference());
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.error_stage, "metadata builder");
  EXPECT_EQ(FormatPythonError(o.error),
            "ValueError: cu_seqlens=[0] describes no sequence: the metadata builders need at "
            "least one (B+1 >= 2 entries)");
  EXPECT_FALSE(o.resolution.has_value());
  EXPECT_EQ(o.verdict, Verdict::kPass);
}

TEST(ExecutorTest, KernelEntryErrorIsReportedAtTheKernelStage) {
  json j = Fa3Case();
  j["call"]["graph_mode"] = true;
  j["call"]["cu_seqlens"] =
      json::parse(R"([{"tensor": [0, 3, 8], "dtype": "int64", "device": "cuda"}, 5])");
  j["call"]["kwargs"] = json::object();
  j["expect"] = {{"outcome", "error"},
                 {"error", "RuntimeError"},
                 {"message", "cu_seqlens_q must have dtype torch.int32"}};
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.error_stage, "kernel entry");
  EXPECT_EQ(FormatPythonError(o.error), "RuntimeError: cu_seqlens_q must have dtype torch.int32");
  EXPECT_EQ(o.verdict, Verdict::kPass);
}

// vLLM's FlashAttention 2 refuses a head size off the multiples of 8 at its
// entry. That is what a faithful case expecting it gets; a hardened call, or
// a case that expects success (a generated correct call), is unsupported:
// the geometry, not the argument handling, is refused.
TEST(ExecutorTest, AGeometryTheKernelRefusesIsAnErrorOnlyWhereExpected) {
  json j = json::parse(R"({
    "name": "fa2-head-size-12", "source": "test", "engine": "vllm", "vllm": "0.33.0", "mode": "faithful",
    "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": 12, "dtype": "bfloat16"},
    "data": {"seed": 1, "distribution": "normal"},
    "call": {"profile": "FLASH_ATTN/fa2", "layout": "batched", "seq_len": 8,
             "cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32", "device": "cuda"},
             "kwargs": {"max_seqlen": {"tensor": [5], "dtype": "int32", "device": "cpu",
                                       "shape": []}}},
    "expect": {"outcome": "error", "error": "RuntimeError",
               "message": "query, key, value, and out_ must have a head_size that is a multiple of 8"}
  })");
  const Outcome expected = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(expected.error_stage, "kernel entry");
  EXPECT_EQ(expected.verdict, Verdict::kPass) << FormatPythonError(expected.error);

  j["expect"] = {{"outcome", "success"}};
  const Outcome generated = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(generated.verdict, Verdict::kUnsupported);
  EXPECT_THAT(generated.unsupported.message(), HasSubstr("does not take this geometry"));

  j["mode"] = "hardened";
  EXPECT_EQ(RunCase(ParseOrDie(j), Reference()).verdict, Verdict::kUnsupported);

  // Without an expectation (a call replayed to see what happens), the refusal.
  j["mode"] = "faithful";
  j.erase("expect");
  EXPECT_EQ(RunCase(ParseOrDie(j), Reference()).observed, Observed::kError);
}

// ---------------------------------------------------------------------------
// Forward runs

TEST(ExecutorTest, HardenedTwinSucceedsAndMatches) {
  const Outcome o = RunCase(ParseOrDie(HardenedTwin()), Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess) << FormatPythonError(o.error);
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_THAT(o.mismatches, IsEmpty());
  ASSERT_TRUE(o.numerics.has_value());
  EXPECT_TRUE(o.numerics->passed);
  EXPECT_EQ(o.numerics->elements, 120 * 16 * 72);
  EXPECT_EQ(o.numerics->unwritten, 0);
  EXPECT_EQ(o.numerics->non_finite, 0);
  EXPECT_LE(o.numerics->max_abs_error, o.numerics->bound);
  EXPECT_GT(o.numerics->emulation_error, 0.0);
  EXPECT_THAT(o.kernel, StartsWith("cudnn_batch_prefill_with_kv_cache: 8 sequences"));
  EXPECT_TRUE(o.kernel_fault.ok());
}

TEST(ExecutorTest, TooSmallMaxSeqlenLeavesRowsUnwritten) {
  const Outcome o = RunCase(ParseOrDie(TooSmallMaxSeqlen("silent_corruption")), Reference());
  EXPECT_EQ(o.observed, Observed::kCorruption);
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_THAT(o.mismatches, IsEmpty());
  ASSERT_TRUE(o.numerics.has_value());
  EXPECT_FALSE(o.numerics->passed);
  // Rows 128..299 of sequence 1, 2 heads x 8 dims each.
  EXPECT_EQ(o.numerics->unwritten, 172 * 2 * 8);
  EXPECT_EQ(o.numerics->elements, 400 * 2 * 8);
  EXPECT_EQ(o.numerics->worst.sequence, 1);
  EXPECT_EQ(o.numerics->worst.row, 128);
  EXPECT_EQ(o.numerics->worst.head, 0);
  EXPECT_EQ(o.numerics->worst.dim, 0);
  EXPECT_LE(o.numerics->max_abs_error, o.numerics->bound);  // what was written is right
  EXPECT_EQ(o.kernel,
            "flash_attn_varlen_func: 2 sequences, max_seqlen=100 -> rows covered per sequence 128");
}

TEST(ExecutorTest, TooSmallMaxSeqlenFailsWhenSuccessIsExpected) {
  const Case c = ParseOrDie(TooSmallMaxSeqlen("success"));
  const Outcome o = RunCase(c, Reference());
  EXPECT_EQ(o.observed, Observed::kCorruption);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("expected success; observed silent corruption"));
  const std::string text = FormatOutcomeText(c, "x.json", o);
  EXPECT_THAT(text, HasSubstr("; 2752 of 6400 elements never written"));
  EXPECT_THAT(text, HasSubstr("worst at sequence 1 row 128 head 0 dim 0"));
  EXPECT_THAT(text, HasSubstr("  outcome:    silent corruption: the output does not match the "
                              "reference\n"));
  EXPECT_THAT(text, HasSubstr("  verdict:    FAIL\n    - expected success; observed silent "
                              "corruption\n"));
}

TEST(ExecutorTest, CorruptionFailsWithoutAnExpectation) {
  json j = TooSmallMaxSeqlen("success");
  j.erase("expect");
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("the output does not match the reference"));

  // Without an expectation, an error is not a failure.
  json seed = SeedCase();
  seed.erase("expect");
  EXPECT_EQ(RunCase(ParseOrDie(seed), Reference()).verdict, Verdict::kPass);
}

TEST(ExecutorTest, SilentCorruptionExpectedButOutputMatchesFails) {
  json j = Fa3Case();
  j["expect"] = {{"outcome", "silent_corruption"}};
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("expected a silent corruption; observed success"));
}

TEST(ExecutorTest, OutOfBoundsAccessIsAKernelFault) {
  // The packed v and o thirds point past their buffers; faithful resolution
  // checks the qk third only.
  const Case c = ParseOrDie(json::parse(R"({
    "name": "flashinfer-v-third-out-of-bounds",
    "source": "unit test",
    "mode": "faithful",
    "geometry": {"seq_lens": [3, 5], "num_heads": 2, "head_dim": 4, "dtype": "float32"},
    "call": {
      "profile": "flashinfer_cudnn",
      "cu_seqlens": {"tensor": [0, 24, 64, 100, 124, 164, 200, 224, 264], "dtype": "int32", "device": "cuda"},
      "kwargs": {"sequence_lengths": {"tensor": [3, 5], "dtype": "int32", "device": "cuda"}, "max_seqlen": 5}
    },
    "expect": {"outcome": "silent_corruption"}
  })"));
  const Outcome o = RunCase(c, Reference());
  EXPECT_EQ(o.observed, Observed::kCorruption);
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_EQ(o.kernel_fault.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(o.kernel_fault.message(),
            "sequence 0 touches v elements [100, 124) outside the buffer of 64 elements: a GPU "
            "kernel would read or write foreign memory or fault");
  EXPECT_FALSE(o.numerics.has_value());
  EXPECT_THAT(FormatOutcomeText(c, "x.json", o),
              HasSubstr("  outcome:    silent corruption: sequence 0 touches v elements"));
  EXPECT_EQ(OutcomeToJson(c, "x.json", o)["kernel_fault"], std::string(o.kernel_fault.message()));
}

TEST(ExecutorTest, BackendThatCorruptsOneSequenceIsCaught) {
  const Case c = ParseOrDie(Fa3Case());
  const Outcome o = RunCase(c, GarbageBackend(1));
  EXPECT_EQ(o.observed, Observed::kCorruption);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("the output does not match the reference"));
  ASSERT_TRUE(o.numerics.has_value());
  EXPECT_EQ(o.numerics->unwritten, 0);
  EXPECT_EQ(o.numerics->worst.sequence, 1);
  ASSERT_EQ(o.numerics->per_sequence_max_error.size(), 2u);
  EXPECT_GT(o.numerics->per_sequence_max_error[1], 90.0);
  EXPECT_LE(o.numerics->per_sequence_max_error[0], o.numerics->bound);
  EXPECT_GT(o.numerics->max_abs_error, o.numerics->bound);
}

TEST(ExecutorTest, FailingBackendIsAnErrorAtTheBackendStage) {
  json j = Fa3Case();
  j["expect"] = {{"outcome", "success"}};
  const Outcome o = RunCase(ParseOrDie(j), FailingBackend());
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.error_stage, "backend");
  EXPECT_EQ(FormatPythonError(o.error), "INTERNAL: launch failed");
  EXPECT_FALSE(o.numerics.has_value());
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("the backend failed: launch failed"));
}

TEST(ExecutorTest, RunnerSharesItsReferenceAcrossBackends) {
  CaseRunner runner(ParseOrDie(Fa3Case()));
  EXPECT_TRUE(runner.runs_forward());
  const Outcome first = runner.Run(Reference());
  const Outcome garbage = runner.Run(GarbageBackend(0));
  const Outcome second = runner.Run(Reference());
  ASSERT_TRUE(first.numerics.has_value() && second.numerics.has_value());
  EXPECT_EQ(first.observed, Observed::kSuccess);
  EXPECT_EQ(garbage.observed, Observed::kCorruption);
  EXPECT_EQ(garbage.numerics->worst.sequence, 0);
  EXPECT_EQ(second.observed, Observed::kSuccess);
  EXPECT_EQ(second.numerics->max_abs_error, first.numerics->max_abs_error);
  EXPECT_EQ(second.numerics->bound, first.numerics->bound);
}

// ---------------------------------------------------------------------------
// Warmup calls

// Computes exactly and records the dtype and scale of every call; fails the
// float16 ones when told to.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(bool fail_float16 = false) : fail_float16_(fail_float16) {}
  absl::string_view name() const override { return "recording"; }
  absl::string_view description() const override { return "records its calls"; }
  BackendCapabilities capabilities() const override { return Reference().capabilities(); }
  absl::Status Run(const VarlenAttentionParams& p) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back(absl::StrCat(DTypeName(p.input_dtype), " scale ", p.softmax_scale));
    }
    if (fail_float16_ && p.input_dtype == DType::kFloat16) {
      return absl::InternalError("no float16 here");
    }
    return Reference().Run(p);
  }
  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  bool fail_float16_;
  mutable std::mutex mutex_;
  mutable std::vector<std::string> calls_;
};

// Fa3Case() in bfloat16, with a float16 warmup call at scale 0.5.
json Fa3CaseWithWarmup() {
  json j = Fa3Case();
  j["warmup"] = json::array({json::parse(R"({"geometry": {"dtype": "float16", "softmax_scale": 0.5},
                       "call": {"kwargs": {"softmax_scale": 0.5}}})")});
  j["expect"] = {{"outcome", "success"}};
  return j;
}

TEST(ExecutorTest, WarmupCallsRunFirstOnTheSameBackendEveryTime) {
  CaseRunner runner(ParseOrDie(Fa3CaseWithWarmup()));
  const RecordingBackend backend;
  const Outcome first = runner.Run(backend);
  EXPECT_THAT(backend.calls(), ElementsAre("float16 scale 0.5", "bfloat16 scale 0.353553"));
  EXPECT_EQ(first.verdict, Verdict::kPass);
  ASSERT_EQ(first.warmups.size(), 1u);
  EXPECT_EQ(first.warmups[0].backend, "recording");
  EXPECT_EQ(first.warmups[0].observed, Observed::kSuccess);
  EXPECT_EQ(first.warmups[0].verdict, Verdict::kPass);
  ASSERT_TRUE(first.warmups[0].resolution.has_value());
  EXPECT_EQ(ResolvedArgsToJson(*first.warmups[0].resolution->args)["scale"], 0.5);

  // Again on the same runner: the warmup runs again before the call.
  const Outcome second = runner.Run(backend);
  EXPECT_THAT(backend.calls(), ElementsAre("float16 scale 0.5", "bfloat16 scale 0.353553",
                                           "float16 scale 0.5", "bfloat16 scale 0.353553"));
  EXPECT_EQ(second.warmups.size(), 1u);
}

TEST(ExecutorTest, WarmupCallsFollowTheCaseAsItIsNow) {
  // A case changed after it was read (as `varlen repro --sglang` changes the
  // version) gets warmup calls made from the changed case.
  Case c = ParseOrDie(Fa3CaseWithWarmup());
  ASSERT_EQ(c.call.kwargs[0].first, "max_seqlen");
  c.call.kwargs[0].second = ArgLiteral::Int(8);
  const Outcome o = RunCase(c, Reference());
  ASSERT_EQ(o.warmups.size(), 1u);
  ASSERT_TRUE(o.warmups[0].resolution.has_value() && o.warmups[0].resolution->args.has_value());
  EXPECT_EQ(ResolvedArgsToJson(*o.warmups[0].resolution->args)["max_seqlen"], 8);
  EXPECT_EQ(ResolvedArgsToJson(*o.warmups[0].resolution->args)["scale"], 0.5);
}

TEST(ExecutorTest, AWarmupOutcomeIsRecordedButNotJudged) {
  const Case c = ParseOrDie(Fa3CaseWithWarmup());
  const Outcome o = RunCase(c, RecordingBackend(/*fail_float16=*/true));
  ASSERT_EQ(o.warmups.size(), 1u);
  EXPECT_EQ(o.warmups[0].observed, Observed::kError);
  EXPECT_EQ(o.warmups[0].error_stage, "backend");
  EXPECT_EQ(o.warmups[0].verdict, Verdict::kFail);
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_THAT(o.mismatches, IsEmpty());

  const std::string text = FormatOutcomeText(c, "x.json", o);
  EXPECT_THAT(text,
              HasSubstr("\n  warmup:     1 call first, on the same backend (not judged)\n"
                        "    [0] {\"call\":{\"kwargs\":{\"softmax_scale\":0.5}},\"geometry\":"
                        "{\"dtype\":\"float16\",\"softmax_scale\":0.5}}: FAIL, error raised by "
                        "the backend\n        INTERNAL: no float16 here\n"));
  EXPECT_THAT(text, HasSubstr("\n  verdict:    PASS\n"));
  const json j = json::parse(OutcomeToJson(c, "x.json", o).dump());
  ASSERT_EQ(j["warmup"].size(), 1u);
  EXPECT_EQ(j["warmup"][0]["patch"]["geometry"]["dtype"], "float16");
  EXPECT_EQ(j["warmup"][0]["observed"], "error");
  EXPECT_EQ(j["warmup"][0]["verdict"], "FAIL");
  EXPECT_EQ(j["warmup"][0]["error"], "INTERNAL: no float16 here");
  EXPECT_EQ(j["verdict"], "PASS");
  EXPECT_FALSE(json::parse(OutcomeToJson(ParseOrDie(Fa3Case()), "x.json",
                                         RunCase(ParseOrDie(Fa3Case()), Reference()))
                               .dump())
                   .contains("warmup"));
}

// ---------------------------------------------------------------------------
// Expectation details

TEST(ExecutorTest, HostSyncExpectationIsChecked) {
  json j = Fa3Case();
  j["expect"] = {{"outcome", "success"}, {"host_syncs", 0}};
  Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_THAT(o.mismatches, IsEmpty());

  // Without max_seqlen, fa3 computes it from cu_seqlens on the device: one
  // host sync.
  j["call"]["kwargs"] = json::object();
  o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches, ElementsAre("expected 0 host syncs during resolution; observed 1"));
  j["expect"]["host_syncs"] = 1;
  EXPECT_EQ(RunCase(ParseOrDie(j), Reference()).verdict, Verdict::kPass);
}

TEST(ExecutorTest, ResolvedSubsetMatches) {
  json j = Fa3Case();
  j["expect"] = json::parse(R"({"outcome": "success", "resolved": {
    "profile": "fa3", "max_seqlen": 5, "cu_seqlens": {"tensor": [0, 3, 8], "device": "cuda"}}})");
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.verdict, Verdict::kPass);
  EXPECT_THAT(o.mismatches, IsEmpty());
}

TEST(ExecutorTest, ResolvedSubsetMismatchesAreNamed) {
  const std::pair<const char*, std::string> cases[] = {
      {R"({"max_seqlen": 6})", "resolved.max_seqlen: expected 6, got 5"},
      {R"({"window": 1})", "resolved.window: absent from the resolved arguments"},
      {R"({"cu_seqlens": {"dtype": "int64"}})",
       "resolved.cu_seqlens.dtype: expected \"int64\", got \"int32\""},
      {R"({"cu_seqlens": {"tensor": [0, 3]}})",
       "resolved.cu_seqlens.tensor: expected [0,3], got [0,3,8]"},
      {R"({"max_seqlen": {"value": 5}})", "resolved.max_seqlen: expected an object, got 5"},
  };
  for (const auto& [resolved, mismatch] : cases) {
    SCOPED_TRACE(resolved);
    json j = Fa3Case();
    j["expect"] = {{"outcome", "success"}, {"resolved", json::parse(resolved)}};
    const Outcome o = RunCase(ParseOrDie(j), Reference());
    EXPECT_EQ(o.observed, Observed::kSuccess);
    EXPECT_EQ(o.verdict, Verdict::kFail);
    EXPECT_THAT(o.mismatches, ElementsAre(mismatch));
  }
}

TEST(ExecutorTest, ResolvedExpectationWithoutAResolutionFails) {
  json j = SeedCase();
  j["expect"]["resolved"] = {{"max_token_per_sequence", 72}};
  const Outcome o = RunCase(ParseOrDie(j), Reference());
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_THAT(o.mismatches,
              ElementsAre("expected resolved arguments, but resolution did not succeed"));
}

// ---------------------------------------------------------------------------
// Resolution only and unsupported

TEST(ExecutorTest, GeometryOverTheBudgetRunsResolutionOnly) {
  if (GpuReferenceAvailable().ok()) GTEST_SKIP() << "a GPU runs this geometry's oracle here";
  const Case c = ParseOrDie(json::parse(R"({
    "name": "fa3-over-budget",
    "source": "unit test",
    "mode": "faithful",
    "geometry": {"seq_lens": [20000], "num_heads": 16, "head_dim": 64, "dtype": "bfloat16"},
    "call": {
      "profile": "fa3",
      "cu_seqlens": {"tensor": [0, 20000], "dtype": "int32", "device": "cuda"},
      "kwargs": {"max_seqlen": 20000}
    },
    "expect": {"outcome": "success", "resolved": {"max_seqlen": 20000}}
  })"));
  CaseRunner runner(c);
  EXPECT_FALSE(runner.runs_forward());
  const Outcome o = runner.Run(Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.verdict, Verdict::kPass);
  // 20000^2 * 16 * 128 multiply-adds; 20000 * (16 + 16) * 128 elements.
  EXPECT_THAT(o.resolution_only_reason,
              StartsWith("resolution only: the geometry exceeds the CPU budget (819200000000 "
                         "multiply-adds, 81920000 elements) and no GPU oracle runs here: "));
  EXPECT_FALSE(o.numerics.has_value());
  // The kernel's entry was met on the shapes alone.
  EXPECT_THAT(o.kernel, HasSubstr("flash_attn_varlen_func"));
  EXPECT_EQ(OutcomeToJson(c, "x.json", o)["resolution_only"], o.resolution_only_reason);
  EXPECT_THAT(FormatOutcomeText(c, "x.json", o),
              HasSubstr("  outcome:    success (resolution only: the geometry exceeds"));
}

// A call over the budget still meets the kernel's entry checks, which need
// shapes, not values: FlashAttention 4's DSL refuses transformers 5.14.1's
// 0-d tensor max whatever the geometry.
TEST(ExecutorTest, GeometryOverTheBudgetStillMeetsTheKernelEntry) {
  if (GpuReferenceAvailable().ok()) GTEST_SKIP() << "a GPU runs this geometry's oracle here";
  const Case c = ParseOrDie(json::parse(R"({
    "name": "fa4-tensor-max-over-budget",
    "source": "unit test",
    "engine": "transformers",
    "transformers": "5.14.1",
    "mode": "faithful",
    "geometry": {"seq_lens": [20000], "num_heads": 16, "head_dim": 64, "dtype": "bfloat16"},
    "call": {
      "profile": "flash_attention_4",
      "entry": "layer",
      "cu_seqlens": {"tensor": [0, 20000], "dtype": "int32", "device": "cuda"}
    }
  })"));
  CaseRunner runner(c);
  EXPECT_FALSE(runner.runs_forward());
  const Outcome o = runner.Run(Reference());
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.error_stage, "kernel entry");
  EXPECT_THAT(FormatPythonError(o.error),
              HasSubstr("DSLRuntimeError: expects argument #26 (max_seqlen_q) to be one of "
                        "(Int32, int, NoneType), but got torch.Tensor"));
  EXPECT_TRUE(o.resolution_only_reason.empty());
}

TEST(ExecutorTest, GeometryOverBothBudgetsRunsResolutionOnlyEverywhere) {
  const Case c = ParseOrDie(json::parse(R"({
    "name": "fa3-over-both-budgets",
    "source": "unit test",
    "mode": "faithful",
    "geometry": {"seq_lens": [2000000], "num_heads": 16, "head_dim": 64, "dtype": "bfloat16"},
    "call": {
      "profile": "fa3",
      "cu_seqlens": {"tensor": [0, 2000000], "dtype": "int32", "device": "cuda"},
      "kwargs": {"max_seqlen": 2000000}
    }
  })"));
  const Outcome o = RunCase(c, Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.resolution_only_reason,
            "resolution only: the geometry exceeds the CPU and the GPU budgets "
            "(8192000000000000 multiply-adds, 8192000000 elements)");
}

TEST(ExecutorTest, ForwardRunsCanBeDisabled) {
  RunOptions options;
  options.allow_forward = false;
  CaseRunner runner(ParseOrDie(Fa3Case()), options);
  EXPECT_FALSE(runner.runs_forward());
  const Outcome o = runner.Run(Reference());
  EXPECT_EQ(o.observed, Observed::kSuccess);
  EXPECT_EQ(o.resolution_only_reason, "resolution only: forward runs disabled");
  EXPECT_FALSE(o.numerics.has_value());
}

TEST(ExecutorTest, UnsupportedGeometryIsNeitherPassNorFail) {
  json j = Fa3Case();
  j["expect"] = {{"outcome", "success"}};
  const Case c = ParseOrDie(j);
  const Outcome o = RunCase(c, Float16OnlyBackend());
  EXPECT_EQ(o.observed, Observed::kUnsupported);
  EXPECT_EQ(o.verdict, Verdict::kUnsupported);
  EXPECT_EQ(o.unsupported.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(o.unsupported.message(), "fp16_only does not support dtype bfloat16");
  EXPECT_THAT(o.mismatches, IsEmpty());
  EXPECT_FALSE(o.numerics.has_value());
  const json report = json::parse(OutcomeToJson(c, "x.json", o).dump());
  EXPECT_EQ(report["verdict"], "UNSUPPORTED");
  EXPECT_EQ(report["observed"], "unsupported");
  EXPECT_EQ(report["unsupported"], "fp16_only does not support dtype bfloat16");
  EXPECT_THAT(FormatOutcomeText(c, "x.json", o),
              HasSubstr("  outcome:    unsupported: fp16_only does not support dtype bfloat16\n"));
}

TEST(ExecutorTest, UnavailableBackendIsUnsupported) {
  const Outcome o = RunCase(ParseOrDie(Fa3Case()), UnavailableBackend());
  EXPECT_EQ(o.observed, Observed::kUnsupported);
  EXPECT_EQ(o.verdict, Verdict::kUnsupported);
  EXPECT_EQ(o.unsupported.message(), "no device here");
}

// Declares everything, then refuses at run time.
class RefusingBackend final : public Backend {
 public:
  absl::string_view name() const override { return "refusing"; }
  absl::string_view description() const override { return "claims support, then refuses"; }
  BackendCapabilities capabilities() const override { return Reference().capabilities(); }
  absl::Status Run(const VarlenAttentionParams&) const override {
    return absl::UnimplementedError("head_dim 8 is not compiled in");
  }
};

TEST(ExecutorTest, RefusingAfterClaimingSupportFails) {
  const Outcome o = RunCase(ParseOrDie(Fa3Case()), RefusingBackend());
  EXPECT_EQ(o.observed, Observed::kError);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_EQ(o.error_stage, "backend");
  EXPECT_EQ(o.error.message(),
            "Supports() accepted the call, then Run() answered: head_dim 8 is not compiled in");
}

// Consumes sdpa's kernel arguments only.
class SdpaOnlyBackend final : public Backend {
 public:
  absl::string_view name() const override { return "sdpa_only"; }
  absl::string_view description() const override { return "sdpa's calling convention only"; }
  BackendCapabilities capabilities() const override {
    BackendCapabilities caps = Reference().capabilities();
    caps.profiles = {Profile::kSdpa};
    return caps;
  }
  absl::Status Run(const VarlenAttentionParams& p) const override { return Reference().Run(p); }
};

TEST(ExecutorTest, AProfileTheBackendDoesNotConsumeIsUnsupported) {
  const Outcome o = RunCase(ParseOrDie(Fa3Case()), SdpaOnlyBackend());
  EXPECT_EQ(o.verdict, Verdict::kUnsupported);
  EXPECT_EQ(o.unsupported.message(), "sdpa_only consumes the kernel arguments of sdpa, not fa3");
}

// Computes exactly, then replaces NaN and Inf with 0 (a nan_to_num in the
// epilogue).
class ScrubbingBackend final : public Backend {
 public:
  absl::string_view name() const override { return "scrubbing"; }
  absl::string_view description() const override { return "hides NaN and Inf"; }
  BackendCapabilities capabilities() const override { return Reference().capabilities(); }
  absl::Status Run(const VarlenAttentionParams& p) const override {
    VARLEN_RETURN_IF_ERROR(Reference().Run(p));
    VARLEN_DISPATCH_FLOAT_TYPES(p.output_dtype, T, [&] {
      for (int64_t i = 0; i < p.o_numel; ++i) {
        if (!std::isfinite(kernels::LoadAsDouble<T>(p.o, i)))
          kernels::StoreFromDouble<T>(p.o, i, 0.0);
      }
    });
    return absl::OkStatus();
  }
};

TEST(ExecutorTest, NonFiniteValuesMustPropagateWhereTheReferenceHasThem) {
  json j = Fa3Case();
  j["data"] = {{"seed", 3}, {"distribution", "non_finite"}};
  j["geometry"]["seq_lens"] = {30, 50};
  j["call"]["cu_seqlens"]["tensor"] = {0, 30, 80};
  j["call"]["kwargs"]["max_seqlen"] = 50;
  const Case c = ParseOrDie(j);
  const Outcome exact = RunCase(c, Reference());
  ASSERT_EQ(exact.verdict, Verdict::kPass) << SummarizeNumerics(*exact.numerics);
  const Outcome scrubbed = RunCase(c, ScrubbingBackend());
  EXPECT_EQ(scrubbed.observed, Observed::kCorruption);
  ASSERT_TRUE(scrubbed.numerics.has_value());
  EXPECT_GT(scrubbed.numerics->lost_non_finite, 0);
  EXPECT_THAT(SummarizeNumerics(*scrubbed.numerics),
              HasSubstr("elements not NaN/Inf (or of another kind) where the reference is"));
}

// ---------------------------------------------------------------------------
// Reports

TEST(ReportTest, TextShowsThePythonErrorOnALineOfItsOwn) {
  const Case c = ParseOrDie(SeedCase());
  const Outcome o = RunCase(c, Reference());
  const std::string text = FormatOutcomeText(c, "x.json", o);
  EXPECT_THAT(text, StartsWith("case flashinfer-cudnn-seed-missing-sequence-lengths  (x.json)\n"));
  EXPECT_THAT(text, HasSubstr("\n  source:     SGLang #19003; contract rule 11\n"));
  EXPECT_THAT(text, HasSubstr("\n  call:       flashinfer_cudnn faithful (SGLang 0.5.23), direct, "
                              "backend cpu_reference\n"));
  EXPECT_THAT(text, HasSubstr("\n  geometry:   seq_lens [48, 72], heads 16/16, head_dim 72/72, "
                              "bfloat16\n"));
  EXPECT_THAT(text, HasSubstr("\n  outcome:    error raised by the resolution\n"));
  EXPECT_THAT(text, HasSubstr("\n" + std::string(kSeedMessage) + "\n"));
  EXPECT_THAT(text, HasSubstr("\n  expected:   " + std::string(kSeedMessage) + "\n"));
  EXPECT_THAT(text, HasSubstr("\n  verdict:    PASS\n"));
  EXPECT_EQ(text.back(), '\n');
}

TEST(ReportTest, JsonOfAnErrorOutcome) {
  const Case c = ParseOrDie(SeedCase());
  const Outcome o = RunCase(c, Reference());
  const json j = json::parse(OutcomeToJson(c, "x.json", o).dump());
  EXPECT_EQ(j["case"], "flashinfer-cudnn-seed-missing-sequence-lengths");
  EXPECT_EQ(j["file"], "x.json");
  EXPECT_EQ(j["source"], "SGLang #19003; contract rule 11");
  EXPECT_EQ(j["backend"], "cpu_reference");
  EXPECT_EQ(j["mode"], "faithful");
  EXPECT_EQ(j["profile"], "flashinfer_cudnn");
  EXPECT_EQ(j["observed"], "error");
  EXPECT_EQ(j["verdict"], "PASS");
  EXPECT_EQ(j["mismatches"], json::array());
  EXPECT_EQ(j["error"], json({{"stage", "resolution"}, {"text", kSeedMessage}}));
  EXPECT_EQ(j["device_events"], json({{"host_syncs", 0},
                                      {"host_to_device_copies", 0},
                                      {"device_to_host_copies", 0},
                                      {"casts", 0},
                                      {"events", json::array()}}));
  EXPECT_TRUE(j["notes"].is_array());
  EXPECT_FALSE(j.contains("resolved"));
  EXPECT_FALSE(j.contains("numerics"));
  EXPECT_FALSE(j.contains("resolution_only"));
  EXPECT_FALSE(j.contains("unsupported"));
  EXPECT_FALSE(j.contains("kernel_fault"));
}

TEST(ReportTest, JsonOfACorruptionOutcome) {
  const Case c = ParseOrDie(TooSmallMaxSeqlen("success"));
  const Outcome o = RunCase(c, Reference());
  const json j = json::parse(OutcomeToJson(c, "x.json", o).dump());
  EXPECT_EQ(j["observed"], "silent corruption");
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["mismatches"], json::array({"expected success; observed silent corruption"}));
  EXPECT_FALSE(j.contains("error"));
  EXPECT_EQ(j["resolved"]["profile"], "fa3");
  EXPECT_EQ(j["resolved"]["max_seqlen"], 100);
  EXPECT_EQ(j["resolved"]["cu_seqlens"],
            json::parse(R"({"tensor": [0, 100, 400], "dtype": "int32", "device": "cuda"})"));
  const json& n = j["numerics"];
  EXPECT_EQ(n["passed"], false);
  EXPECT_EQ(n["unwritten"], 2752);
  EXPECT_EQ(n["non_finite"], 0);
  EXPECT_EQ(n["worst"]["sequence"], 1);
  EXPECT_EQ(n["worst"]["row"], 128);
  EXPECT_EQ(n["worst"]["head"], 0);
  EXPECT_EQ(n["worst"]["dim"], 0);
  EXPECT_EQ(n["per_sequence_max_error"].size(), 2u);
  for (const char* key :
       {"max_abs_error", "max_rel_error", "bound", "emulation_error", "noise_floor"}) {
    EXPECT_TRUE(n[key].is_number()) << key;
  }
  EXPECT_EQ(n["bound"].get<double>(), o.numerics->bound);
}

// A version whose run made no forward call has no output to judge: a
// corruption before it is "changed", never "fixed" (an --sglang=all run once
// called a silent corruption fixed so).
TEST(CompareVersionsTest, NeverClaimsAFixAcrossAResolutionOnlyRun) {
  Outcome corrupt;
  corrupt.observed = Observed::kCorruption;
  Outcome unjudged;
  unjudged.observed = Observed::kSuccess;
  unjudged.resolution_only_reason = "no kernel models this launch";
  const VersionDifference d =
      CompareVersions(corrupt, SglangVersion::k0026249, unjudged, SglangVersion::k0_5_23);
  EXPECT_EQ(d.summary, "changed in 0.5.23");
  EXPECT_THAT(d.compared, ::testing::HasSubstr("0.5.23 ran for resolution only (no kernel models "
                                               "this launch): no output judged there"));

  Outcome judged;
  judged.observed = Observed::kSuccess;
  const VersionDifference fixed =
      CompareVersions(corrupt, SglangVersion::k0026249, judged, SglangVersion::k0_5_23);
  EXPECT_EQ(fixed.summary, "fixed in 0.5.23");
  EXPECT_EQ(fixed.compared, "outcome, error, resolved arguments and device events");
}

}  // namespace
}  // namespace varlen
