// What travels between a supervisor and its worker arrives as it was sent:
// statuses with any bytes and payloads, and an engine call's result.

#include "run/wire.h"

#include <cmath>
#include <string>

#include "absl/strings/cord.h"
#include "gtest/gtest.h"
#include "varlen/backend/fault.h"

namespace varlen::run_internal {
namespace {

// Through the text a pipe carries, as the worker's answer travels.
nlohmann::json Sent(const nlohmann::json& j) { return nlohmann::json::parse(j.dump()); }

TEST(WireTest, StatusesKeepTheirBytesAndPayloads) {
  const std::string not_utf8 = "bad byte \xff in a message";
  const absl::Status fault = FaultStatus({FaultKind::kCrash, not_utf8, "tail\n"});
  const absl::Status back = DecodeStatus(Sent(EncodeStatus(fault)));
  EXPECT_EQ(back, fault);
  ASSERT_TRUE(FaultOf(back).has_value());
  EXPECT_EQ(FaultOf(back)->summary, not_utf8);
  EXPECT_TRUE(DecodeStatus(Sent(EncodeStatus(absl::OkStatus()))).ok());
}

TEST(WireTest, AnEngineCallThatRaisedKeepsTypeAndMessage) {
  EngineCallResult raised;
  raised.raised_type = "RuntimeError";
  raised.raised_message = "sequence_lengths should be prepared \xe2\x80\x94 \xff";
  absl::StatusOr<EngineCallResult> back =
      DecodeEngineCallResult(Sent(EncodeEngineCallResult(raised)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->raised_type, raised.raised_type);
  EXPECT_EQ(back->raised_message, raised.raised_message);
  EXPECT_FALSE(back->output.has_value());
  EXPECT_FALSE(back->device_events.has_value());
}

TEST(WireTest, AnEngineCallsOutputArrivesBitForBit) {
  EngineCallResult returned;
  // Values a half-precision output may hold, NaN and -0 among them.
  returned.output = Tensor::FromDoubles({1.5, -0.0, 65504.0, std::nan(""), -3.25, 1e-7},
                                        DType::kBFloat16, Device::kCpu, Shape{1, 2, 3});
  returned.device_events = DeviceEventCounts{1, 2, 3, 4};
  absl::StatusOr<EngineCallResult> back =
      DecodeEngineCallResult(Sent(EncodeEngineCallResult(returned)));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->output.has_value());
  const Tensor& a = *returned.output;
  const Tensor& b = *back->output;
  EXPECT_EQ(b.dtype(), a.dtype());
  EXPECT_EQ(b.device(), a.device());
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(std::string(b.data<char>(), 12), std::string(a.data<char>(), 12));
  EXPECT_EQ(back->device_events, returned.device_events);
  EXPECT_FALSE(back->raised_type.has_value());
}

TEST(WireTest, AnOutputWhoseBytesDoNotFitItsShapeIsRefused) {
  EngineCallResult returned;
  returned.output = Tensor::Zeros(DType::kFloat32, Device::kCpu, Shape{2, 2});
  nlohmann::json j = EncodeEngineCallResult(returned);
  j["output"]["shape"] = {3, 2};
  EXPECT_FALSE(DecodeEngineCallResult(j).ok());
  j["output"]["bytes"] = "not base64 !";
  EXPECT_FALSE(DecodeEngineCallResult(j).ok());
}

}  // namespace
}  // namespace varlen::run_internal
