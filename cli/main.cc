// The varlen command: repro, backends, check, report, mutants and decode.
// What each does and the flags it reads are in Commands() below, which
// `varlen help [COMMAND]` and `varlen COMMAND --help` print.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "varlen/backend/fault.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/engines.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/keywords.h"
#include "varlen/cases/npy.h"
#include "varlen/cases/phase_clock.h"
#include "varlen/cases/report.h"
#include "varlen/contract/sglang/version.h"
#include "varlen/contract/vllm/version.h"
#include "varlen/core/status.h"
#include "varlen/run/isolation.h"
#include "varlen/run/shard.h"
#ifdef VARLEN_HAVE_DECODER
#include "case_decoder.h"
#endif
#ifdef VARLEN_HAVE_MUTANTS
#include "absl/strings/str_format.h"
#include "mutants.h"
#include "varlen/conformance/check.h"
#endif

ABSL_FLAG(std::string, backend, "all",
          "backends to run the cases on (comma-separated), or \"all\" available ones");
ABSL_FLAG(bool, json, false, "print one JSON document instead of text");
ABSL_FLAG(bool, brief, false, "one line per run; full reports only for failures");
ABSL_FLAG(std::string, save, "",
          "repro: write q, k, v, the float64 reference and each backend's output of every case "
          "that runs forward as .npy files under DIR/<case name>/");
ABSL_FLAG(std::string, vllm, "", "run every vLLM case under this vLLM version (0.33.0)");
ABSL_FLAG(std::string, transformers, "",
          "run every transformers case under this transformers version (4.57.6, 5.14.1, 5.25.0)");
ABSL_FLAG(std::string, engine, "",
          "sglang, vllm or transformers: run each case as that engine's counterpart call; all: "
          "run each case in every engine and print what differs");
ABSL_FLAG(std::string, sglang, "",
          "the SGLang version faithful mode reproduces: a modelled version, \"all\" to compare "
          "every modelled version, or empty for each case's own (default: the latest)");
ABSL_FLAG(std::string, tier, "smoke", "check, mutants: the suite's tier (smoke, full, nightly)");
ABSL_FLAG(std::string, backends, "", "check: comma-separated backends (default: every available)");
ABSL_FLAG(double, budget_scale, 1.0,
          "check: multiplies the tier's case counts and time budgets (below 1: a slow backend)");
ABSL_FLAG(std::string, report, "",
          "check: the folder for junit.xml, matrix.md, pictures, failures");
ABSL_FLAG(std::string, corpus, "", "check: the corpus to replay (default: this build's)");
ABSL_FLAG(std::string, expectations, "",
          "check: expectations manifests of known gaps, comma-separated (default: "
          "$VARLEN_EXPECTATIONS)");
ABSL_FLAG(std::string, target, "", "decode: the fuzz target whose decoder reads FILE");
ABSL_FLAG(bool, in_process, false,
          "repro, check, mutants: run the backends in this process (for a debugger), not in worker "
          "processes that may crash or hang without ending the run");
ABSL_FLAG(
    double, deadline_s, 60,
    "repro, check, mutants: the least time a backend call gets before its worker is killed (it "
    "grows with the call's size and the backend's measured speed)");
ABSL_FLAG(
    int64_t, worker_memory_mb, 0,
    "repro, check, mutants: a worker's resident memory limit (default: half of this machine's)");
ABSL_FLAG(std::string, load, "",
          "repro, check: backend plugins to load, comma-separated shared libraries made with "
          "VARLEN_BACKEND_PLUGIN (default: $VARLEN_LOAD)");
ABSL_FLAG(int, jobs, 1,
          "check: run this many shards at once, each in its own process, and merge their "
          "reports");
ABSL_FLAG(bool, counts_only, false,
          "check: case counts alone bound each property, not time, so that every machine "
          "checks the same cases (the shards of one run)");
ABSL_FLAG(bool, timings, false,
          "check: run in this process and print where the time went (synthesis, resolution, "
          "backend, oracle, emulation, judge) and the cases run and judged per second");
ABSL_FLAG(bool, merge, false, "report: merge the shard reports in the folders given");
ABSL_FLAG(int, times, 1,
          "repro: run each case this many times on each backend and say whether the result "
          "(the verdict, the fault's kind) is reproducible or flaky");
ABSL_FLAG(bool, anchors, false, "mutants: also run the other projects' generators");
ABSL_FLAG(std::string, only, "", "mutants: only the mutants whose name contains this");

namespace varlen {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitInvalid = 2;

// Each command: how it is called, what it does, the flags it reads (their
// help and defaults are the flags' own). `varlen help [COMMAND]`,
// `varlen [COMMAND] --help` and usage errors print from here.
struct CommandHelp {
  absl::string_view name;
  absl::string_view synopsis;
  absl::string_view description;
  std::vector<absl::string_view> flags;
};

const std::vector<CommandHelp>& Commands() {
  static const auto* const commands = new std::vector<CommandHelp>{
      {"repro",
       "repro FILE|DIR... [--backend=NAME[,NAME...]|all] [--sglang=VERSION|all]",
       "Runs each case file (or every case of a folder) on each chosen backend and prints,\n"
       "per run, what was passed, what resolution did, the outcome and the verdict, then\n"
       "one summary line. --sglang/--vllm/--transformers run every case under that\n"
       "engine version (--sglang=all: every modelled version, and where the outcome\n"
       "differs); --engine=ENGINE runs each case as that engine's counterpart call,\n"
       "--engine=all in every engine too, with what differs. --backend also takes a\n"
       "mutant's name. A script that makes a case's call on the engine's own class, for\n"
       "its issue tracker: python -m varlen repro FILE --emit-python. Exit status: 0 when\n"
       "every case met its expectation, 1 when one did not, 2 for an invalid case file or\n"
       "a usage error.",
       {"backend", "sglang", "vllm", "transformers", "engine", "json", "brief", "save", "times",
        "load", "in_process", "deadline_s", "worker_memory_mb"}},
      {"backends",
       "backends",
       "Lists the backends with their capabilities and whether they are available here.",
       {"load"}},
      {"keywords",
       "keywords",
       "Prints, per engine, profile, entry and version, what faithful mode does with each\n"
       "keyword a caller might pass (as None) beside the correct call: read, ignored\n"
       "(passed on, never read) or refused (the call raises). A value other than None may\n"
       "take another path: the table describes the correct call's.",
       {}},
      {"check",
       "check [--backends=A,B] [--tier=smoke|full|nightly] [--report=DIR]",
       "The main job: the regression corpus and the conformance suite's generated\n"
       "properties on every available backend (or those named), progress on stderr, then\n"
       "the backend x property matrix. With --report, also DIR/junit.xml, DIR/matrix.md,\n"
       "DIR/report.json, a picture of each failing case's error and the shrunk case of\n"
       "each failing property. A backend's faults (a crash, a hang, ...) are failing\n"
       "checks, grouped by signature. GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX run one\n"
       "shard. Exit status: 0 all passed, 1 a failure, 2 a usage error or invalid input.",
       {"backends", "tier", "budget_scale", "report", "corpus", "expectations", "jobs",
        "counts_only", "load", "in_process", "deadline_s", "worker_memory_mb", "timings"}},
      {"report",
       "report --merge DIR... [--report=OUT]",
       "The report of the unsharded run, from its shards' report folders.",
       {"merge", "report"}},
      {"mutants",
       "mutants [--tier=smoke|full|nightly] [--anchors] [--only=TEXT]",
       "Runs the conformance suite on every mutant of cpu_flash and of the resolvers\n"
       "and prints a markdown table. Exit status: 0 when the suite killed every mutant,\n"
       "1 when one survived.",
       {"tier", "anchors", "only", "in_process", "deadline_s", "worker_memory_mb"}},
      {"decode",
       "decode --target=NAME FILE",
       "Prints the case a fuzz target decodes from the bytes of FILE (a seed, a crash)\n"
       "as a case file for corpus/regressions/.",
       {"target"}},
  };
  return *commands;
}

std::string Usage() {
  std::string usage = "usage: varlen COMMAND [FLAGS] [ARGS]\n\ncommands:\n";
  for (const CommandHelp& c : Commands()) absl::StrAppend(&usage, "  varlen ", c.synopsis, "\n");
  absl::StrAppend(&usage,
                  "\n`varlen help COMMAND` (or `varlen COMMAND --help`) says what a command does "
                  "and lists its flags.\n");
  return usage;
}

// One command's help; the usage for no command or an unknown one.
std::string Help(absl::string_view command) {
  std::string text;
  const auto flag_lines = [&text](const std::vector<absl::string_view>& names) {
    for (absl::string_view name : names) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag == nullptr) continue;
      absl::StrAppend(&text, "  --", name,
                      " (default: ", flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue(),
                      ")\n      ", flag->Help(), "\n");
    }
  };
  for (const CommandHelp& c : Commands()) {
    if (c.name != command) continue;
    absl::StrAppend(&text, "usage: varlen ", c.synopsis, "\n\n", c.description, "\n");
    if (!c.flags.empty()) absl::StrAppend(&text, "\nflags:\n");
    flag_lines(c.flags);
    return text;
  }
  return Usage();
}

// Help asked for anywhere on the command line (--help, -h, `help`): the
// command's own, on stdout, exit 0.
std::optional<std::string> HelpAsked(int argc, char** argv) {
  std::string command;
  bool asked = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort" ||
        arg == "--helpfull") {
      asked = true;
    } else if (arg == "help" && command.empty()) {
      asked = true;
    } else if (!absl::StartsWith(arg, "-") && command.empty()) {
      command = std::string(arg);
    }
  }
  if (!asked) return std::nullopt;
  return Help(command);
}

// The plugins a worker loads before it serves (":"-separated paths).
constexpr char kLoadEnv[] = "VARLEN_LOAD";

// The plugins of --load (or $VARLEN_LOAD), as absolute paths, comma- or
// colon-separated.
std::vector<std::string> PluginPaths() {
  std::string paths = absl::GetFlag(FLAGS_load);
  if (const char* env = std::getenv(kLoadEnv); paths.empty() && env != nullptr) paths = env;
  std::vector<std::string> absolute;
  for (absl::string_view path : absl::StrSplit(paths, absl::ByAnyChar(",:"), absl::SkipEmpty())) {
    absolute.push_back(std::filesystem::absolute(std::string(path)).string());
  }
  return absolute;
}

// Registers the backends of `paths`; false (having said why) if one fails.
bool LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    absl::StatusOr<std::vector<std::string>> names = LoadBackendPlugin(path);
    if (!names.ok()) {
      std::cerr << "varlen: --load: " << names.status().message() << "\n";
      return false;
    }
  }
  return true;
}

// Unset under --in_process.
std::optional<IsolationOptions> IsolationFromFlags() {
  if (absl::GetFlag(FLAGS_in_process)) return std::nullopt;
  IsolationOptions options;
  options.deadline_floor_s = absl::GetFlag(FLAGS_deadline_s);
  options.memory_limit_mb = absl::GetFlag(FLAGS_worker_memory_mb);
  options.worker_environment.push_back(
      absl::StrCat(kLoadEnv, "=", absl::StrJoin(PluginPaths(), ":")));
  return options;
}

int UsageError(absl::string_view message) {
  std::cerr << "varlen: " << message << "\n\n" << Usage();
  return kExitInvalid;
}

// absl exits with status 1 on an unknown flag; check first so usage errors
// keep their own status. Known: the commands' flags (a bool one also as
// --noNAME).
bool CheckFlagNames(int argc, char** argv, std::string* unknown) {
  const auto known = [](absl::string_view name) {
    for (const CommandHelp& c : Commands()) {
      for (absl::string_view flag : c.flags) {
        if (name == flag) return true;
        if (absl::StartsWith(name, "no") && name.substr(2) == flag) {
          const absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
          if (f != nullptr && f->IsOfType<bool>()) return true;
        }
      }
    }
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    if (!known(arg.substr(0, arg.find('=')))) {
      *unknown = std::string(argv[i]);
      return false;
    }
  }
  return true;
}

std::string CapabilitiesText(const BackendCapabilities& caps) {
  std::vector<std::string> dtypes;
  for (DType d : caps.input_dtypes) dtypes.emplace_back(DTypeName(d));
  // The profiles it consumes, per engine.
  std::vector<std::string> engines;
  for (Engine engine : AllEngines()) {
    std::vector<std::string> names;
    for (Profile p : ProfilesOf(engine)) {
      if (caps.profiles.empty() ||
          std::find(caps.profiles.begin(), caps.profiles.end(), p) != caps.profiles.end()) {
        names.emplace_back(ProfileName(p));
      }
    }
    if (!names.empty())
      engines.push_back(absl::StrCat(EngineName(engine), " ", absl::StrJoin(names, " ")));
  }
  return absl::StrCat("dtypes ", absl::StrJoin(dtypes, "/"), ", head_dim <= ", caps.max_head_dim,
                      ", GQA ", caps.grouped_query_attention ? "yes" : "no",
                      ", head_dim_v != head_dim ", caps.distinct_value_head_dim ? "yes" : "no",
                      ", device ", caps.device, "\n  profiles: ", absl::StrJoin(engines, "; "));
}

int ListBackends() {
  for (const Backend* backend : AllBackends()) {
    const absl::Status available = backend->Available();
    std::cout << backend->name() << "  ["
              << (available.ok() ? "available" : absl::StrCat("unavailable: ", available.message()))
              << "]\n  " << backend->description() << "\n  "
              << CapabilitiesText(backend->capabilities()) << "\n";
  }
  // The versions faithful mode reproduces, per engine ("engine": and the
  // version key of a case; --sglang, --vllm, --transformers).
  std::cout << "engines (modelled versions, the latest the default):\n";
  for (const Engine engine : AllEngines()) {
    std::vector<std::string> versions;
    for (const EngineVersion& v : EngineVersion::Modelled(engine)) versions.emplace_back(v.name());
    std::vector<std::string> profiles;
    for (const Profile p : ProfilesOf(engine)) profiles.emplace_back(ProfileName(p));
    std::cout << "  " << EngineName(engine) << " " << absl::StrJoin(versions, ", ") << ": "
              << absl::StrJoin(profiles, " ") << "\n";
  }
  return kExitOk;
}

// A mutant named on the command line (`--backend=flash_nan_to_zero`), so a
// case the suite shrank on it replays here; mutants are never in "all".
const Backend* FindMutant(absl::string_view name) {
#ifdef VARLEN_HAVE_MUTANTS
  static std::vector<Mutant>* const mutants = new std::vector<Mutant>(AllMutants());
  for (const Mutant& mutant : *mutants) {
    if (mutant.name == name) return mutant.backend.get();
  }
#endif
  (void)name;
  return nullptr;
}

// q, k, v (as the backends receive them) and the float64 reference of a
// case, for --save.
absl::Status SaveInputs(const std::string& dir, CaseRunner& runner) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat(dir, ": ", error.message()));
  const QkvTensors& qkv = runner.tensors();
  for (const auto& [name, tensor] :
       {std::pair<const char*, const Tensor*>{"q", &qkv.q}, {"k", &qkv.k}, {"v", &qkv.v}}) {
    VARLEN_RETURN_IF_ERROR(
        WriteNpy((std::filesystem::path(dir) / absl::StrCat(name, ".npy")).string(), *tensor));
  }
  const Geometry& g = runner.test_case().geometry;
  return WriteNpy((std::filesystem::path(dir) / "reference.npy").string(),
                  runner.reference().oracle, {g.total_tokens(), g.num_heads, g.head_dim_v});
}

// What each backend counted (a graph cache's builds and hits), for the
// backends that count anything: {"cudnn": {"graph_builds": 3, ...}}.
nlohmann::ordered_json BackendCounters(const std::vector<const Backend*>& backends) {
  nlohmann::ordered_json counters = nlohmann::ordered_json::object();
  for (const Backend* backend : backends) {
    for (const BackendCounter& counter : backend->counters()) {
      counters[std::string(backend->name())][counter.name] = counter.value;
    }
  }
  return counters;
}

// "counters: cudnn graph_builds=3 graph_hits=5", or nothing.
void PrintCounters(const nlohmann::ordered_json& counters) {
  for (const auto& [backend, values] : counters.items()) {
    std::cout << "counters: " << backend;
    for (const auto& [name, value] : values.items()) std::cout << " " << name << "=" << value;
    std::cout << "\n";
  }
}

// A verdict with its fault kind, if any: "FAIL (CRASH)".
std::string ResultName(const Outcome& outcome) {
  const std::optional<Fault> fault = FaultOf(outcome.error);
  return absl::StrCat(VerdictName(outcome.verdict),
                      fault.has_value() ? absl::StrCat(" (", FaultKindName(fault->kind), ")") : "");
}

bool SameResult(const Outcome& a, const Outcome& b) { return ResultName(a) == ResultName(b); }

int Repro(const std::vector<std::string>& paths) {
  if (paths.empty()) return UsageError("repro needs at least one case file or directory");
  std::vector<const Backend*> backends;
  const std::string chosen = absl::GetFlag(FLAGS_backend);
  if (chosen == "all") {
    for (const Backend* b : AllBackends()) {
      if (b->Available().ok()) backends.push_back(b);
    }
  } else {
    for (absl::string_view name : absl::StrSplit(chosen, ',', absl::SkipEmpty())) {
      if (const Backend* b = FindBackend(name)) {
        backends.push_back(b);
      } else if (const Backend* mutant = FindMutant(name)) {
        backends.push_back(mutant);
      } else {
        std::vector<std::string> names;
        for (const Backend* known : AllBackends()) names.emplace_back(known->name());
        return UsageError(absl::StrCat("no backend named \"", name,
                                       "\" (known: ", absl::StrJoin(names, ", "), ")"));
      }
    }
    if (backends.empty()) return UsageError("--backend names no backend");
  }

  std::vector<std::unique_ptr<Backend>> isolated;
  if (const std::optional<IsolationOptions> isolation = IsolationFromFlags()) {
    for (const Backend*& backend : backends) {
      isolated.push_back(Isolate(*backend, *isolation));
      backend = isolated.back().get();
    }
  }

  absl::StatusOr<std::vector<std::string>> files = ListCaseFiles(paths);
  if (!files.ok()) {
    std::cerr << "varlen: " << files.status().message() << "\n";
    return kExitInvalid;
  }
  // A shard of a split run replays every total-th file.
  absl::StatusOr<Shard> shard = ShardFromEnvironment();
  if (!shard.ok()) return UsageError(shard.status().message());
  for (int64_t i = static_cast<int64_t>(files->size()) - 1; i >= 0; --i) {
    if (!shard->Owns(i)) files->erase(files->begin() + i);
  }
  // Load everything first: an invalid file stops the run before any result.
  std::vector<Case> cases;
  for (const std::string& file : *files) {
    absl::StatusOr<Case> c = LoadCaseFile(file);
    if (!c.ok()) {
      std::cerr << "varlen: " << c.status().message() << "\n";
      return kExitInvalid;
    }
    cases.push_back(*std::move(c));
  }

  // --sglang: a version for every case, or "all" for the triage view.
  // --sglang, --vllm, --transformers: a version for every case of that engine.
  const std::string sglang = absl::GetFlag(FLAGS_sglang);
  const bool compare_versions = sglang == "all";
  const std::pair<Engine, std::string> version_flags[] = {
      {Engine::kSglang, compare_versions ? "" : sglang},
      {Engine::kVllm, absl::GetFlag(FLAGS_vllm)},
      {Engine::kTransformers, absl::GetFlag(FLAGS_transformers)}};
  for (const auto& [engine, name] : version_flags) {
    if (name.empty()) continue;
    absl::StatusOr<EngineVersion> version = EngineVersion::Parse(engine, name);
    if (!version.ok()) {
      return UsageError(absl::StrCat("--", EngineName(engine), ": ", version.status().message()));
    }
    for (Case& c : cases) {
      if (c.engine() == engine) c.version = *version;
    }
  }
  // --engine: the counterpart calls, or "all" for the triage view.
  const std::string engine_flag = absl::GetFlag(FLAGS_engine);
  const bool compare_engines = engine_flag == "all";
  if (!engine_flag.empty() && !compare_engines) {
    absl::StatusOr<Engine> engine = ParseEngine(engine_flag);
    if (!engine.ok()) {
      return UsageError(absl::StrCat("--engine: ", engine.status().message(), ", all"));
    }
    for (Case& c : cases) {
      if (c.engine() == *engine) continue;
      absl::StatusOr<CounterpartCall> other = CounterpartCase(c, *engine);
      if (!other.ok()) {
        std::cerr << "varlen: " << c.name << ": " << other.status().message() << "\n";
        return kExitInvalid;
      }
      for (const std::string& note : other->notes)
        std::cerr << "varlen: " << c.name << ": " << note << "\n";
      c = other->counterpart;
    }
  }

  const bool json = absl::GetFlag(FLAGS_json), brief = absl::GetFlag(FLAGS_brief);
  const std::string save_dir = absl::GetFlag(FLAGS_save);
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  nlohmann::ordered_json differences = nlohmann::ordered_json::array();
  int passed = 0, failed = 0, unsupported = 0, resolution_only = 0, differing_cases = 0;
  int flaky = 0;
  const int times = absl::GetFlag(FLAGS_times);
  if (times < 1) return UsageError(absl::StrCat("--times=", times, " must be at least 1"));
  for (size_t i = 0; i < cases.size(); ++i) {
    RunOptions run_options;
    run_options.keep_output = !save_dir.empty();
    CaseRunner runner(cases[i], run_options);
    bool differs = false;
    const std::string case_dir = (std::filesystem::path(save_dir) / cases[i].name).string();
    if (!save_dir.empty() && runner.runs_forward()) {
      if (absl::Status saved = SaveInputs(case_dir, runner); !saved.ok()) {
        std::cerr << "varlen: " << saved.message() << "\n";
        return kExitInvalid;
      }
    }
    for (const Backend* backend : backends) {
      const Outcome outcome = runner.Run(*backend);
      if (outcome.output.has_value()) {
        const std::string path =
            (std::filesystem::path(case_dir) / absl::StrCat("output-", backend->name(), ".npy"))
                .string();
        if (absl::Status saved = WriteNpy(path, *outcome.output); !saved.ok()) {
          std::cerr << "varlen: " << saved.message() << "\n";
          return kExitInvalid;
        }
      }
      passed += outcome.verdict == Verdict::kPass;
      failed += outcome.verdict == Verdict::kFail;
      unsupported += outcome.verdict == Verdict::kUnsupported;
      resolution_only += !outcome.resolution_only_reason.empty();
      // --times=N: the same case again, to tell a reproducible failure (or
      // fault) from a flaky one.
      int same = 1;
      for (int t = 1; t < times; ++t) same += SameResult(runner.Run(*backend), outcome);
      const std::string replayed =
          times == 1 ? ""
          : same == times
              ? absl::StrCat("reproducible: the same ", ResultName(outcome), " in ", times, " of ",
                             times, " runs")
              : absl::StrCat("FLAKY: ", ResultName(outcome), " in ", same, " of ", times, " runs");
      flaky += same < times;
      if (json) {
        nlohmann::ordered_json result = OutcomeToJson(cases[i], (*files)[i], outcome);
        if (times > 1) result["replayed"] = {{"times", times}, {"same", same}, {"text", replayed}};
        results.push_back(std::move(result));
      } else if (brief && outcome.verdict != Verdict::kFail) {
        std::cout << VerdictName(outcome.verdict) << "  " << cases[i].name << "  ["
                  << backend->name() << "]" << (replayed.empty() ? "" : "  ") << replayed << "\n";
      } else {
        std::cout << FormatOutcomeText(cases[i], (*files)[i], outcome) << "\n";
        if (!replayed.empty()) std::cout << "  replayed:   " << replayed << "\n";
      }
      for (const Engine target : compare_engines ? AllEngines() : absl::Span<const Engine>()) {
        if (target == cases[i].engine()) continue;
        absl::StatusOr<CounterpartCall> other = CounterpartCase(cases[i], target);
        if (!other.ok()) {
          std::cout << "ENGINES  " << cases[i].name << "  [" << backend->name()
                    << "]: " << other.status().message() << "\n";
        } else {
          const Outcome there = RunCase(other->counterpart, *backend);
          const VersionDifference d = CompareEngines(cases[i], outcome, other->counterpart, there);
          differs = differs || !d.summary.empty();
          if (json) {
            differences.push_back({{"case", cases[i].name},
                                   {"backend", backend->name()},
                                   {"from", QualifiedProfileName(cases[i].call.profile)},
                                   {"to", QualifiedProfileName(other->counterpart.call.profile)},
                                   {"summary", d.summary},
                                   {"notes", other->notes},
                                   {"compared", d.compared},
                                   {"fields", d.fields}});
          } else if (d.summary.empty()) {
            std::cout << "ENGINES  " << cases[i].name << "  [" << backend->name() << "]  "
                      << QualifiedProfileName(cases[i].call.profile) << " and "
                      << QualifiedProfileName(other->counterpart.call.profile)
                      << ": the same outcome\n";
          } else {
            std::cout << "ENGINES  " << cases[i].name << "  [" << backend->name() << "]  "
                      << d.summary << "\n"
                      << "    compared: " << d.compared << "\n";
            for (const std::string& note : other->notes) std::cout << "    note: " << note << "\n";
            for (const std::string& field : d.fields) std::cout << "    " << field << "\n";
          }
        }
      }
      if (compare_versions) {
        // The same case under every modelled version of its engine, oldest
        // first.
        std::optional<Outcome> before;
        const std::vector<EngineVersion> versions = EngineVersion::Modelled(cases[i].engine());
        EngineVersion before_version = versions.front();
        for (EngineVersion version : versions) {
          Case under = cases[i];
          under.version = version;
          Outcome after = RunCase(under, *backend);
          if (before.has_value()) {
            const VersionDifference d = CompareVersions(*before, before_version, after, version);
            if (!d.summary.empty()) {
              differs = true;
              const std::string from(before_version.name());
              const std::string to(version.name());
              if (json) {
                differences.push_back({{"case", cases[i].name},
                                       {"backend", backend->name()},
                                       {"from", from},
                                       {"to", to},
                                       {"summary", d.summary},
                                       {"compared", d.compared},
                                       {"fields", d.fields}});
              } else {
                std::cout << "VERSIONS  " << cases[i].name << "  [" << backend->name() << "]  "
                          << from << " -> " << to << ": " << d.summary << "\n"
                          << "    compared: " << d.compared << "\n";
                for (const std::string& field : d.fields) std::cout << "    " << field << "\n";
              }
            }
          }
          before = std::move(after);
          before_version = version;
        }
      }
      std::cout.flush();
    }
    differing_cases += differs;
  }
  const std::string summary =
      absl::StrCat(cases.size(), cases.size() == 1 ? " case x " : " cases x ", backends.size(),
                   backends.size() == 1 ? " backend: " : " backends: ", passed, " passed, ", failed,
                   " failed, ", unsupported, " unsupported (", resolution_only, " resolution only)",
                   times > 1 ? absl::StrCat(", ", flaky, " flaky in ", times, " runs each") : "");
  std::vector<absl::string_view> version_names;
  for (EngineVersion version : EngineVersion::Modelled(Engine::kSglang)) {
    version_names.push_back(version.name());
  }
  const std::string versions_summary = absl::StrCat(
      differing_cases, " of ", cases.size(), cases.size() == 1 ? " case differs" : " cases differ",
      " between the modelled SGLang versions (", absl::StrJoin(version_names, ", "), ")");
  if (json) {
    nlohmann::ordered_json doc = {{"schema", kOutcomeJsonSchema},
                                  {"results", results},
                                  {"summary",
                                   {{"cases", cases.size()},
                                    {"backends", backends.size()},
                                    {"passed", passed},
                                    {"failed", failed},
                                    {"unsupported", unsupported},
                                    {"resolution_only", resolution_only},
                                    {"text", summary}}}};
    if (compare_versions) {
      doc["version_differences"] = differences;
      doc["summary"]["versions"] = versions_summary;
    }
    doc["backend_counters"] = BackendCounters(backends);
    std::cout << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "summary: " << summary << "\n";
    if (compare_versions) std::cout << "versions: " << versions_summary << "\n";
    PrintCounters(BackendCounters(backends));
  }
  return failed == 0 ? kExitOk : kExitFailed;
}

#ifdef VARLEN_HAVE_MUTANTS
// Prints a finished check (one run, or shards merged) and its exit status.
int FinishCheck(const CheckReport& report, const CheckOptions& options) {
  std::cout << CheckResultText(report, options);
  nlohmann::ordered_json counters;
  for (const auto& [backend, values] : report.counters) {
    for (const BackendCounter& counter : values) counters[backend][counter.name] = counter.value;
  }
  PrintCounters(counters);
  return report.passed() ? kExitOk : kExitFailed;
}

// --jobs=N: this run as N shards at once, each a `varlen check` of its own
// (these flags, GTEST_TOTAL_SHARDS=N and GTEST_SHARD_INDEX=i, its report and
// printout under REPORT/shards/i), then the merged report, which is the
// report one process would have written. With several CUDA devices listed
// in CUDA_VISIBLE_DEVICES, shard i gets device i mod their count.
int CheckInJobs(int jobs, const std::vector<std::string>& argv, CheckOptions options) {
  bool temporary = false;
  if (options.report_dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "varlen-check-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "varlen: --jobs: cannot make a folder for the shards' reports\n";
      return kExitInvalid;
    }
    options.report_dir = pattern;
    temporary = true;
  }
  std::vector<std::string> devices;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    devices = absl::StrSplit(visible, ',', absl::SkipEmpty());
  }
  std::vector<std::pair<pid_t, std::string>> shards;
  for (int i = 0; i < jobs; ++i) {
    const std::string dir =
        (std::filesystem::path(options.report_dir) / "shards" / std::to_string(i)).string();
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    std::vector<std::string> args = argv;
    args.push_back("--jobs=1");
    args.push_back(absl::StrCat("--report=", dir));
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) {
      const absl::string_view entry = *e;
      if (absl::StartsWith(entry, "GTEST_TOTAL_SHARDS=") ||
          absl::StartsWith(entry, "GTEST_SHARD_INDEX=") ||
          (devices.size() > 1 && absl::StartsWith(entry, "CUDA_VISIBLE_DEVICES="))) {
        continue;
      }
      environment.emplace_back(entry);
    }
    environment.push_back(absl::StrCat("GTEST_TOTAL_SHARDS=", jobs));
    environment.push_back(absl::StrCat("GTEST_SHARD_INDEX=", i));
    if (devices.size() > 1) {
      environment.push_back(absl::StrCat("CUDA_VISIBLE_DEVICES=", devices[i % devices.size()]));
    }
    std::vector<char*> arg_pointers, env_pointers;
    for (std::string& a : args) arg_pointers.push_back(a.data());
    arg_pointers.push_back(nullptr);
    for (std::string& e : environment) env_pointers.push_back(e.data());
    env_pointers.push_back(nullptr);
    const std::string printout = (std::filesystem::path(dir) / "output.txt").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, printout.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, arg_pointers.data(),
                                    env_pointers.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      std::cerr << "varlen: --jobs: cannot start shard " << i << ": " << std::strerror(spawned)
                << "\n";
      return kExitInvalid;
    }
    shards.emplace_back(pid, dir);
  }
  std::vector<CheckReport> reports;
  bool invalid = false;
  for (int i = 0; i < jobs; ++i) {
    int status = 0;
    while (waitpid(shards[i].first, &status, 0) < 0 && errno == EINTR) {
    }
    const bool finished = WIFEXITED(status) && WEXITSTATUS(status) <= kExitFailed;
    absl::StatusOr<CheckReport> report =
        finished ? ReadCheckReport(shards[i].second)
                 : absl::InternalError(absl::StrCat("ended with status ", status));
    if (!report.ok()) {
      std::ifstream printout(std::filesystem::path(shards[i].second) / "output.txt");
      std::cerr << "varlen: --jobs: shard " << i << " of " << jobs << ": "
                << report.status().message() << "\n"
                << printout.rdbuf();
      invalid = true;
      continue;
    }
    reports.push_back(*std::move(report));
  }
  if (invalid) return kExitInvalid;
  absl::StatusOr<CheckReport> merged = MergeCheckReports(reports);
  if (!merged.ok()) {
    std::cerr << "varlen: --jobs: " << merged.status().message() << "\n";
    return kExitInvalid;
  }
  if (temporary && merged->passed()) {
    std::error_code ignored;
    std::filesystem::remove_all(options.report_dir, ignored);
    options.report_dir.clear();
  } else if (absl::Status written = WriteCheckReport(*merged, options.report_dir); !written.ok()) {
    std::cerr << "varlen: " << written.message() << "\n";
    return kExitInvalid;
  }
  return FinishCheck(*merged, options);
}

// --timings: the phase clock's split of `wall` seconds, on stderr.
void PrintPhaseClock(double wall) {
  const PhaseTotals totals = ReadPhaseClock();
  std::cerr << absl::StrFormat(
      "timings (this process): %d cases run, %d outputs judged in %.1f s: %.1f cases run/s, "
      "%.1f judged/s\n",
      totals.cases_run, totals.cases_judged, wall, totals.cases_run / wall,
      totals.cases_judged / wall);
  double timed = 0;
  for (int i = 0; i < kPhaseCount; ++i) {
    timed += totals.seconds[i];
    std::cerr << absl::StrFormat("  %-11s %8.2f s %5.1f %%\n", PhaseName(static_cast<Phase>(i)),
                                 totals.seconds[i], 100 * totals.seconds[i] / wall);
  }
  std::cerr << absl::StrFormat(
      "  %-11s %8.2f s %5.1f %%  (generation, shrinking, the properties' own work, reports)\n",
      "other", wall - timed, 100 * (wall - timed) / wall);
}

int Check(const std::vector<std::string>& argv) {
  CheckOptions options;
  absl::StatusOr<Tier> tier = ParseTier(absl::GetFlag(FLAGS_tier));
  if (!tier.ok()) return UsageError(absl::StrCat("--tier: ", tier.status().message()));
  options.tier = *tier;
  options.budget_scale = absl::GetFlag(FLAGS_budget_scale);
  options.counts_only = absl::GetFlag(FLAGS_counts_only);
  if (!(options.budget_scale > 0)) {
    return UsageError(absl::StrCat("--budget_scale=", options.budget_scale, " must be positive"));
  }
  const std::string backends = absl::GetFlag(FLAGS_backends);
  if (!backends.empty()) options.backends = absl::StrSplit(backends, ',', absl::SkipEmpty());
  options.corpus_dir = absl::GetFlag(FLAGS_corpus);
  if (options.corpus_dir.empty()) options.corpus_dir = VARLEN_CORPUS_DIR;
  options.report_dir = absl::GetFlag(FLAGS_report);
  std::string manifests = absl::GetFlag(FLAGS_expectations);
  if (const char* env = std::getenv("VARLEN_EXPECTATIONS"); manifests.empty() && env != nullptr) {
    manifests = env;
  }
  for (absl::string_view manifest : absl::StrSplit(manifests, ',', absl::SkipEmpty())) {
    absl::StatusOr<Expectations> loaded = LoadExpectations(std::string(manifest));
    if (!loaded.ok()) {
      std::cerr << "varlen: --expectations: " << loaded.status().message() << "\n";
      return kExitInvalid;
    }
    options.expectations.push_back(std::make_shared<const Expectations>(*std::move(loaded)));
  }
  options.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const bool timings = absl::GetFlag(FLAGS_timings);
  // The phase clock is per process: a timed run keeps its backends here.
  if (std::optional<IsolationOptions> isolation = IsolationFromFlags(); isolation && !timings) {
    options.isolation["*"] = *std::move(isolation);
  }
  absl::StatusOr<Shard> shard = ShardFromEnvironment();
  if (!shard.ok()) return UsageError(shard.status().message());
  options.shard = *shard;
  if (const int jobs = absl::GetFlag(FLAGS_jobs); jobs != 1) {
    if (timings) return UsageError("--timings times one process: leave --jobs out");
    if (jobs < 1) return UsageError(absl::StrCat("--jobs=", jobs, " must be at least 1"));
    if (shard->total > 1) {
      return UsageError(absl::StrCat("--jobs=", jobs, " with GTEST_TOTAL_SHARDS=", shard->total,
                                     ": split a run across machines or across processes, not "
                                     "both at once"));
    }
    return CheckInJobs(jobs, argv, options);
  }
  EnablePhaseClock(timings);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<CheckReport> report = RunCheck(options);
  if (!report.ok()) {
    std::cerr << "varlen: " << report.status().message() << "\n";
    return kExitInvalid;
  }
  if (timings) {
    PrintPhaseClock(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return FinishCheck(*report, options);
}

// varlen report --merge DIR...: the shards' reports as one.
int MergeReports(const std::vector<std::string>& dirs) {
  if (!absl::GetFlag(FLAGS_merge)) return UsageError("report needs --merge");
  if (dirs.empty()) return UsageError("report --merge needs the shards' report folders");
  std::vector<CheckReport> reports;
  for (const std::string& dir : dirs) {
    absl::StatusOr<CheckReport> report = ReadCheckReport(dir);
    if (!report.ok()) {
      std::cerr << "varlen: " << report.status().message() << "\n";
      return kExitInvalid;
    }
    reports.push_back(*std::move(report));
  }
  absl::StatusOr<CheckReport> merged = MergeCheckReports(reports);
  if (!merged.ok()) {
    std::cerr << "varlen: report --merge: " << merged.status().message() << "\n";
    return kExitInvalid;
  }
  CheckOptions options;
  options.report_dir = absl::GetFlag(FLAGS_report);
  if (!options.report_dir.empty()) {
    if (absl::Status written = WriteCheckReport(*merged, options.report_dir); !written.ok()) {
      std::cerr << "varlen: " << written.message() << "\n";
      return kExitInvalid;
    }
  }
  return FinishCheck(*merged, options);
}

int Mutants() {
  MutationOptions options;
  absl::StatusOr<Tier> tier = ParseTier(absl::GetFlag(FLAGS_tier));
  if (!tier.ok()) return UsageError(absl::StrCat("--tier: ", tier.status().message()));
  options.tier = *tier;
  options.anchors = absl::GetFlag(FLAGS_anchors);
  options.only = absl::GetFlag(FLAGS_only);
  options.isolation = IsolationFromFlags();
  absl::StatusOr<Shard> shard = ShardFromEnvironment();
  if (!shard.ok()) return UsageError(shard.status().message());
  options.shard = *shard;
  options.progress = [](const MutantRow& row, int done, int total) {
    std::cerr << absl::StrFormat(
        "[%d/%d] %s: %s after %d runs, %.2f s\n", done, total, row.mutant,
        row.suite.by.empty() ? "SURVIVED" : absl::StrCat("killed by ", row.suite.by),
        row.suite.executions, row.suite.seconds);
  };
  const std::vector<MutantRow> rows = AnalyzeMutants(options);
  if (rows.empty()) return UsageError(absl::StrCat("no mutant matches --only=", options.only));
  std::cout << MutantsMarkdown(rows, options);
  const bool all_killed = std::all_of(rows.begin(), rows.end(),
                                      [](const MutantRow& row) { return !row.suite.by.empty(); });
  return all_killed ? kExitOk : kExitFailed;
}
#endif

#ifdef VARLEN_HAVE_DECODER
// Prints what a fuzz target decodes from `path`, as a case file.
int Decode(const std::string& path) {
  absl::StatusOr<DecodeLimits> limits = DecodeLimitsFor(absl::GetFlag(FLAGS_target));
  if (!limits.ok()) return UsageError(limits.status().message());
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "varlen: " << path << ": cannot open the file\n";
    return kExitInvalid;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<Case> c =
      DecodeCase({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, *limits);
  if (!c.ok()) {
    std::cerr << "varlen: " << path << ": decodes to no valid case: " << c.status().message()
              << "\n";
    return kExitInvalid;
  }
  c->name = std::filesystem::path(path).stem().string();
  c->source = absl::StrCat("fuzz target ", absl::GetFlag(FLAGS_target), ": ", c->name);
  std::cout << WriteCase(*c);
  return kExitOk;
}
#endif

}  // namespace
}  // namespace varlen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(varlen::Usage());
  // Started again as a worker: serve one backend (varlen/run/isolation.h).
  if (varlen::IsWorkerProcess()) {
    // The supervisor's plugins (VARLEN_LOAD); a failure is in the log it reads.
    (void)varlen::LoadPlugins(varlen::PluginPaths());
    return varlen::ServeAsWorker([](absl::string_view name) {
      const varlen::Backend* backend = varlen::FindBackend(name);
      return backend != nullptr ? backend : varlen::FindMutant(name);
    });
  }
  if (const std::optional<std::string> help = varlen::HelpAsked(argc, argv)) {
    std::cout << *help;
    return 0;
  }
  std::string unknown;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--emit-python" || arg == "--emit_python") {
      std::cerr << "varlen: --emit-python is the Python package's (it writes a script for the "
                   "engine's own classes): python -m varlen repro FILE --emit-python\n";
      return 2;
    }
  }
  if (!varlen::CheckFlagNames(argc, argv, &unknown)) {
    return varlen::UsageError(absl::StrCat("unknown flag ", unknown));
  }
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return varlen::UsageError("missing command");
  const std::string command = args[1];
  const std::vector<std::string> rest(args.begin() + 2, args.end());
  if (!varlen::LoadPlugins(varlen::PluginPaths())) return 2;
#if VARLEN_BROKEN_RESOLVER
  std::cerr << "varlen: this is a test build with a deliberately broken resolver "
               "(VARLEN_BROKEN_RESOLVER): its verdicts are not to be trusted\n";
#endif
  if (command == "repro") return varlen::Repro(rest);
  if (command == "backends") {
    if (!rest.empty()) return varlen::UsageError("backends takes no arguments");
    return varlen::ListBackends();
  }
  if (command == "keywords") {
    if (!rest.empty()) return varlen::UsageError("keywords takes no arguments");
    std::cout << varlen::KeywordTableMarkdown();
    return 0;
  }
#ifdef VARLEN_HAVE_MUTANTS
  if (command == "check") {
    if (!rest.empty()) return varlen::UsageError("check takes no arguments, only flags");
    return varlen::Check(std::vector<std::string>(argv, argv + argc));
  }
  if (command == "report") return varlen::MergeReports(rest);
  if (command == "mutants") {
    if (!rest.empty()) return varlen::UsageError("mutants takes no arguments, only flags");
    return varlen::Mutants();
  }
#endif
#ifdef VARLEN_HAVE_DECODER
  if (command == "decode") {
    if (rest.size() != 1) return varlen::UsageError("decode takes one input file");
    return varlen::Decode(rest[0]);
  }
#endif
  return varlen::UsageError(absl::StrCat("unknown command \"", command, "\""));
}
