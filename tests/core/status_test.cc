// Tests for Python error kinds on absl::Status and the early-return macros.

#include "varlen/core/status.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

struct KindCase {
  PyErrorKind kind;
  const char* name;
};

constexpr KindCase kAllKinds[] = {
    {PyErrorKind::kRuntimeError, "RuntimeError"},
    {PyErrorKind::kTypeError, "TypeError"},
    {PyErrorKind::kValueError, "ValueError"},
    {PyErrorKind::kAssertionError, "AssertionError"},
    {PyErrorKind::kAttributeError, "AttributeError"},
    {PyErrorKind::kOverflowError, "OverflowError"},
    {PyErrorKind::kIndexError, "IndexError"},
    {PyErrorKind::kZeroDivisionError, "ZeroDivisionError"},
    {PyErrorKind::kNotImplementedError, "NotImplementedError"},
    {PyErrorKind::kException, "Exception"},
    {PyErrorKind::kKeyError, "KeyError"},
    {PyErrorKind::kDslRuntimeError, "DSLRuntimeError"},
};

TEST(PyErrorKindTest, NamesAreThePythonClassNames) {
  for (const KindCase& k : kAllKinds) {
    EXPECT_EQ(PyErrorKindName(k.kind), k.name);
  }
}

TEST(PyErrorKindTest, ParseRoundTripsEveryName) {
  for (const KindCase& k : kAllKinds) {
    EXPECT_EQ(ParsePyErrorKind(k.name), k.kind) << k.name;
    EXPECT_EQ(ParsePyErrorKind(PyErrorKindName(k.kind)), k.kind) << k.name;
  }
}

TEST(PyErrorKindTest, ParseRejectsOtherNames) {
  for (const char* name : {"", "runtimeerror", "RuntimeError ", "LookupError", "BaseException",
                           "Error", "builtins.ValueError", "UNIMPLEMENTED"}) {
    EXPECT_EQ(ParsePyErrorKind(name), std::nullopt) << name;
  }
}

TEST(PythonErrorTest, EveryKindIsCarriedWithItsMessage) {
  for (const KindCase& k : kAllKinds) {
    const absl::Status status = PythonError(k.kind, "max_seqlen must be an int");
    EXPECT_FALSE(status.ok()) << k.name;
    EXPECT_EQ(status.message(), "max_seqlen must be an int") << k.name;
    EXPECT_EQ(PythonErrorKindOf(status), k.kind) << k.name;
    EXPECT_EQ(FormatPythonError(status), std::string(k.name) + ": max_seqlen must be an int");
  }
}

TEST(PythonErrorTest, NoKindOnOkAndNonPythonStatuses) {
  EXPECT_EQ(PythonErrorKindOf(absl::OkStatus()), std::nullopt);
  EXPECT_EQ(PythonErrorKindOf(absl::UnimplementedError("no fp8 on this backend")), std::nullopt);
  EXPECT_EQ(PythonErrorKindOf(absl::InternalError("bug")), std::nullopt);
  EXPECT_EQ(PythonErrorKindOf(absl::InvalidArgumentError("bad")), std::nullopt);
  EXPECT_EQ(PythonErrorKindOf(absl::FailedPreconditionError("bad")), std::nullopt);
}

TEST(PythonErrorTest, NotSupportedIsNeverAPythonError) {
  // The harness counts "not supported" separately, so no kind may map to it.
  for (const KindCase& k : kAllKinds) {
    EXPECT_NE(PythonError(k.kind, "x").code(), absl::StatusCode::kUnimplemented) << k.name;
    EXPECT_NE(PythonError(k.kind, "x").code(), absl::StatusCode::kOk) << k.name;
  }
}

TEST(FormatPythonErrorTest, PythonErrorsPrintLikePython) {
  EXPECT_EQ(FormatPythonError(
                PythonError(PyErrorKind::kRuntimeError, "sequence_lengths should be prepared")),
            "RuntimeError: sequence_lengths should be prepared");
  EXPECT_EQ(FormatPythonError(PythonError(
                PyErrorKind::kTypeError,
                "int() argument must be a string, a bytes-like object or a real number, "
                "not 'NoneType'")),
            "TypeError: int() argument must be a string, a bytes-like object or a real "
            "number, not 'NoneType'");
}

TEST(FormatPythonErrorTest, EmptyMessagePrintsTheBareClassName) {
  EXPECT_EQ(FormatPythonError(PythonError(PyErrorKind::kAssertionError, "")), "AssertionError");
  for (const KindCase& k : kAllKinds) {
    EXPECT_EQ(FormatPythonError(PythonError(k.kind, "")), k.name);
  }
}

TEST(FormatPythonErrorTest, NonPythonStatusesPrintCodeAndMessage) {
  EXPECT_EQ(FormatPythonError(absl::UnimplementedError("no fp8 on this backend")),
            "UNIMPLEMENTED: no fp8 on this backend");
  EXPECT_EQ(FormatPythonError(absl::InternalError("bug")), "INTERNAL: bug");
  EXPECT_EQ(FormatPythonError(absl::InvalidArgumentError("bad dtype")),
            "INVALID_ARGUMENT: bad dtype");
  EXPECT_EQ(FormatPythonError(absl::OutOfRangeError("")), "OUT_OF_RANGE: ");
}

TEST(FormatPythonErrorTest, OkPrintsOk) { EXPECT_EQ(FormatPythonError(absl::OkStatus()), "OK"); }

// ---------------------------------------------------------------------------
// Macros

absl::Status ReturnIfError(absl::Status first, int* reached) {
  VARLEN_RETURN_IF_ERROR(first);
  ++*reached;
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, ContinuesOnOk) {
  int reached = 0;
  EXPECT_TRUE(ReturnIfError(absl::OkStatus(), &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(ReturnIfErrorTest, ReturnsTheErrorUnchanged) {
  int reached = 0;
  const absl::Status status =
      ReturnIfError(PythonError(PyErrorKind::kAssertionError, "cu_seqlens"), &reached);
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(PythonErrorKindOf(status), PyErrorKind::kAssertionError);
  EXPECT_EQ(status.message(), "cu_seqlens");
}

TEST(ReturnIfErrorTest, EvaluatesTheExpressionOnce) {
  int calls = 0;
  auto run = [&]() -> absl::Status {
    VARLEN_RETURN_IF_ERROR((++calls, absl::OkStatus()));
    return absl::OkStatus();
  };
  EXPECT_TRUE(run().ok());
  EXPECT_EQ(calls, 1);
}

TEST(ReturnIfErrorTest, WorksAsASingleStatementInIfElse) {
  auto run = [](bool fail) -> absl::Status {
    if (fail)
      VARLEN_RETURN_IF_ERROR(PythonError(PyErrorKind::kTypeError, "t"));
    else
      return absl::InternalError("else branch");
    return absl::OkStatus();
  };
  EXPECT_EQ(PythonErrorKindOf(run(true)), PyErrorKind::kTypeError);
  EXPECT_EQ(run(true).message(), "t");
  EXPECT_EQ(FormatPythonError(run(false)), "INTERNAL: else branch");
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return PythonError(PyErrorKind::kValueError, "odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  VARLEN_ASSIGN_OR_RETURN(const int half, Half(x));
  VARLEN_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(AssignOrReturnTest, AssignsOnSuccess) {
  absl::StatusOr<int> result = Quarter(12);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, 3);
}

TEST(AssignOrReturnTest, ReturnsTheFirstError) {
  absl::StatusOr<int> result = Quarter(7);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(PythonErrorKindOf(result.status()), PyErrorKind::kValueError);
  EXPECT_EQ(result.status().message(), "odd");
}

TEST(AssignOrReturnTest, ReturnsTheSecondError) {
  absl::StatusOr<int> result = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(PythonErrorKindOf(result.status()), PyErrorKind::kValueError);
  EXPECT_EQ(result.status().message(), "odd");
}

TEST(AssignOrReturnTest, AssignsToAnExistingVariableAndMovesMoveOnlyValues) {
  auto make = [](bool ok) -> absl::StatusOr<std::unique_ptr<int>> {
    if (!ok) return PythonError(PyErrorKind::kAttributeError, "no attribute 'data'");
    return std::make_unique<int>(42);
  };
  auto run = [&](bool ok) -> absl::StatusOr<int> {
    std::unique_ptr<int> p;
    VARLEN_ASSIGN_OR_RETURN(p, make(ok));
    return *p;
  };
  ASSERT_TRUE(run(true).ok());
  EXPECT_EQ(*run(true), 42);
  const absl::Status status = run(false).status();
  EXPECT_EQ(PythonErrorKindOf(status), PyErrorKind::kAttributeError);
  EXPECT_EQ(status.message(), "no attribute 'data'");
}

TEST(AssignOrReturnTest, PropagatesIntoAStatusReturningFunction) {
  auto run = [](int x, int* out) -> absl::Status {
    VARLEN_ASSIGN_OR_RETURN(*out, Half(x));
    return absl::OkStatus();
  };
  int out = -1;
  EXPECT_TRUE(run(8, &out).ok());
  EXPECT_EQ(out, 4);
  out = -1;
  const absl::Status status = run(9, &out);
  EXPECT_EQ(PythonErrorKindOf(status), PyErrorKind::kValueError);
  EXPECT_EQ(status.message(), "odd");
  EXPECT_EQ(out, -1);
}

}  // namespace
}  // namespace varlen
