#include "wire.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"

namespace varlen::run_internal {
namespace {

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Doubles travel as their bits: a corrupted launch's scale may be NaN.
uint64_t Bits(double x) { return std::bit_cast<uint64_t>(x); }
double FromBits(uint64_t bits) { return std::bit_cast<double>(bits); }

}  // namespace

bool WriteMessage(int fd, const std::string& bytes) {
  const uint32_t size = static_cast<uint32_t>(bytes.size());
  const char header[4] = {static_cast<char>(size), static_cast<char>(size >> 8),
                          static_cast<char>(size >> 16), static_cast<char>(size >> 24)};
  return WriteAll(fd, header, 4) && WriteAll(fd, bytes.data(), bytes.size());
}

std::optional<std::string> ReadMessage(int fd) {
  unsigned char header[4];
  if (!ReadAll(fd, reinterpret_cast<char*>(header), 4)) return std::nullopt;
  const uint32_t size =
      header[0] | header[1] << 8 | header[2] << 16 | static_cast<uint32_t>(header[3]) << 24;
  std::string bytes(size, '\0');
  if (!ReadAll(fd, bytes.data(), size)) return std::nullopt;
  return bytes;
}

nlohmann::json EncodeLaunch(const VarlenAttentionParams& p, const LaunchOffsets& at) {
  return {
      {"input_dtype", static_cast<int>(p.input_dtype)},
      {"output_dtype", static_cast<int>(p.output_dtype)},
      {"numel", {p.q_numel, p.k_numel, p.v_numel, p.o_numel}},
      {"strides",
       {p.q_token_stride, p.q_head_stride, p.k_token_stride, p.k_head_stride, p.v_token_stride,
        p.v_head_stride, p.o_token_stride, p.o_head_stride}},
      {"heads", {p.num_heads_q, p.num_heads_kv, p.head_dim_qk, p.head_dim_v}},
      {"scale_bits", Bits(p.softmax_scale)},
      {"batch", p.batch},
      {"max", {p.max_rows_q, p.max_keys}},
      {"window", {p.window_left, p.window_right}},
      {"sinks", p.sinks != nullptr ? nlohmann::json(at.sinks) : nlohmann::json()},
      {"at",
       {at.q, at.k, at.v, at.o, at.q_start, at.k_start, at.v_start, at.o_start, at.seqlen_q,
        at.seqlen_k}},
  };
}

VarlenAttentionParams DecodeLaunch(const nlohmann::json& j, uint8_t* arena) {
  VarlenAttentionParams p;
  p.input_dtype = static_cast<DType>(j.at("input_dtype").get<int>());
  p.output_dtype = static_cast<DType>(j.at("output_dtype").get<int>());
  const auto& numel = j.at("numel");
  p.q_numel = numel[0], p.k_numel = numel[1], p.v_numel = numel[2], p.o_numel = numel[3];
  const auto& s = j.at("strides");
  p.q_token_stride = s[0], p.q_head_stride = s[1], p.k_token_stride = s[2];
  p.k_head_stride = s[3], p.v_token_stride = s[4], p.v_head_stride = s[5];
  p.o_token_stride = s[6], p.o_head_stride = s[7];
  const auto& h = j.at("heads");
  p.num_heads_q = h[0], p.num_heads_kv = h[1], p.head_dim_qk = h[2], p.head_dim_v = h[3];
  p.softmax_scale = FromBits(j.at("scale_bits").get<uint64_t>());
  p.batch = j.at("batch");
  p.max_rows_q = j.at("max")[0], p.max_keys = j.at("max")[1];
  const auto& at = j.at("at");
  const auto ptr = [&](int i) { return arena + at[i].get<int64_t>(); };
  const auto ints = [&](int i) { return reinterpret_cast<const int64_t*>(ptr(i)); };
  p.q = ptr(0), p.k = ptr(1), p.v = ptr(2), p.o = ptr(3);
  p.q_start = ints(4), p.k_start = ints(5), p.v_start = ints(6), p.o_start = ints(7);
  p.seqlen_q = ints(8), p.seqlen_k = ints(9);
  p.window_left = j.at("window")[0], p.window_right = j.at("window")[1];
  if (const auto& sinks = j.at("sinks"); !sinks.is_null()) {
    p.sinks = reinterpret_cast<const float*>(arena + sinks.get<int64_t>());
  }
  return p;
}

nlohmann::json EncodeStatus(const absl::Status& status) {
  nlohmann::json payloads = nlohmann::json::array();
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    payloads.push_back({absl::BytesToHexString(url), absl::BytesToHexString(std::string(payload))});
  });
  return {{"code", static_cast<int>(status.code())},
          {"message", absl::BytesToHexString(status.message())},
          {"payloads", payloads}};
}

absl::Status DecodeStatus(const nlohmann::json& j) {
  absl::Status status(static_cast<absl::StatusCode>(j.at("code").get<int>()),
                      absl::HexStringToBytes(j.at("message").get<std::string>()));
  for (const auto& payload : j.at("payloads")) {
    status.SetPayload(absl::HexStringToBytes(payload[0].get<std::string>()),
                      absl::Cord(absl::HexStringToBytes(payload[1].get<std::string>())));
  }
  return status;
}

nlohmann::json EncodeEngineCallResult(const EngineCallResult& result) {
  nlohmann::json j = nlohmann::json::object();
  if (result.raised_type.has_value()) {
    j["raised"] = {absl::BytesToHexString(*result.raised_type),
                   absl::BytesToHexString(result.raised_message)};
  }
  if (result.output.has_value()) {
    // Outputs are copied to the host contiguous (EngineCallResult).
    const Tensor& output = *result.output;
    const size_t bytes = static_cast<size_t>(output.numel()) * DTypeSize(output.dtype());
    j["output"] = {
        {"dtype", DTypeName(output.dtype())},
        {"device", DeviceName(output.device())},
        {"shape", output.shape()},
        {"bytes", absl::Base64Escape(absl::string_view(output.data<char>(), bytes))},
    };
  }
  if (result.device_events.has_value()) {
    const DeviceEventCounts& e = *result.device_events;
    j["device_events"] = {e.host_syncs, e.host_to_device_copies, e.device_to_host_copies, e.casts};
  }
  return j;
}

absl::StatusOr<EngineCallResult> DecodeEngineCallResult(const nlohmann::json& j) {
  EngineCallResult result;
  if (j.contains("raised")) {
    result.raised_type = absl::HexStringToBytes(j["raised"][0].get<std::string>());
    result.raised_message = absl::HexStringToBytes(j["raised"][1].get<std::string>());
  }
  if (j.contains("output")) {
    const nlohmann::json& o = j["output"];
    absl::StatusOr<DType> dtype = ParseDType(o.at("dtype").get<std::string>());
    absl::StatusOr<Device> device = ParseDevice(o.at("device").get<std::string>());
    if (!dtype.ok()) return dtype.status();
    if (!device.ok()) return device.status();
    std::string bytes;
    if (!absl::Base64Unescape(o.at("bytes").get<std::string>(), &bytes)) {
      return absl::InternalError("the worker sent an output whose bytes are not base64");
    }
    Tensor output = Tensor::Zeros(*dtype, *device, o.at("shape").get<Shape>());
    if (bytes.size() != static_cast<size_t>(output.numel()) * DTypeSize(*dtype)) {
      return absl::InternalError("the worker sent an output whose size does not match its shape");
    }
    if (!bytes.empty()) std::memcpy(output.mutable_data<char>(), bytes.data(), bytes.size());
    result.output = std::move(output);
  }
  if (j.contains("device_events")) {
    const nlohmann::json& e = j["device_events"];
    result.device_events = DeviceEventCounts{e[0], e[1], e[2], e[3]};
  }
  return result;
}

}  // namespace varlen::run_internal
