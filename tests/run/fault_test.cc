// A fault travels as a status payload through every layer that passes a
// backend's status on.

#include "varlen/backend/fault.h"

#include "absl/strings/str_replace.h"
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

TEST(FaultTest, SignatureGroupsRepeatsAndSeparatesCauses) {
  const Fault asan{FaultKind::kCrash, "signal 6 (SIGABRT) while running the run call",
                   "==1==ERROR: AddressSanitizer: heap-buffer-overflow\n"
                   "    #0 0x55d1c0 in Kernel(float*) kernel.cc:40:7\n"
                   "    #1 0x55d1c8 in main main.cc:3"};
  Fault moved = asan;  // the same bug in another build: other addresses
  moved.log_tail = absl::StrReplaceAll(moved.log_tail, {{"0x55d1c0", "0x7f0010"}});
  EXPECT_EQ(FaultSignature(asan),
            "CRASH: signal 6 (SIGABRT) while running the run call at Kernel(float*) "
            "kernel.cc:40:7");
  EXPECT_EQ(FaultSignature(moved), FaultSignature(asan));

  const Fault python{FaultKind::kCrash, "signal 6 (SIGABRT) while running the run call",
                     "Traceback (most recent call last):\n"
                     "  File \"/x/backend.py\", line 9, in helper\n"
                     "    raise RuntimeError(\"case 17\")\n"
                     "RuntimeError: case 17"};
  EXPECT_EQ(FaultSignature(python),
            "CRASH: signal 6 (SIGABRT) while running the run call at File \"/x/backend.py\", "
            "line 9, in helper (RuntimeError)");

  // A deadline or a size varies by case; the kind alone groups them.
  EXPECT_EQ(FaultSignature({FaultKind::kTimeout, "no answer within 3.0 s", ""}), "TIMEOUT");
  EXPECT_EQ(FaultSignature({FaultKind::kTimeout, "no answer within 9.5 s", ""}), "TIMEOUT");
  EXPECT_NE(FaultSignature({FaultKind::kCrash, "signal 11 (SIGSEGV)", ""}),
            FaultSignature({FaultKind::kCrash, "signal 6 (SIGABRT)", ""}));
}

}  // namespace
}  // namespace varlen
