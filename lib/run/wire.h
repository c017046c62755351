// What the supervisor and a worker say to each other (internal to varlen/run).
//
// Two pipes on fixed descriptors carry length-prefixed JSON messages, one
// request and one answer per call. The tensors of a launch do not travel in
// them: they lie in a shared memory arena (a memfd both map), each buffer
// between two guard bands, and a request names each buffer by its offset.

#ifndef VARLEN_LIB_RUN_WIRE_H_
#define VARLEN_LIB_RUN_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/backend.h"
#include "varlen/backend/params.h"

namespace varlen::run_internal {

// The worker's descriptors, as the supervisor places them when it starts one.
inline constexpr int kRequestFd = 200;
inline constexpr int kAnswerFd = 201;
inline constexpr int kArenaFd = 202;
// Set in a worker's environment to the name of the backend it serves.
inline constexpr char kWorkerEnv[] = "VARLEN_WORKER";
// And to the supervisor's process id.
inline constexpr char kSupervisorEnv[] = "VARLEN_SUPERVISOR";

// One message: a 4-byte little-endian length, then the bytes. False when
// the other end has gone.
bool WriteMessage(int fd, const std::string& bytes);
// Blocks for one message; nullopt when the other end has gone.
std::optional<std::string> ReadMessage(int fd);

// Where each array of a launch lies in the arena, in bytes from its start.
struct LaunchOffsets {
  int64_t q = 0, k = 0, v = 0, o = 0;
  int64_t q_start = 0, k_start = 0, v_start = 0, o_start = 0, seqlen_q = 0, seqlen_k = 0;
  int64_t sinks = 0;  // meaningful only when the launch has sinks
};

// The launch's scalars and offsets; its pointers are rebuilt from `arena`.
nlohmann::json EncodeLaunch(const VarlenAttentionParams& p, const LaunchOffsets& at);
VarlenAttentionParams DecodeLaunch(const nlohmann::json& j, uint8_t* arena);

// A status with its message and payloads (a Python error kind), any bytes.
nlohmann::json EncodeStatus(const absl::Status& status);
absl::Status DecodeStatus(const nlohmann::json& j);

// What forward raised or returned. The output's bytes travel in the message
// (an engine call's output is a few megabytes at most).
nlohmann::json EncodeEngineCallResult(const EngineCallResult& result);
absl::StatusOr<EngineCallResult> DecodeEngineCallResult(const nlohmann::json& j);

}  // namespace varlen::run_internal

#endif  // VARLEN_LIB_RUN_WIRE_H_
