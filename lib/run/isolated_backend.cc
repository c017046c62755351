// The supervisor's side: a Backend proxy that runs each call in a worker.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "varlen/backend/fault.h"
#include "varlen/run/isolation.h"
#include "wire.h"

extern char** environ;

namespace varlen {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xA5;
constexpr size_t kLogTailBytes = 4096;
constexpr int kLogTailLines = 30;
constexpr double kMacsToMeasureSpeed = 1e7;

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// One array of a launch in the arena: its bytes lie at `offset`, guard
// bands before and after.
struct Placed {
  const char* name;
  const void* source;
  int64_t bytes;
  bool input;
  int64_t offset = 0;
};

std::string LogTail(int fd) {
  const off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0) return "";
  const off_t from = std::max<off_t>(0, size - static_cast<off_t>(kLogTailBytes));
  std::string text(static_cast<size_t>(size - from), '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.size() > kLogTailLines) lines.erase(lines.begin(), lines.end() - kLogTailLines);
  return absl::StrJoin(lines, "\n");
}

int64_t ResidentBytes(pid_t pid) {
  std::ifstream statm(absl::StrCat("/proc/", pid, "/statm"));
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

int64_t DefaultMemoryLimit() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 2;
}

std::vector<std::string> ThisProgramsCommand() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args = absl::StrSplit(text, '\0');
  if (!args.empty() && args.back().empty()) args.pop_back();
  return args;
}

double Macs(const VarlenAttentionParams& p) {
  double macs = 0;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceView s = SequenceAt(p, b);
    macs += static_cast<double>(s.rows) * s.keys * p.num_heads_q * (p.head_dim_qk + p.head_dim_v);
  }
  return macs;
}

class IsolatedBackend final : public Backend {
 public:
  IsolatedBackend(const Backend& backend, IsolationOptions options)
      : backend_(backend), options_(std::move(options)) {
    if (options_.worker_command.empty()) options_.worker_command = ThisProgramsCommand();
    if (options_.memory_limit_mb <= 0) options_.memory_limit_mb = DefaultMemoryLimit() >> 20;
  }
  ~IsolatedBackend() override {
    StopWorker();
    if (arena_ != nullptr) munmap(arena_, arena_bytes_);
    if (arena_fd_ >= 0) close(arena_fd_);
  }

  absl::string_view name() const override { return backend_.name(); }
  absl::string_view description() const override { return backend_.description(); }
  BackendCapabilities capabilities() const override { return backend_.capabilities(); }
  absl::Status Available() const override { return backend_.Available(); }
  Resolution ResolveCall(const AttentionCall& call, Profile profile, Mode mode) const override {
    return backend_.ResolveCall(call, profile, mode);
  }
  bool call_level() const override { return backend_.call_level(); }
  std::optional<EngineVersion> engine_version() const override { return backend_.engine_version(); }
  // The worker makes the call again from its case; a call made by hand has
  // none, and runs here.
  absl::StatusOr<EngineCallResult> CallEngine(const AttentionCall& call,
                                              Profile profile) const override {
    if (call.case_json.empty()) return backend_.CallEngine(call, profile);
    std::lock_guard<std::mutex> lock(mutex_);
    if (absl::Status started = EnsureWorker(); !started.ok()) return started;
    absl::StatusOr<nlohmann::json> answer =
        Ask({{"op", "engine_call"}, {"case", call.case_json}}, Floor(), "engine");
    if (!answer.ok()) return answer.status();
    if (absl::Status status = run_internal::DecodeStatus(answer->at("status")); !status.ok()) {
      return status;
    }
    return run_internal::DecodeEngineCallResult(answer->at("result"));
  }

  absl::Status Supports(const VarlenAttentionParams& params) const override {
    return Call("supports", params);
  }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    return Call("run", params);
  }

  std::vector<BackendCounter> counters() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<BackendCounter> counters;
    if (pid_ > 0 && run_internal::WriteMessage(request_fd_, R"({"op":"counters"})")) {
      if (absl::StatusOr<nlohmann::json> answer = Answer(Clock::now(), Floor(), "counters");
          answer.ok()) {
        for (const auto& [name, value] : answer->at("counters").items()) {
          counters.push_back({name, value.get<int64_t>()});
        }
      }
    }
    counters.push_back({"workers_started", workers_started_});
    counters.push_back({"worker_start_ms", static_cast<int64_t>(start_seconds_ * 1e3)});
    for (const auto& [kind, count] : faults_) {
      counters.push_back({absl::AsciiStrToLower(FaultKindName(kind)), count});
    }
    return counters;
  }

 private:
  static Clock::duration Seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  Clock::duration Floor() const { return Seconds(options_.deadline_floor_s); }

  // Starts a worker unless one is running. REQUIRES: mutex_ held.
  absl::Status EnsureWorker() const {
    // A worker that cannot start (the backend's module does not import) fails
    // every call the same way: it is tried once.
    if (!start_error_.ok() || pid_ > 0) return start_error_;
    const Clock::time_point starting = Clock::now();
    const absl::Status started = StartWorker();
    start_seconds_ += std::chrono::duration<double>(Clock::now() - starting).count();
    if (!started.ok()) {
      const std::optional<Fault> fault = FaultOf(started);
      start_error_ = FaultStatus(
          {FaultKind::kCrash,
           absl::StrCat("the worker for ", backend_.name(), " did not start (",
                        fault.has_value() ? fault->summary : std::string(started.message()), ")"),
           fault.has_value() ? fault->log_tail : LogTail(log_fd_)});
    }
    return start_error_;
  }

  // Sends `request` and waits for its answer, within `budget`. The answer
  // of a call that left the worker's device unusable is that fault: the
  // worker is replaced, so that no later case inherits the error.
  absl::StatusOr<nlohmann::json> Ask(const nlohmann::json& request, Clock::duration budget,
                                     absl::string_view doing) const {
    if (ftruncate(log_fd_, 0) != 0) return absl::InternalError("cannot clear the worker's log");
    const auto asked = Clock::now();
    if (!run_internal::WriteMessage(request_fd_, request.dump())) {
      return Died(absl::StrCat("sending the ", doing, " call"));
    }
    absl::StatusOr<nlohmann::json> answer = Answer(asked, budget, doing);
    if (answer.ok() && answer->contains("device_lost")) {
      const absl::Status lost = run_internal::DecodeStatus(answer->at("device_lost"));
      const std::string tail = LogTail(log_fd_);
      StopWorker();
      ++faults_[FaultKind::kCrash];
      return FaultStatus({FaultKind::kCrash,
                          absl::StrCat("the device is unusable after the ", doing,
                                       " call (the worker was replaced): ", lost.message()),
                          tail});
    }
    return answer;
  }

  absl::Status Call(const char* op, const VarlenAttentionParams& p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (absl::Status started = EnsureWorker(); !started.ok()) return started;
    // The launch's arrays, each between guard bands.
    const auto elements = [](DType dtype, int64_t n) {
      return n * static_cast<int64_t>(DTypeSize(dtype));
    };
    const int64_t ints = static_cast<int64_t>(sizeof(int64_t)) * std::max(p.batch, 0);
    std::vector<Placed> placed = {
        {"q", p.q, elements(p.input_dtype, p.q_numel), true},
        {"k", p.k, elements(p.input_dtype, p.k_numel), true},
        {"v", p.v, elements(p.input_dtype, p.v_numel), true},
        {"o", p.o, elements(p.output_dtype, p.o_numel), false},
        {"q_start", p.q_start, ints, true},
        {"k_start", p.k_start, ints, true},
        {"v_start", p.v_start, ints, true},
        {"o_start", p.o_start, ints, true},
        {"seqlen_q", p.seqlen_q, ints, true},
        {"seqlen_k", p.seqlen_k, ints, true},
        {"sinks", p.sinks,
         p.sinks != nullptr ? static_cast<int64_t>(sizeof(float)) * p.num_heads_q : 0, true},
    };
    int64_t end = 0;
    for (Placed& a : placed) {
      // No storage, or extents no kernel may touch (CheckKernelBounds refuses
      // them before any Run): nothing to copy.
      if (a.source == nullptr || a.bytes < 0) a.bytes = 0;
      a.offset = end + kGuardBytes;
      end = RoundUp(a.offset + a.bytes, kGuardBytes) + kGuardBytes;
    }
    if (absl::Status grown = EnsureArena(end); !grown.ok()) return grown;
    std::memset(arena_, kGuardByte, static_cast<size_t>(end));
    for (const Placed& a : placed) {
      if (a.bytes > 0) std::memcpy(arena_ + a.offset, a.source, static_cast<size_t>(a.bytes));
    }
    run_internal::LaunchOffsets at;
    int64_t* offsets[] = {&at.q,        &at.k,        &at.v,       &at.o,
                          &at.q_start,  &at.k_start,  &at.v_start, &at.o_start,
                          &at.seqlen_q, &at.seqlen_k, &at.sinks};
    for (size_t i = 0; i < placed.size(); ++i) *offsets[i] = placed[i].offset;

    const double macs = std::string_view(op) == "run" ? Macs(p) : 0;
    const double budget_s =
        std::max(options_.deadline_floor_s, options_.deadline_factor * macs * seconds_per_mac_);
    const auto started = Clock::now();
    absl::StatusOr<nlohmann::json> answer = Ask(
        {{"op", op}, {"arena_bytes", arena_bytes_}, {"launch", run_internal::EncodeLaunch(p, at)}},
        Seconds(budget_s), op);
    if (!answer.ok()) return answer.status();
    // The backend's speed, from calls large enough that the time per call
    // (the pipe, the copies, an interpreter's overhead) does not swamp it.
    if (macs >= kMacsToMeasureSpeed) {
      const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
      seconds_per_mac_ = std::max(seconds_per_mac_, seconds / macs);
    }

    // Guard bands, then inputs: either is a finding, whatever the call said.
    for (const Placed& a : placed) {
      const int64_t after = RoundUp(a.offset + a.bytes, kGuardBytes) + kGuardBytes;
      for (int64_t i = a.offset - kGuardBytes; i < after; ++i) {
        if (i == a.offset) i += a.bytes;
        if (i < after && arena_[i] != kGuardByte) {
          const bool before = i < a.offset;
          return Finding(
              FaultKind::kWriteOutside,
              absl::StrFormat("the backend wrote %d bytes %s %s (%d bytes)",
                              before ? a.offset - i : i - (a.offset + a.bytes) + 1,
                              before ? "before the start of" : "past the end of", a.name, a.bytes));
        }
      }
    }
    for (const Placed& a : placed) {
      if (!a.input || a.bytes == 0) continue;
      const unsigned char* now = arena_ + a.offset;
      const unsigned char* was = static_cast<const unsigned char*>(a.source);
      int64_t changed = 0;
      for (int64_t i = 0; i < a.bytes; ++i) changed += now[i] != was[i];
      if (changed > 0) {
        return Finding(FaultKind::kInputChanged,
                       absl::StrFormat("the backend changed %d of the %d bytes of %s in place",
                                       changed, a.bytes, a.name));
      }
    }
    if (placed[3].bytes > 0) std::memcpy(p.o, arena_ + placed[3].offset, placed[3].bytes);
    return run_internal::DecodeStatus(answer->at("status"));
  }

  absl::Status Finding(FaultKind kind, std::string summary) const {
    ++faults_[kind];
    return FaultStatus({kind, std::move(summary), LogTail(log_fd_)});
  }

  // Waits for the worker's answer to what it was asked at `asked`, for at
  // most `budget`, watching its memory.
  absl::StatusOr<nlohmann::json> Answer(Clock::time_point asked, Clock::duration budget,
                                        absl::string_view doing) const {
    const int64_t limit = options_.memory_limit_mb << 20;
    for (;;) {
      pollfd fd = {answer_fd_, POLLIN, 0};
      const int ready = poll(&fd, 1, 20);
      if (ready > 0) {
        std::optional<std::string> message = run_internal::ReadMessage(answer_fd_);
        if (!message.has_value()) return Died(absl::StrCat("running the ", doing, " call"));
        nlohmann::json answer =
            nlohmann::json::parse(*message, nullptr, /*allow_exceptions=*/false);
        if (answer.is_discarded() || answer.contains("error")) {
          StopWorker();
          return absl::InternalError(absl::StrCat("the worker for ", backend_.name(), " answered ",
                                                  answer.is_discarded()
                                                      ? std::string("a message that is not JSON")
                                                      : answer["error"].get<std::string>()));
        }
        return answer;
      }
      if (ResidentBytes(pid_) > limit) {
        const std::string tail = LogTail(log_fd_);
        StopWorker();
        ++faults_[FaultKind::kOom];
        return FaultStatus(
            {FaultKind::kOom,
             absl::StrCat("the worker's resident memory passed its limit of ",
                          options_.memory_limit_mb, " MiB while running the ", doing, " call"),
             tail});
      }
      if (Clock::now() - asked > budget) {
        const std::string tail = LogTail(log_fd_);
        StopWorker();
        ++faults_[FaultKind::kTimeout];
        return FaultStatus(
            {FaultKind::kTimeout,
             absl::StrFormat("no answer within %.1f s to the %s call (the worker was killed)",
                             std::chrono::duration<double>(budget).count(), doing),
             tail});
      }
    }
  }

  // The worker has gone mid-call: how it ended is the fault.
  absl::Status Died(std::string doing) const {
    int status = 0;
    const pid_t pid = pid_;
    kill(-pid, SIGKILL);  // what it started
    waitpid(pid, &status, 0);
    pid_ = -1;
    CloseWorkerFds();
    const std::string tail = LogTail(log_fd_);
    Fault fault;
    fault.log_tail = tail;
    if (WIFSIGNALED(status)) {
      fault.kind = FaultKind::kCrash;
      fault.summary = absl::StrCat(
          "signal ", WTERMSIG(status), " (SIG",
          sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?", ") while ", doing);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      fault.kind = FaultKind::kCrash;
      fault.summary =
          absl::StrCat("the worker exited with status ", WEXITSTATUS(status), " while ", doing);
    } else {
      fault.kind = FaultKind::kVanished;
      fault.summary = absl::StrCat("the worker exited with status 0 while ", doing);
    }
    ++faults_[fault.kind];
    return FaultStatus(fault);
  }

  absl::Status EnsureArena(int64_t bytes) const {
    if (arena_fd_ < 0) {
      arena_fd_ = memfd_create("varlen-arena", MFD_CLOEXEC);
      if (arena_fd_ < 0) return absl::InternalError("memfd_create for the shared arena failed");
    }
    if (bytes <= arena_bytes_) return absl::OkStatus();
    const int64_t size = std::max<int64_t>(RoundUp(bytes, 1 << 20), 2 * arena_bytes_);
    if (arena_ != nullptr) munmap(arena_, arena_bytes_);
    arena_ = nullptr;
    arena_bytes_ = 0;
    if (ftruncate(arena_fd_, size) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot size the shared arena to ", size, " bytes"));
    }
    void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd_, 0);
    if (at == MAP_FAILED) return absl::ResourceExhaustedError("cannot map the shared arena");
    arena_ = static_cast<unsigned char*>(at);
    arena_bytes_ = size;
    return absl::OkStatus();
  }

  absl::Status StartWorker() const {
    static std::once_flag ignore_sigpipe;
    std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
    if (absl::Status arena = EnsureArena(1); !arena.ok()) return arena;
    if (log_fd_ < 0) {
      log_fd_ = memfd_create("varlen-worker-log", MFD_CLOEXEC);
      if (log_fd_ < 0) return absl::InternalError("memfd_create for the worker's log failed");
    }
    int requests[2], answers[2];
    if (pipe2(requests, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
    if (pipe2(answers, O_CLOEXEC) != 0) {
      close(requests[0]), close(requests[1]);
      return absl::InternalError("pipe2 failed");
    }
    // The worker appends to its log, so truncating it between calls works.
    const int log_append =
        open(absl::StrCat("/proc/self/fd/", log_fd_).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, requests[0], run_internal::kRequestFd);
    posix_spawn_file_actions_adddup2(&actions, answers[1], run_internal::kAnswerFd);
    posix_spawn_file_actions_adddup2(&actions, arena_fd_, run_internal::kArenaFd);
    posix_spawn_file_actions_adddup2(&actions, log_append, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, log_append, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults, none;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);  // its own group: a kill reaches what it started
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

    std::vector<std::string> env_strings;
    const std::string worker = absl::StrCat(run_internal::kWorkerEnv, "=");
    const std::string supervisor = absl::StrCat(run_internal::kSupervisorEnv, "=");
    const auto replaced = [&](absl::string_view entry) {
      if (absl::StartsWith(entry, worker) || absl::StartsWith(entry, supervisor)) return true;
      for (const std::string& set : options_.worker_environment) {
        if (absl::StartsWith(entry, set.substr(0, set.find('=') + 1))) return true;
      }
      return false;
    };
    for (char** e = environ; *e != nullptr; ++e) {
      if (!replaced(*e)) env_strings.emplace_back(*e);
    }
    for (const std::string& set : options_.worker_environment) env_strings.push_back(set);
    env_strings.push_back(absl::StrCat(worker, backend_.name()));
    env_strings.push_back(absl::StrCat(supervisor, getpid()));
    std::vector<char*> env, argv;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::vector<std::string> args = options_.worker_command;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    // This program by its link, whatever argv[0] says; another by its path.
    const std::string program =
        options_.worker_command == ThisProgramsCommand() ? "/proc/self/exe" : args.at(0);
    pid_t pid = -1;
    const int spawned =
        posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(requests[0]);
    close(answers[1]);
    if (log_append >= 0) close(log_append);
    if (spawned != 0) {
      close(requests[1]), close(answers[0]);
      return absl::InternalError(
          absl::StrCat("cannot start a worker (", args.at(0), "): ", std::strerror(spawned)));
    }
    pid_ = pid;
    request_fd_ = requests[1];
    answer_fd_ = answers[0];
    ++workers_started_;
    return Answer(Clock::now(), Floor(), "start").status();
  }

  void CloseWorkerFds() const {
    if (request_fd_ >= 0) close(request_fd_);
    if (answer_fd_ >= 0) close(answer_fd_);
    request_fd_ = answer_fd_ = -1;
  }

  // Ends the worker and whatever it started, and reaps it.
  void StopWorker() const {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    CloseWorkerFds();
  }

  const Backend& backend_;
  IsolationOptions options_;
  mutable std::mutex mutex_;
  mutable pid_t pid_ = -1;
  mutable int request_fd_ = -1, answer_fd_ = -1, arena_fd_ = -1, log_fd_ = -1;
  mutable unsigned char* arena_ = nullptr;
  mutable int64_t arena_bytes_ = 0;
  mutable double seconds_per_mac_ = 0;
  mutable absl::Status start_error_;
  mutable int64_t workers_started_ = 0;
  mutable double start_seconds_ = 0;  // spent starting workers, first and replacements
  mutable std::map<FaultKind, int64_t> faults_;
};

}  // namespace

std::unique_ptr<Backend> Isolate(const Backend& backend, IsolationOptions options) {
  return std::make_unique<IsolatedBackend>(backend, std::move(options));
}

}  // namespace varlen
