// varlen._core: the C++ harness for Python. Everything is the C++ library's
// (generation, resolution, oracle, judge, shrinking, reports); this module
// only registers Python backends with it and exposes its entry points. The
// GIL is released while the harness runs, and taken again by each call into
// a Python backend.

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nanobind/nanobind.h"
#include "nanobind/ndarray.h"
#include "nanobind/stl/map.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/pair.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/vector.h"
#include "python_backend.h"
#include "rapidcheck/Random.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"
#include "varlen/cases/synth.h"
#include "varlen/conformance/check.h"
#include "varlen/conformance/generators.h"
#include "varlen/conformance/suite.h"
#include "varlen/run/isolation.h"

namespace nb = nanobind;

namespace varlen::python {
namespace {

template <typename T>
T OrRaise(absl::StatusOr<T> value) {
  if (!value.ok()) throw nb::value_error(std::string(value.status().message()).c_str());
  return *std::move(value);
}

void OrRaise(const absl::Status& status) {
  if (!status.ok()) throw nb::value_error(std::string(status.message()).c_str());
}

BackendCapabilities CapabilitiesFrom(const nb::dict& d) {
  BackendCapabilities caps;
  for (const std::string& name : nb::cast<std::vector<std::string>>(d["dtypes"])) {
    caps.input_dtypes.push_back(OrRaise(ParseDType(name)));
  }
  caps.max_head_dim = nb::cast<int>(d["max_head_dim"]);
  caps.grouped_query_attention = nb::cast<bool>(d["grouped_query_attention"]);
  caps.distinct_value_head_dim = nb::cast<bool>(d["distinct_value_head_dim"]);
  caps.strided_inputs = nb::cast<bool>(d["strided_inputs"]);
  caps.device = nb::cast<std::string>(d["device"]);
  for (const std::string& name : nb::cast<std::vector<std::string>>(d["profiles"])) {
    caps.profiles.push_back(OrRaise(ParseAnyProfile(name)));
  }
  caps.max_tokens = nb::cast<int64_t>(d["max_tokens"]);
  caps.max_sequences = nb::cast<int64_t>(d["max_sequences"]);
  return caps;
}

const Backend& BackendNamed(const std::string& name) {
  const Backend* backend = FindBackend(name);
  if (backend == nullptr) {
    std::vector<std::string> names;
    for (const Backend* b : AllBackends()) names.emplace_back(b->name());
    throw nb::value_error(
        absl::StrCat("no backend named \"", name, "\" (known: ", absl::StrJoin(names, ", "), ")")
            .c_str());
  }
  return *backend;
}

// How the Python layer starts a backend's worker: by name, the command and
// the environment entries (varlen._worker_commands). A backend without one
// runs in this process.
using WorkerCommands =
    std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>>;

IsolationOptions IsolationFor(
    const std::pair<std::vector<std::string>, std::vector<std::string>>& command) {
  IsolationOptions options = OrRaise(IsolationFromEnvironment());
  options.worker_command = command.first;
  options.worker_environment = command.second;
  return options;
}

// The backend named `name`, behind a worker process when `workers` has its
// command. A backend keeps one worker across calls, so a pytest run of one
// case per item starts it once.
const Backend& BackendToRun(const std::string& name, const WorkerCommands& workers) {
  const Backend& backend = BackendNamed(name);
  const auto command = workers.find(name);
  if (command == workers.end()) return backend;
  static auto* const isolated = new std::map<std::string, std::unique_ptr<Backend>>;
  std::unique_ptr<Backend>& proxy = (*isolated)[name];
  if (proxy == nullptr) proxy = Isolate(backend, IsolationFor(command->second));
  return *proxy;
}

Case LoadCase(const std::string& path_or_json) {
  if (!path_or_json.empty() && path_or_json.front() == '{') {
    // A case given as text reads its files from the working folder.
    Case c = OrRaise(ParseCase(path_or_json, "<case>"));
    OrRaise(LoadCaseData(&c, "", "<case>"));
    return c;
  }
  return OrRaise(LoadCaseFile(path_or_json));
}

nb::dict OutcomeDict(const Case& c, const std::string& origin, const Outcome& outcome) {
  nb::dict d;
  d["case"] = c.name;
  d["backend"] = outcome.backend;
  d["verdict"] = std::string(VerdictName(outcome.verdict));
  d["text"] = FormatOutcomeText(c, origin, outcome);
  d["json"] = FormatJson(OutcomeToJson(c, origin, outcome));
  return d;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The varlen C++ harness: cases, resolution, the float64 oracle, the judge, the suite.";

  m.def(
      "register_backend",
      [](const std::string& name, const std::string& description, const nb::dict& capabilities,
         nb::object adapter, bool call_level, const std::string& engine,
         const std::string& version) {
        PythonBackendSpec spec;
        spec.name = name;
        spec.description = description;
        spec.capabilities = CapabilitiesFrom(capabilities);
        spec.call_level = call_level;
        if (!engine.empty()) {  // an engine's own code, of that version (empty: the latest)
          const Engine e = OrRaise(ParseEngine(engine));
          spec.engine_version = version.empty() ? EngineVersion::Latest(e)
                                                : OrRaise(EngineVersion::Parse(e, version));
        }
        OrRaise(RegisterBackend(std::make_unique<PythonBackend>(std::move(spec), adapter)));
      },
      nb::arg("name"), nb::arg("description"), nb::arg("capabilities"), nb::arg("adapter"),
      nb::arg("call_level"), nb::arg("engine"), nb::arg("version"));

  m.def("backends", [] {
    nb::list out;
    for (const Backend* b : AllBackends()) {
      nb::dict d;
      d["name"] = std::string(b->name());
      d["description"] = std::string(b->description());
      const absl::Status available = b->Available();
      d["unavailable"] = available.ok() ? std::string() : std::string(available.message());
      d["call_level"] = b->call_level();
      out.append(d);
    }
    return out;
  });

  m.def("engine_versions", [] {
    std::map<std::string, std::vector<std::string>> versions;
    for (Engine engine : AllEngines()) {
      std::vector<std::string>& names = versions[std::string(EngineName(engine))];
      for (EngineVersion v : EngineVersion::Modelled(engine)) names.emplace_back(v.name());
    }
    return versions;
  });

  m.def("engine_profiles", [] {
    std::map<std::string, std::vector<std::string>> profiles;
    for (Engine engine : AllEngines()) {
      std::vector<std::string>& names = profiles[std::string(EngineName(engine))];
      for (Profile profile : ProfilesOf(engine)) names.emplace_back(ProfileName(profile));
    }
    return profiles;
  });

  m.def("properties", [] { return PropertyNames(); });

  m.def(
      "merge_reports",
      [](const std::vector<std::string>& dirs, const std::string& report_dir) {
        std::vector<CheckReport> shards;
        for (const std::string& dir : dirs) shards.push_back(OrRaise(ReadCheckReport(dir)));
        const CheckReport merged = OrRaise(MergeCheckReports(shards));
        CheckOptions options;
        options.report_dir = report_dir;
        if (!report_dir.empty()) OrRaise(WriteCheckReport(merged, report_dir));
        nb::dict d;
        d["passed"] = merged.passed();
        d["text"] = CheckResultText(merged, options);
        return d;
      },
      nb::arg("dirs"), nb::arg("report_dir"));

  // GTEST_SHARD_INDEX, GTEST_TOTAL_SHARDS (varlen/run/shard.h).
  m.def("shard", [] {
    const Shard shard = OrRaise(ShardFromEnvironment());
    return std::make_pair(shard.index, shard.total);
  });

  m.def(
      "check",
      [](const std::vector<std::string>& backends, const std::string& tier,
         const std::string& report_dir, const std::string& corpus_dir,
         const std::vector<std::string>& expectations, bool progress,
         const std::map<std::string, std::string>& repro_commands, double budget_scale,
         const WorkerCommands& workers, bool counts_only) {
        CheckOptions options;
        options.counts_only = counts_only;
        for (const auto& [name, command] : workers) options.isolation[name] = IsolationFor(command);
        options.budget_scale = budget_scale;
        options.repro_commands = repro_commands;
        options.backends = backends;
        options.tier = OrRaise(ParseTier(tier));
        options.report_dir = report_dir;
        options.corpus_dir = corpus_dir;
        options.shard = OrRaise(ShardFromEnvironment());  // a CI matrix's part of the run
        for (const std::string& manifest : expectations) {
          options.expectations.push_back(
              std::make_shared<const Expectations>(OrRaise(LoadExpectations(manifest))));
        }
        if (progress) {
          options.progress = [](const std::string& line) {
            nb::gil_scoped_acquire gil;
            nb::module_::import_("sys").attr("stderr").attr("write")(line + "\n");
            nb::module_::import_("sys").attr("stderr").attr("flush")();
          };
        }
        absl::StatusOr<CheckReport> report;
        {
          nb::gil_scoped_release release;
          report = RunCheck(options);
        }
        const CheckReport& r = OrRaise(std::move(report));
        nb::list items;
        for (const CheckItem& item : r.items) {
          nb::dict i;
          i["backend"] = item.backend;
          i["kind"] = item.kind;
          i["name"] = item.name;
          i["status"] = std::string(CheckStatusName(item.status));
          i["seconds"] = item.seconds;
          i["message"] = item.message;
          i["picture"] = item.picture;
          i["shrunk"] = item.shrunk;
          i["fault"] = item.fault;
          i["fault_signature"] = item.fault_signature;
          items.append(i);
        }
        nb::dict d;
        d["passed"] = r.passed();
        d["text"] = CheckResultText(r, options);
        d["matrix"] = CheckMatrixMarkdown(r);
        d["items"] = items;
        return d;
      },
      nb::arg("backends"), nb::arg("tier"), nb::arg("report_dir"), nb::arg("corpus_dir"),
      nb::arg("expectations"), nb::arg("progress"), nb::arg("repro_commands"),
      nb::arg("budget_scale"), nb::arg("workers"), nb::arg("counts_only"));

  m.def(
      "repro",
      [](const std::string& path_or_json, const std::vector<std::string>& backends,
         const std::string& sglang, const WorkerCommands& workers) {
        std::vector<std::string> files;
        std::vector<Case> cases;
        if (!path_or_json.empty() && path_or_json.front() == '{') {
          files.push_back("<case>");
          cases.push_back(LoadCase(path_or_json));
        } else {
          // A folder is split between the shards of a sharded run; a file
          // named alone (a pytest item) is replayed.
          const Shard shard = std::filesystem::is_directory(path_or_json)
                                  ? OrRaise(ShardFromEnvironment())
                                  : Shard{};
          std::vector<std::string> listed = OrRaise(ListCaseFiles({path_or_json}));
          for (size_t i = 0; i < listed.size(); ++i) {
            if (shard.Owns(static_cast<int64_t>(i))) files.push_back(listed[i]);
          }
          for (const std::string& file : files) cases.push_back(OrRaise(LoadCaseFile(file)));
        }
        if (!sglang.empty()) {
          const EngineVersion version = OrRaise(EngineVersion::Parse(Engine::kSglang, sglang));
          for (Case& c : cases) {
            if (c.engine() == Engine::kSglang) c.version = version;
          }
        }
        std::vector<const Backend*> chosen;
        for (const std::string& name : backends) chosen.push_back(&BackendToRun(name, workers));
        nb::list outcomes;
        for (size_t i = 0; i < cases.size(); ++i) {
          std::vector<Outcome> results;
          {
            nb::gil_scoped_release release;
            CaseRunner runner(cases[i]);
            for (const Backend* b : chosen) results.push_back(runner.Run(*b));
          }
          for (const Outcome& o : results) outcomes.append(OutcomeDict(cases[i], files[i], o));
        }
        return outcomes;
      },
      nb::arg("path"), nb::arg("backends"), nb::arg("sglang"), nb::arg("workers"));

  m.def(
      "load_case",
      [](const std::string& path_or_json) {
        const Case c = LoadCase(path_or_json);
        nb::dict d;
        d["name"] = c.name;
        d["json"] = WriteCase(c);
        CaseRunner runner(c);
        if (runner.runs_forward()) {
          d["q"] = TensorToArray(runner.tensors().q);
          d["k"] = TensorToArray(runner.tensors().k);
          d["v"] = TensorToArray(runner.tensors().v);
        }
        return d;
      },
      nb::arg("path"));

  m.def(
      "reference",
      [](const std::string& path_or_json) {
        const Case c = LoadCase(path_or_json);
        CaseRunner runner(c);
        if (!runner.runs_forward()) {
          throw nb::value_error(
              absl::StrCat("case ", c.name, " is too large for a forward run here").c_str());
        }
        const Reference* reference;
        {
          nb::gil_scoped_release release;
          reference = &runner.reference();
        }
        const Geometry& g = c.geometry;
        Tensor out = Tensor::FromDoubles(reference->oracle, DType::kFloat64, Device::kCpu,
                                         Shape{g.total_tokens(), g.num_heads, g.head_dim_v});
        return TensorToArray(out);
      },
      nb::arg("path"));

  m.def(
      "run_property",
      [](const std::string& property, const std::string& backend, const std::string& tier,
         const std::string& failures_dir, const WorkerCommands& workers) {
        const Backend& b = BackendToRun(backend, workers);
        PropertyRunOptions options;
        const Tier t = OrRaise(ParseTier(tier));
        options.budget = BudgetFor(property, t);
        options.on_shrunk = [&](const PropertyRunResult& so_far) {
          (void)WriteShrunkCase(failures_dir, backend, property, t, so_far);
        };
        PropertyRunResult result;
        {
          nb::gil_scoped_release release;
          result = RunProperty(property, b, options);
        }
        nb::dict d;
        d["passed"] = result.passed;
        d["summary"] = DescribeRun(result);
        d["params"] = result.params_note;
        d["message"] = result.message;
        d["why"] = result.why;
        d["shrunk"] = std::string();
        d["unsupported"] = result.unsupported > 0 && result.unsupported == result.executed;
        if (!result.passed && result.shrunk.has_value()) {
          const std::string path =
              OrRaise(WriteShrunkCase(failures_dir, backend, property, t, result));
          d["shrunk"] = path;
        }
        return d;
      },
      nb::arg("property"), nb::arg("backend"), nb::arg("tier"), nb::arg("failures_dir"),
      nb::arg("workers"));

  // A worker process (varlen/run/isolation.h) serves the backend its
  // supervisor names, once the program has registered its backends.
  m.def("is_worker", [] { return IsWorkerProcess(); });
  m.def("serve_as_worker", [] {
    nb::gil_scoped_release release;
    return ServeAsWorker([](absl::string_view name) { return FindBackend(name); });
  });

  m.def(
      "time_run",
      [](const std::string& backend, const std::string& path_or_json, int repeats) {
        // The backend alone on the case's ground-truth launch, `repeats` times
        // (no resolution, oracle or judgement): seconds per run.
        const Backend& b = BackendNamed(backend);
        const Case c = LoadCase(path_or_json);
        const QkvTensors qkv = SynthesizeQkv(c);
        const Geometry& g = c.geometry;
        const KernelCall call =
            BindGroundTruth(FlattenBatch(qkv.q), FlattenBatch(qkv.k), FlattenBatch(qkv.v),
                            g.seq_lens, g.scale(), g.dtype);
        const VarlenAttentionParams params = call.params();
        OrRaise(b.Supports(params));
        std::vector<double> seconds;
        nb::gil_scoped_release release;
        for (int i = 0; i < repeats; ++i) {
          const auto start = std::chrono::steady_clock::now();
          const absl::Status ran = RunSupported(b, params);
          seconds.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          if (!ran.ok()) {
            nb::gil_scoped_acquire gil;
            throw nb::value_error(std::string(ran.message()).c_str());
          }
        }
        return seconds;
      },
      nb::arg("backend"), nb::arg("path"), nb::arg("repeats"));

  m.def(
      "case_files", [](const std::string& dir) { return OrRaise(ListCaseFiles({dir})); },
      nb::arg("dir"));

  m.def("source_corpus_dir", [] { return std::string(VARLEN_CORPUS_DIR); });

  // The engine differential (scripts/sglang-differential): calls drawn from
  // the property generators, and faithful mode's prediction for each.
  m.def(
      "generate_calls",
      [](int count, uint64_t seed, const std::string& profile, const std::string& version_name) {
        Profile p = OrRaise(ParseAnyProfile(profile));
        // A name two engines share ("sdpa": SGLang's and transformers') is
        // the profile of the engine whose version is named.
        if (!EngineVersion::Parse(EngineOf(p), version_name).ok()) {
          for (const Engine engine : AllEngines()) {
            absl::StatusOr<Profile> named = ParseProfile(profile, engine);
            if (named.ok() && EngineVersion::Parse(engine, version_name).ok()) p = *named;
          }
        }
        const EngineVersion version = OrRaise(EngineVersion::Parse(EngineOf(p), version_name));
        const GeometryLimits limits{.max_sequences = 5,
                                    .max_len = 24,
                                    .max_heads = 4,
                                    .max_head_dim = 8,
                                    .kernel_head_dims = true};
        // The profile is drawn, then fixed: SGLang's calls are the ones they
        // always were (its figures stay reproducible), vLLM's are vLLM calls.
        const rc::Gen<Case> gen = GenCaseFor(p, limits);
        rc::Random random(seed);
        std::vector<std::string> cases;
        for (int attempt = 0; static_cast<int>(cases.size()) < count && attempt < 4 * count;
             ++attempt) {
          // Sizes cycle as a property run's do: small ones first, up to the nominal.
          Case c = gen(random.split(), attempt % (rc::kNominalSize + 1)).value();
          c.name = absl::StrCat(absl::StrReplaceAll(profile, {{"/", "-"}}), "-", version_name, "-",
                                seed, "-", attempt);
          c.source = "generated for the engine differential";
          c.description.clear();
          c.mode = Mode::kFaithful;
          c.version = version;
          c.call.profile = p;
          c.expect.reset();
          if (ValidateCase(c).ok()) cases.push_back(WriteCase(c));
        }
        return cases;
      },
      nb::arg("count"), nb::arg("seed"), nb::arg("profile"), nb::arg("version"));

  m.def(
      "case_layout",
      [](const std::string& path_or_json) {
        // q, k and v's shapes and strides as the case makes them, without
        // making them (a recorder checks a live call against it).
        const Case c = LoadCase(path_or_json);
        const QkvTensors qkv = ShapeOnlyQkv(c);
        nb::dict d;
        for (const auto& [name, t] :
             {std::pair<const char*, const Tensor*>{"q", &qkv.q}, {"k", &qkv.k}, {"v", &qkv.v}}) {
          d[name] = nb::make_tuple(std::vector<int64_t>(t->shape().begin(), t->shape().end()),
                                   std::vector<int64_t>(t->strides().begin(), t->strides().end()));
        }
        return d;
      },
      nb::arg("path_or_json"));

  m.def(
      "faithful_call",
      [](const std::string& path_or_json) {
        const Case c = LoadCase(path_or_json);
        const QkvTensors qkv = SynthesizeQkv(c);
        nb::dict d;
        absl::StatusOr<AttentionCall> call = CallOfCase(c, qkv);
        if (!call.ok()) {
          d["builder_error"] = FormatPythonError(call.status());
          return d;
        }
        call->version = c.engine_version();
        const Resolution r = Resolve(*call, c.call.profile, Mode::kFaithful);
        d["call"] = DescribeCall(*call, c.call.profile);
        d["raised"] = nb::none();
        if (!r.status.ok()) {
          const std::optional<PyErrorKind> kind = PythonErrorKindOf(r.status);
          d["raised"] = nb::make_tuple(
              kind.has_value() ? std::string(PyErrorKindName(*kind)) : std::string("Unimplemented"),
              std::string(r.status.message()));
        }
        d["resolved"] = r.args.has_value() ? FormatJson(ResolvedArgsToJson(*r.args)) : "";
        // What the library raises once the kernel returned (the kernel's own
        // entry checks, which come first, are the binding's).
        d["after_kernel"] = nb::none();
        if (r.args.has_value() && !r.args->after_kernel.ok()) {
          const absl::Status& after = r.args->after_kernel;
          d["after_kernel"] =
              nb::make_tuple(std::string(PyErrorKindName(*PythonErrorKindOf(after))),
                             std::string(after.message()));
        }
        const DeviceEventCounts counts = r.counts();
        d["host_syncs"] = counts.host_syncs;
        d["host_to_device_copies"] = counts.host_to_device_copies;
        d["notes"] = r.notes;
        // The warmup calls made before this one, each as the case it is.
        std::vector<std::string> warmups;
        for (const Case::Warmup& w : c.warmup) warmups.push_back(WriteCase(w.patched));
        d["warmups"] = warmups;
        return d;
      },
      nb::arg("case"));
}

}  // namespace varlen::python
