// A fault travels as a status payload through every layer that passes a
// backend's status on.

#include "varlen/backend/fault.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

using ::testing::HasSubstr;

TEST(FaultTest, RoundTripsThroughAStatus) {
  const Fault fault{FaultKind::kTimeout, "no answer within 2.0 s to the run call",
                    "line one\nline two"};
  const absl::Status status = FaultStatus(fault);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "TIMEOUT: no answer within 2.0 s to the run call");
  const std::optional<Fault> back = FaultOf(status);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->kind, FaultKind::kTimeout);
  EXPECT_EQ(back->summary, fault.summary);
  EXPECT_EQ(back->log_tail, fault.log_tail);
}

TEST(FaultTest, OrdinaryStatusesCarryNone) {
  EXPECT_FALSE(FaultOf(absl::OkStatus()).has_value());
  EXPECT_FALSE(FaultOf(absl::InternalError("CRASH: looks like one")).has_value());
}

TEST(FaultTest, KindsHaveNamesThatParseBack) {
  for (FaultKind kind :
       {FaultKind::kCrash, FaultKind::kTimeout, FaultKind::kOom, FaultKind::kVanished,
        FaultKind::kWriteOutside, FaultKind::kInputChanged}) {
    EXPECT_EQ(ParseFaultKind(FaultKindName(kind)), kind);
  }
  EXPECT_FALSE(ParseFaultKind("crash").has_value());
}

TEST(FaultTest, DescriptionQuotesTheWorkersLastOutput) {
  const std::string text =
      DescribeFault({FaultKind::kCrash, "signal 11 (SIGSEGV) while running the run call",
                     "AddressSanitizer: SEGV on unknown address\n#0 in Run"});
  EXPECT_THAT(text, HasSubstr("CRASH: signal 11 (SIGSEGV)"));
  EXPECT_THAT(text, HasSubstr("| AddressSanitizer: SEGV on unknown address\n    | #0 in Run"));
}

}  // namespace
}  // namespace varlen
