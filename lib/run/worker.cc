// The worker's side: one backend, many calls, until the supervisor hangs up.

#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/synth.h"
#include "varlen/run/isolation.h"
#include "wire.h"

namespace varlen {
namespace {

// The engine call the supervisor made from a case, made here again from the
// same case (every input is a function of it), and run.
absl::StatusOr<EngineCallResult> CallEngineOfCase(const Backend& backend,
                                                  const std::string& case_json) {
  absl::StatusOr<Case> c = ParseCase(case_json, "<the supervisor's case>");
  if (!c.ok()) return c.status();
  VARLEN_RETURN_IF_ERROR(LoadCaseData(&*c, "", "<the supervisor's case>"));
  absl::StatusOr<AttentionCall> call = CallOfCase(*c, SynthesizeQkv(*c));
  if (!call.ok()) return call.status();
  const Profile profile = c->call.profile;
  call->version = EngineVersionOfBackend(backend, profile);
  absl::StatusOr<EngineCallResult> result = backend.CallEngine(*call, profile);
  if (result.ok() && result->output.has_value() && !result->output->is_contiguous()) {
    return absl::InternalError("the backend's output is not contiguous");
  }
  return result;
}

}  // namespace

using run_internal::kAnswerFd;
using run_internal::kArenaFd;
using run_internal::kRequestFd;
using run_internal::kSupervisorEnv;
using run_internal::kWorkerEnv;

bool IsWorkerProcess() { return std::getenv(kWorkerEnv) != nullptr; }

int ServeAsWorker(absl::FunctionRef<const Backend*(absl::string_view)> find_backend) {
  // A worker never outlives its supervisor, even one killed mid-run.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (const char* parent = std::getenv(kSupervisorEnv);
      parent == nullptr || std::to_string(getppid()) != parent) {
    return 3;
  }
  const char* name = std::getenv(kWorkerEnv);
  const Backend* backend = name == nullptr ? nullptr : find_backend(name);
  if (backend == nullptr) {
    run_internal::WriteMessage(
        kAnswerFd, nlohmann::json{{"error", absl::StrCat("the worker has no backend named \"",
                                                         name == nullptr ? "" : name, "\"")}}
                       .dump());
    return 3;
  }
  if (!run_internal::WriteMessage(kAnswerFd, nlohmann::json{{"ready", true}}.dump())) return 3;
  uint8_t* arena = nullptr;
  size_t mapped = 0;
  while (std::optional<std::string> request = run_internal::ReadMessage(kRequestFd)) {
    const nlohmann::json r = nlohmann::json::parse(*request);
    const std::string op = r.at("op");
    nlohmann::json answer;
    if (op == "counters") {
      answer["counters"] = nlohmann::json::object();
      for (const BackendCounter& c : backend->counters()) answer["counters"][c.name] = c.value;
    } else if (op == "engine_call") {
      absl::StatusOr<EngineCallResult> result;
      try {
        result = CallEngineOfCase(*backend, r.at("case"));
      } catch (const std::exception& e) {
        result = absl::InternalError(absl::StrCat("the backend threw an exception: ", e.what()));
      }
      answer["status"] = run_internal::EncodeStatus(result.status());
      if (result.ok()) answer["result"] = run_internal::EncodeEngineCallResult(*result);
    } else {
      const size_t bytes = r.at("arena_bytes");
      if (bytes != mapped) {
        if (arena != nullptr) munmap(arena, mapped);
        void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, kArenaFd, 0);
        if (at == MAP_FAILED) return 4;
        arena = static_cast<uint8_t*>(at);
        mapped = bytes;
      }
      const VarlenAttentionParams params = run_internal::DecodeLaunch(r.at("launch"), arena);
      absl::Status status;
      try {
        status = op == "supports" ? backend->Supports(params) : backend->Run(params);
      } catch (const std::exception& e) {
        status = absl::InternalError(absl::StrCat("the backend threw an exception: ", e.what()));
      }
      answer["status"] = run_internal::EncodeStatus(status);
    }
    // A device a call left unusable: said, and this worker ends, so that no
    // later call inherits the error.
    if (op != "counters") {
      if (const absl::Status health = backend->DeviceHealth(); !health.ok()) {
        answer["device_lost"] = run_internal::EncodeStatus(health);
        (void)run_internal::WriteMessage(kAnswerFd, answer.dump());
        return 5;
      }
    }
    if (!run_internal::WriteMessage(kAnswerFd, answer.dump())) break;
  }
  return 0;
}

}  // namespace varlen
