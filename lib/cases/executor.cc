#include "varlen/cases/executor.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/fault.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/limits.h"
#include "varlen/cases/phase_clock.h"
#include "varlen/cases/report.h"
#include "varlen/contract/resolve.h"
#include "varlen/contract/sglang/metadata.h"
#include "varlen/contract/vllm/metadata.h"
#include "varlen/core/device_ledger.h"

namespace varlen {
namespace {

// Whether an engine's backend raised what faithful mode predicts: the same
// type and message, except that Python's binding error names the function
// that refused the keyword by its qualified name, which is the backend's own
// class ("MMEncoderAttention.forward_cuda() got an unexpected keyword
// argument 'x'" from a subclass's forward_oot names that).
bool SameRaised(absl::string_view predicted, absl::string_view raised) {
  if (predicted == raised) return true;
  constexpr absl::string_view kBinding = "() got an unexpected keyword argument '";
  const size_t p = predicted.find(kBinding), r = raised.find(kBinding);
  if (p == absl::string_view::npos || r == absl::string_view::npos) return false;
  const auto callee_start = [](absl::string_view text, size_t end) {
    const size_t space = text.rfind(' ', end);
    return space == absl::string_view::npos ? 0 : space + 1;
  };
  return predicted.substr(0, callee_start(predicted, p)) ==
             raised.substr(0, callee_start(raised, r)) &&
         predicted.substr(p) == raised.substr(r);
}

// torch.empty_like(q) where q has no storage (a geometry too large to
// allocate): resolution may read its values (as cu_seqlens, say), so it gets
// zeros up to this many elements; beyond, the case is unsupported. The
// output workspace, whose values nothing reads, stays shape-only.
constexpr int64_t kMaxEmptyLikeElements = int64_t{1} << 18;

bool ReadsEmptyLikeQ(const ArgLiteral& a) {
  if (a.kind == ArgLiteral::Kind::kEmptyLikeQ) return true;
  for (const ArgLiteral& item : a.list) {
    if (ReadsEmptyLikeQ(item)) return true;
  }
  return false;
}

bool ReadsEmptyLikeQ(const CallSpec& call) {
  if (ReadsEmptyLikeQ(call.cu_seqlens)) return true;
  for (const auto& [key, value] : call.kwargs) {
    if (key != "output_ws" && ReadsEmptyLikeQ(value)) return true;
  }
  if (!call.forward_metadata.has_value()) return false;
  const MetadataSpec& m = *call.forward_metadata;
  for (const ArgLiteral* field : {&m.cu_seqlens, &m.seq_lens, &m.max_seqlen, &m.packed_indptrs,
                                  &m.sequence_lengths, &m.flashinfer_max_seqlen}) {
    if (ReadsEmptyLikeQ(*field)) return true;
  }
  return false;
}

// A fresh Python object for each run: resolution may mutate caches.
// `values_read`: false for the output workspace alone.
Value Materialize(const ArgLiteral& a, const Tensor& q, bool values_read = true) {
  switch (a.kind) {
    case ArgLiteral::Kind::kNone:
      return Value::None();
    case ArgLiteral::Kind::kBool:
      return Value::Bool(a.b);
    case ArgLiteral::Kind::kInt:
      return Value::Int(a.i);
    case ArgLiteral::Kind::kFloat:
      return Value::Float(a.f);
    case ArgLiteral::Kind::kStr:
      return Value::Str(a.s);
    case ArgLiteral::Kind::kTensor:
      return Value::FromTensor(MakeTensor(a.tensor));
    case ArgLiteral::Kind::kList: {
      std::vector<Value> items;
      for (const ArgLiteral& item : a.list) items.push_back(Materialize(item, q, values_read));
      return Value::List(std::move(items));
    }
    case ArgLiteral::Kind::kSingletonCache: {
      auto cache = std::make_shared<SingletonCache>();
      if (a.cache_has_data) cache->data = MakeTensor(a.tensor);
      return Value::Cache(std::move(cache));
    }
    case ArgLiteral::Kind::kEmptyLikeQ:
      return Value::FromTensor(q.has_storage() || values_read
                                   ? Tensor::Zeros(q.dtype(), q.device(), q.shape())
                                   : Tensor::ShapeOnly(q.dtype(), q.device(), q.shape()));
  }
  return Value::None();
}

// `call_cu` is the call's cu_seqlens: a builder input spelled the same way is
// the same tensor, as when a model hands one cu_seqlens to the builder and to
// every layer.
absl::StatusOr<VisionAttentionMetadata> BuildMetadata(const MetadataSpec& m, Mode mode,
                                                      const Tensor& q, const ArgLiteral& call_cu,
                                                      const Value& call_cu_value) {
  const Value cu = m.cu_seqlens.kind == ArgLiteral::Kind::kTensor && m.cu_seqlens == call_cu
                       ? call_cu_value
                       : Materialize(m.cu_seqlens, q);
  switch (m.builder) {
    case MetadataSpec::Builder::kFlashinferCudnn:
      return PrepareFlashinferCudnnMetadata(cu, m.device, m.elem_per_token, mode);
    case MetadataSpec::Builder::kPlain: {
      PlainMetadataOptions options;
      options.max_seqlen = Materialize(m.max_seqlen, q);
      options.packed_indptrs = Materialize(m.packed_indptrs, q);
      options.sequence_lengths = Materialize(m.sequence_lengths, q);
      options.flashinfer_max_seqlen = Materialize(m.flashinfer_max_seqlen, q);
      return PrepareVisionAttentionMetadata(cu, m.device, options, mode);
    }
    case MetadataSpec::Builder::kManual: {
      VisionAttentionMetadata metadata;
      metadata.cu_seqlens = cu;
      metadata.seq_lens = Materialize(m.seq_lens, q);
      metadata.max_seqlen = Materialize(m.max_seqlen, q);
      metadata.packed_indptrs = Materialize(m.packed_indptrs, q);
      metadata.sequence_lengths = Materialize(m.sequence_lengths, q);
      metadata.flashinfer_max_seqlen = Materialize(m.flashinfer_max_seqlen, q);
      return metadata;
    }
  }
  return absl::InternalError("unknown metadata builder");
}

AttentionCall MaterializeCall(const Case& c, const QkvTensors& qkv) {
  AttentionCall call;
  call.q = qkv.q;
  call.k = qkv.k;
  call.v = qkv.v;
  call.bsz = c.call.bsz.value_or(1);
  call.seq_len = c.call.seq_len.value_or(c.geometry.total_tokens() / call.bsz);
  call.cu_seqlens = Materialize(c.call.cu_seqlens, qkv.q);
  for (const auto& [key, value] : c.call.kwargs) {
    call.kwargs.set(key, Materialize(value, qkv.q, key != "output_ws"));
  }
  call.entry = c.call.entry;
  call.graph_mode = c.call.graph_mode;
  call.rotary = c.call.rotary;
  call.tower_windows = c.call.windows;
  call.sdpa = c.call.sdpa;
  call.version = c.engine_version();
  call.platform = c.platform;
  call.vllm_layer = {.num_heads = c.geometry.num_heads,
                     .head_size = c.geometry.head_dim,
                     .num_kv_heads = c.geometry.num_kv_heads,
                     .scale = c.geometry.softmax_scale};
  return call;
}

// vLLM: the keywords the encoder metadata builders make, in place of the
// call's own.
absl::Status ApplyVllmMetadata(const Case& c, AttentionCall* call) {
  if (!c.call.vllm_metadata.has_value()) return absl::OkStatus();
  const VllmMetadataSpec& m = *c.call.vllm_metadata;
  VllmMetadataOptions options;
  options.hidden_size = m.hidden_size.value_or(c.geometry.num_heads * c.geometry.head_dim);
  options.tp_size = m.tp_size;
  options.fp8_padded_hidden_size = m.fp8_padded_hidden_size;
  const Value cu = Materialize(m.cu_seqlens, call->q);
  VARLEN_ASSIGN_OR_RETURN(
      VllmEncoderMetadata metadata,
      PrepareVllmEncoderMetadata(c.call.profile, cu.as_tensor(), options, m.device, c.mode));
  call->cu_seqlens = metadata.cu_seqlens;
  call->kwargs.set("max_seqlen", metadata.max_seqlen);
  if (!metadata.sequence_lengths.is_none()) {
    call->kwargs.set("sequence_lengths", metadata.sequence_lengths);
  }
  return absl::OkStatus();
}

// True when every field of `expected` (an object) equals the same field of
// `actual`, recursively; numbers compare by value.
bool JsonSubsetMatches(const nlohmann::ordered_json& expected, const nlohmann::ordered_json& actual,
                       const std::string& path, std::string* mismatch) {
  if (expected.is_object()) {
    if (!actual.is_object()) {
      *mismatch = absl::StrCat(path, ": expected an object, got ", actual.dump());
      return false;
    }
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      auto found = actual.find(it.key());
      if (found == actual.end()) {
        *mismatch = absl::StrCat(path, ".", it.key(), ": absent from the resolved arguments");
        return false;
      }
      if (!JsonSubsetMatches(it.value(), *found, absl::StrCat(path, ".", it.key()), mismatch)) {
        return false;
      }
    }
    return true;
  }
  if (expected != actual) {
    *mismatch = absl::StrCat(path, ": expected ", expected.dump(), ", got ", actual.dump());
    return false;
  }
  return true;
}

// Multiply-adds the kernel would perform for `p` (as a double: it only has
// to be compared with the budget, and may be absurdly large).
double KernelMacs(const VarlenAttentionParams& p) {
  double macs = 0.0;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceView s = SequenceAt(p, b);
    macs += static_cast<double>(s.rows) * static_cast<double>(s.keys) * p.num_heads_q *
            (p.head_dim_qk + p.head_dim_v);
  }
  return macs;
}

void CheckExpectation(const Case& c, Outcome* outcome) {
  if (outcome->observed == Observed::kUnsupported) {
    outcome->verdict = Verdict::kUnsupported;
    return;
  }
  std::vector<std::string>& mismatches = outcome->mismatches;
  // A backend that fails to run fails, whatever the case expects.
  if (outcome->observed == Observed::kError && outcome->error_stage == "backend") {
    const std::optional<Fault> fault = FaultOf(outcome->error);
    mismatches.push_back(fault.has_value()
                             ? DescribeFault(*fault)
                             : absl::StrCat("the backend failed: ", outcome->error.message()));
    outcome->verdict = Verdict::kFail;
    return;
  }
  if (!c.expect.has_value()) {
    // Without an expectation only a silent corruption is a failure.
    if (outcome->observed == Observed::kCorruption) {
      mismatches.push_back("the output does not match the reference");
    }
  } else {
    const Expectation& e = *c.expect;
    switch (e.outcome) {
      case Expectation::Outcome::kError: {
        const std::string expected = FormatPythonError(PythonError(e.error_kind, e.message));
        if (outcome->observed != Observed::kError) {
          mismatches.push_back(
              absl::StrCat("expected ", expected, "; observed ", ObservedName(outcome->observed)));
        } else if (FormatPythonError(outcome->error) != expected) {
          mismatches.push_back(
              absl::StrCat("expected ", expected, "; raised ", FormatPythonError(outcome->error)));
        }
        break;
      }
      case Expectation::Outcome::kSuccess:
        if (outcome->observed != Observed::kSuccess) {
          mismatches.push_back(
              absl::StrCat("expected success; observed ", ObservedName(outcome->observed)));
        }
        break;
      case Expectation::Outcome::kSilentCorruption:
        if (outcome->observed != Observed::kCorruption) {
          mismatches.push_back(absl::StrCat("expected a silent corruption; observed ",
                                            ObservedName(outcome->observed)));
        }
        break;
    }
    if (e.host_syncs.has_value() && outcome->resolution.has_value()) {
      const int syncs = outcome->resolution->counts().host_syncs;
      if (syncs != *e.host_syncs) {
        mismatches.push_back(absl::StrCat("expected ", *e.host_syncs,
                                          " host syncs during resolution; observed ", syncs));
      }
    }
    if (e.unread_keywords.has_value() && outcome->resolution.has_value() &&
        outcome->resolution->unread_keywords != *e.unread_keywords) {
      mismatches.push_back(absl::StrCat(
          "expected the unread keywords [", absl::StrJoin(*e.unread_keywords, ", "),
          "]; observed [", absl::StrJoin(outcome->resolution->unread_keywords, ", "), "]"));
    }
    if (!e.resolved.is_null()) {
      if (!outcome->resolution.has_value() || !outcome->resolution->args.has_value()) {
        mismatches.push_back("expected resolved arguments, but resolution did not succeed");
      } else {
        const nlohmann::ordered_json actual = ResolvedArgsToJson(*outcome->resolution->args);
        std::string mismatch;
        if (!JsonSubsetMatches(e.resolved, actual, "resolved", &mismatch)) {
          mismatches.push_back(mismatch);
        }
      }
    }
  }
  outcome->verdict = mismatches.empty() ? Verdict::kPass : Verdict::kFail;
}

// Where the oracle runs for a forward run of `c`, or why it runs resolution only.
absl::StatusOr<OracleDevice> ForwardDevice(const Case& c, const RunOptions& options) {
  if (!options.allow_forward) return absl::FailedPreconditionError("forward runs disabled");
  if (c.data.files.has_value() && c.data.file_values == nullptr) {
    return absl::FailedPreconditionError(
        "q, k and v are in the files $.data.files names, and this case was read without them "
        "(load it from its file)");
  }
  return OracleDeviceFor(c.geometry, options.budget);
}

}  // namespace

absl::string_view ObservedName(Observed observed) {
  switch (observed) {
    case Observed::kError:
      return "error";
    case Observed::kSuccess:
      return "success";
    case Observed::kCorruption:
      return "silent corruption";
    case Observed::kUnsupported:
      return "unsupported";
  }
  return "?";
}

absl::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kUnsupported:
      return "UNSUPPORTED";
  }
  return "?";
}

CaseRunner::CaseRunner(Case c, RunOptions options)
    : case_(std::move(c)),
      options_(options),
      oracle_device_(ForwardDevice(case_, options)),
      forward_(oracle_device_.ok()),
      qkv_(forward_ ? SynthesizeQkv(case_) : ShapeOnlyQkv(case_)),
      reference_(options.reference) {
  // The case's budget and forward switch (a fuzzer's small budget holds for
  // its warmups too); their outputs are never kept.
  RunOptions warmup_options = options;
  warmup_options.keep_output = false;
  warmup_options.reference = nullptr;
  warmups_.reserve(case_.warmup.size());
  for (const Case::Warmup& w : case_.warmup) {
    // Made again from the patch when it still applies: the case may have
    // changed since it was read (`varlen repro --sglang` sets the version of
    // the whole run).
    absl::StatusOr<Case::Warmup> fresh = MakeWarmup(case_, w.patch);
    warmups_.emplace_back(fresh.ok() ? std::move(fresh->patched) : w.patched, warmup_options);
  }
}

double CaseRunner::ReferenceScale() const {
  // Unless the case names one, the intended scale is what the calling
  // convention's own code computes for None: the spellings of
  // head_dim ** -0.5 differ in the last bit, which a float64 run sees.
  return case_.geometry.softmax_scale.value_or(
      DefaultSoftmaxScale(case_.call.profile, case_.geometry.head_dim));
}

const Reference& CaseRunner::GetReference() {
  if (reference_ == nullptr) {
    Geometry g = case_.geometry;
    g.softmax_scale = ReferenceScale();
    const QkvTensors qkv = HeadsApart(case_, qkv_);
    reference_ = std::make_shared<const Reference>(
        ComputeReference(g, qkv.q, qkv.k, qkv.v, *oracle_device_));
  }
  return *reference_;
}

Outcome CaseRunner::Run(const Backend& backend) {
  CountCaseRun();
  Outcome outcome;
  outcome.backend = std::string(backend.name());
  // Every run, not once per runner: the backend must have just seen them.
  for (CaseRunner& warmup : warmups_) outcome.warmups.push_back(warmup.Run(backend));
  Execute(backend, &outcome);
  if (!backend.call_level()) {
    CheckExpectation(case_, &outcome);
  } else if (outcome.observed == Observed::kUnsupported) {
    outcome.verdict = Verdict::kUnsupported;
  } else {
    outcome.verdict = outcome.mismatches.empty() ? Verdict::kPass : Verdict::kFail;
  }
  return outcome;
}

absl::StatusOr<AttentionCall> CallOfCase(const Case& c, const QkvTensors& qkv) {
  AttentionCall call = MaterializeCall(c, qkv);
  VARLEN_RETURN_IF_ERROR(ApplyVllmMetadata(c, &call));
  if (c.call.forward_metadata.has_value()) {
    VARLEN_ASSIGN_OR_RETURN(
        call.forward_metadata,
        BuildMetadata(*c.call.forward_metadata, c.mode, qkv.q, c.call.cu_seqlens, call.cu_seqlens));
  }
  return call;
}

namespace {

// Faithful resolution of a call-level backend's call, on the phase clock.
Resolution ResolveTimed(const AttentionCall& call, Profile profile) {
  ScopedPhase timed(Phase::kResolution);
  return Resolve(call, profile, Mode::kFaithful);
}

}  // namespace

bool KernelRefusesGeometry(const Case& c) {
  const QkvTensors qkv = SynthesizeQkv(c);
  absl::StatusOr<AttentionCall> call = CallOfCase(c, qkv);
  if (!call.ok()) return false;
  const Resolution resolution = Resolve(*call, c.call.profile, c.mode);
  if (!resolution.status.ok() || !resolution.args.has_value()) return false;
  return IsKernelCapabilityLimit(BindForKernel(*resolution.args).status());
}

void CaseRunner::Execute(const Backend& backend, Outcome* outcome) {
  auto raised = [outcome](absl::Status error, const char* stage) {
    outcome->error = std::move(error);
    outcome->error_stage = stage;
    outcome->observed = Observed::kError;
  };
  auto unsupported = [outcome](absl::Status why) {
    outcome->unsupported = std::move(why);
    outcome->observed = Observed::kUnsupported;
  };

  if (!qkv_.q.has_storage() && qkv_.q.numel() > kMaxEmptyLikeElements &&
      ReadsEmptyLikeQ(case_.call)) {
    return unsupported(absl::UnimplementedError(absl::StrCat(
        "torch.empty_like(q) is passed where its values are read, and q has ", qkv_.q.numel(),
        " elements: more than the ", kMaxEmptyLikeElements, " this harness allocates for it")));
  }
  AttentionCall call = MaterializeCall(case_, qkv_);
  if (case_.call.vllm_metadata.has_value()) {
    ScopedDeviceLedger ledger;
    const absl::Status built = ApplyVllmMetadata(case_, &call);
    outcome->builder_events = ledger.events();
    if (!built.ok()) return raised(built, "metadata builder");
  }
  if (case_.call.forward_metadata.has_value()) {
    ScopedDeviceLedger ledger;
    absl::StatusOr<VisionAttentionMetadata> metadata = BuildMetadata(
        *case_.call.forward_metadata, case_.mode, qkv_.q, case_.call.cu_seqlens, call.cu_seqlens);
    outcome->builder_events = ledger.events();
    if (!metadata.ok()) return raised(metadata.status(), "metadata builder");
    call.forward_metadata = *std::move(metadata);
  }
  if (backend.call_level()) return ExecuteWholeCall(backend, std::move(call), outcome);

  {
    ScopedPhase timed(Phase::kResolution);
    outcome->resolution = backend.ResolveCall(call, case_.call.profile, case_.mode);
  }
  // A path the model does not reproduce is not a verdict on the backend.
  if (absl::IsUnimplemented(outcome->resolution->status)) {
    return unsupported(outcome->resolution->status);
  }
  if (!outcome->resolution->status.ok()) return raised(outcome->resolution->status, "resolution");

  // The kernel's entry checks need shapes, not values: a case too big to run
  // forward still meets them.
  absl::StatusOr<KernelCall> kernel = BindForKernel(*outcome->resolution->args);
  if (!kernel.ok()) {
    // A geometry the profile's kernel refuses is out of scope for a hardened
    // call and for a case that expects no error (the generated correct
    // calls); a faithful case that expects the refusal gets it.
    if (IsKernelCapabilityLimit(kernel.status()) &&
        (case_.mode == Mode::kHardened ||
         (case_.expect.has_value() && case_.expect->outcome != Expectation::Outcome::kError))) {
      return unsupported(absl::UnimplementedError(
          absl::StrCat("the profile's kernel does not take this geometry (",
                       FormatPythonError(kernel.status()), ")")));
    }
    if (PythonErrorKindOf(kernel.status()).has_value()) {
      const bool after = kernel.status() == outcome->resolution->args->after_kernel;
      return raised(kernel.status(), after ? "library, after the kernel" : "kernel entry");
    }
    if (absl::IsUnimplemented(kernel.status())) return unsupported(kernel.status());
    outcome->kernel_fault = kernel.status();
    outcome->observed = Observed::kCorruption;
    return;
  }
  outcome->kernel = kernel->description();
  if (!forward_) {
    outcome->resolution_only_reason =
        absl::StrCat("resolution only: ", oracle_device_.status().message());
    outcome->observed = Observed::kSuccess;
    return;
  }
  const VarlenAttentionParams params = kernel->params();
  const absl::Status available = backend.Available();
  if (!available.ok()) return unsupported(available);
  if (absl::Status supported = SupportsProfile(backend, case_.call.profile); !supported.ok()) {
    return unsupported(supported);
  }
  if (absl::Status supported = backend.Supports(params); !supported.ok()) {
    if (FaultOf(supported).has_value()) return raised(supported, "backend");
    return unsupported(supported);
  }
  outcome->kernel_fault = CheckKernelBounds(params);
  if (!outcome->kernel_fault.ok()) {
    outcome->observed = Observed::kCorruption;
    return;
  }
  // Wrong arguments can ask a kernel for far more work than the ground truth
  // needs (a missing mask over a long batch): that is not run on a CPU.
  const bool on_gpu = backend.capabilities().device == "cuda";
  const int64_t kernel_budget = on_gpu ? kGpuForwardBudget.macs : options_.budget.macs;
  if (const double macs = KernelMacs(params); macs > static_cast<double>(kernel_budget)) {
    return unsupported(absl::ResourceExhaustedError(
        absl::StrFormat("the kernel would compute %.3g multiply-adds, over the %s budget of %d",
                        macs, on_gpu ? "GPU" : "CPU", kernel_budget)));
  }

  PoisonOutput(kernel->output());
  absl::Status ran;
  {
    ScopedPhase timed(Phase::kBackend);
    ran = RunSupported(backend, params);
  }
  if (!ran.ok()) return raised(ran, "backend");  // reported, never judged as numbers
  kernel->ApplyEpilogue();
  const Tensor output = kernel->PackedOutput();
  const Reference& reference = GetReference();
  if (!reference.status.ok()) return raised(reference.status, "reference");
  outcome->numerics = JudgeOutput(case_.geometry, reference, output, options_.tolerance);
  if (options_.keep_output) outcome->output = output;
  outcome->observed = outcome->numerics->passed ? Observed::kSuccess : Observed::kCorruption;
}

namespace {

std::vector<int64_t> NonEmpty(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> kept;
  for (const int64_t n : lengths) {
    if (n > 0) kept.push_back(n);
  }
  return kept;
}

// A function registered in an engine is judged on the calls the engine makes
// of it when they say the ground truth (its sequences, up to empty ones, and
// its scale): it must then return the reference. Any other case is
// unsupported, with why: the engine raises first, or what a function
// computes from those calls is its own.
absl::Status PredictFunctionCalls(const Case& c, const AttentionCall& call, double reference_scale,
                                  EngineCallOutcome* engine) {
  const std::string engine_name = call.version.DisplayName();
  if (!c.geometry.padding.empty()) {
    // A function call's sequences are lengths, not places in the rows.
    return absl::UnimplementedError(
        "padding rows before a registered function: which rows its calls read is not modelled");
  }
  absl::StatusOr<FunctionCalls> calls = FunctionCallsOf(call, c.call.profile);
  if (absl::IsUnimplemented(calls.status())) return calls.status();
  if (!calls.ok()) {
    return absl::UnimplementedError(
        absl::StrCat(engine_name, " raises before it calls the function (",
                     FormatPythonError(calls.status()), "): nothing of the function to judge"));
  }
  if (!calls->ambiguous.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        engine_name, " calls the function with arguments that ask no single attention (",
        calls->ambiguous, "): what a function does with them is its own"));
  }
  std::vector<int64_t> said;
  for (const FunctionCall& fn : calls->calls) {
    if (fn.scale != reference_scale) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s asks the function for scale %.17g, the case intends %.17g: what a function "
          "computes then is its own",
          engine_name, fn.scale, reference_scale));
    }
    for (const int64_t n : NonEmpty(fn.sequences)) said.push_back(n);
  }
  if (said != NonEmpty(c.geometry.seq_lens)) {
    return absl::UnimplementedError(
        absl::StrCat("the sequences ", engine_name, "'s calls of the function delimit (",
                     absl::StrJoin(said, ", "), ") are not the case's (",
                     absl::StrJoin(NonEmpty(c.geometry.seq_lens), ", "),
                     "): what a function computes from them is its own"));
  }
  const size_t n = calls->calls.size();
  engine->predicted = absl::StrCat(n, " call", n == 1 ? "" : "s",
                                   " of the function whose arguments say the ground truth: the "
                                   "reference's output");
  return absl::OkStatus();
}

}  // namespace

void CaseRunner::ExecuteWholeCall(const Backend& backend, AttentionCall call, Outcome* outcome) {
  auto unsupported = [outcome](absl::Status why) {
    outcome->unsupported = std::move(why);
    outcome->observed = Observed::kUnsupported;
  };
  auto not_made = [outcome](absl::Status why) {
    const std::optional<Fault> fault = FaultOf(why);
    outcome->mismatches.push_back(
        fault.has_value() ? DescribeFault(*fault)
                          : absl::StrCat("the call could not be made: ", why.message()));
    outcome->error = std::move(why);
    outcome->error_stage = "backend";
    outcome->observed = Observed::kError;
  };
  if (case_.mode != Mode::kFaithful) {
    return unsupported(absl::UnimplementedError(
        "a hardened case does not apply to a call-level backend: an engine's own code has one "
        "mode, its own, which faithful mode predicts"));
  }
  if (absl::Status available = backend.Available(); !available.ok()) return unsupported(available);
  if (absl::Status supported = SupportsProfile(backend, case_.call.profile); !supported.ok()) {
    return unsupported(supported);
  }
  if (!forward_) {
    return unsupported(absl::UnimplementedError(
        absl::StrCat("a call-level backend runs every call forward, and this case cannot: ",
                     oracle_device_.status().message())));
  }
  const Profile profile = case_.call.profile;
  call.version = EngineVersionOfBackend(backend, profile);

  // What faithful mode predicts: an error, or a launch whose exact output
  // matches the reference or not; for a function, the calls the engine
  // makes of it, which must say the ground truth.
  EngineCallOutcome& engine = outcome->engine.emplace();
  std::optional<absl::Status> predicted_error;
  bool predicted_match = false;
  if (CallsFunctions(profile)) {
    const absl::Status judged = PredictFunctionCalls(case_, call, ReferenceScale(), &engine);
    if (!judged.ok()) return unsupported(judged);
    predicted_match = true;
  } else if (outcome->resolution = ResolveTimed(call, profile);
             absl::IsUnimplemented(outcome->resolution->status)) {
    return unsupported(outcome->resolution->status);
  } else if (!outcome->resolution->status.ok()) {
    predicted_error = outcome->resolution->status;
  } else if (absl::StatusOr<KernelCall> kernel = BindForKernel(*outcome->resolution->args);
             !kernel.ok()) {
    if (PythonErrorKindOf(kernel.status()).has_value()) {
      predicted_error = kernel.status();
    } else if (absl::IsUnimplemented(kernel.status())) {
      return unsupported(kernel.status());
    } else {
      engine.predicted =
          absl::StrCat("a launch outside its buffers (", kernel.status().message(), ")");
    }
  } else {
    outcome->kernel = kernel->description();
    const VarlenAttentionParams params = kernel->params();
    if (absl::Status supported = backend.Supports(params); !supported.ok()) {
      if (FaultOf(supported).has_value()) return not_made(supported);
      return unsupported(supported);
    }
    if (!CheckKernelBounds(params).ok()) {
      engine.predicted = "a launch outside its buffers";
    } else {
      const Geometry& g = case_.geometry;
      const QkvTensors qkv = HeadsApart(case_, qkv_);
      const KernelCall truth =
          BindGroundTruth(FlattenBatch(qkv.q), FlattenBatch(qkv.k), FlattenBatch(qkv.v),
                          g.SequenceStarts(), g.seq_lens, ReferenceScale(), g.dtype, g.variant);
      const std::optional<LaunchShape> launch = kernel->Launch();
      engine.ground_truth_launch = launch.has_value() && launch == truth.Launch();
      predicted_match = engine.ground_truth_launch;
      if (!predicted_match && KernelMacs(params) <= static_cast<double>(options_.budget.macs)) {
        PoisonOutput(kernel->output());
        RunExactKernel(params);
        kernel->ApplyEpilogue();
        predicted_match =
            JudgeOutput(g, GetReference(), kernel->PackedOutput(), options_.tolerance).passed;
      }
      engine.predicted =
          absl::StrCat(engine.ground_truth_launch ? "the ground truth's launch"
                       : predicted_match ? "another launch than the ground truth's, with its output"
                                         : "a silent corruption",
                       ": ", outcome->kernel);
    }
  }
  if (predicted_error.has_value()) engine.predicted = FormatPythonError(*predicted_error);

  // The worker reads the case's files from its own working folder.
  Case sent = case_;
  if (sent.data.files.has_value()) sent.data.files = AbsoluteDataFiles(sent.data);
  call.case_json = CaseToJson(sent).dump();
  absl::StatusOr<EngineCallResult> result = [&] {
    ScopedPhase timed(Phase::kBackend);
    return backend.CallEngine(call, profile);
  }();
  if (!result.ok()) return not_made(result.status());
  engine.device_events = result->device_events;
  std::vector<std::string>& mismatches = outcome->mismatches;
  if (result->raised_type.has_value()) {
    const std::string raised =
        result->raised_message.empty()
            ? *result->raised_type
            : absl::StrCat(*result->raised_type, ": ", result->raised_message);
    engine.did = absl::StrCat("raised ", raised);
    const std::optional<PyErrorKind> kind = ParsePyErrorKind(*result->raised_type);
    outcome->error =
        kind.has_value() ? PythonError(*kind, result->raised_message) : absl::UnknownError(raised);
    outcome->error_stage = "engine";
    outcome->observed = Observed::kError;
    if (!predicted_error.has_value()) {
      mismatches.push_back(
          absl::StrCat("faithful mode predicts ", engine.predicted, "; forward raised ", raised));
    } else if (!SameRaised(FormatPythonError(*predicted_error), raised)) {
      mismatches.push_back(
          absl::StrCat("faithful mode predicts ", engine.predicted, "; forward raised ", raised));
    }
  } else if (!result->output.has_value()) {
    engine.did = "returned nothing";
    mismatches.push_back("forward returned neither an output nor raised");
  } else {
    const Tensor& out = *result->output;
    engine.did = absl::StrCat("returned ", ShapeToString(out.shape()), " ", DTypeName(out.dtype()));
    const Geometry& g = case_.geometry;
    const int64_t expected = g.total_tokens() * g.num_heads * g.head_dim_v;
    if (predicted_error.has_value()) {
      mismatches.push_back(absl::StrCat("faithful mode predicts ", engine.predicted,
                                        "; forward returned an output"));
    } else if (out.numel() != expected || out.dtype() != g.dtype || !out.is_contiguous()) {
      // Not an output of the ground truth: a corruption, which faithful mode
      // may have predicted (vLLM's FLASHINFER returns a buffer shaped as q
      // whatever v's head size).
      outcome->observed = Observed::kCorruption;
      if (predicted_match) {
        mismatches.push_back(absl::StrCat("faithful mode predicts ", engine.predicted,
                                          "; forward returned ", ShapeToString(out.shape()), " ",
                                          DTypeName(out.dtype()), ", expected ", g.total_tokens(),
                                          " x ", g.num_heads, " x ", g.head_dim_v, " elements of ",
                                          DTypeName(g.dtype), ", the inputs' dtype"));
      }
    } else {
      const Tensor packed = out.Reshape({g.total_tokens(), g.num_heads, g.head_dim_v});
      outcome->numerics = JudgeOutput(g, GetReference(), packed, options_.tolerance);
      // The engine allocated this output: no sentinel tells which padding
      // rows it left as they were.
      outcome->numerics->padding_elements = outcome->numerics->padding_unwritten = 0;
      if (options_.keep_output) outcome->output = packed;
      outcome->observed = outcome->numerics->passed ? Observed::kSuccess : Observed::kCorruption;
      if (predicted_match && !outcome->numerics->passed) {
        mismatches.push_back(absl::StrCat("faithful mode predicts ", engine.predicted,
                                          ", whose output matches the reference; forward's "
                                          "does not"));
      }
    }
  }
  if (engine.device_events.has_value() && outcome->resolution.has_value()) {
    const int predicted = outcome->resolution->counts().host_syncs;
    if (engine.device_events->host_syncs != predicted) {
      mismatches.push_back(absl::StrCat("faithful mode predicts ", predicted,
                                        " host syncs; forward made ",
                                        engine.device_events->host_syncs));
    }
  }
}

Outcome RunCase(const Case& c, const Backend& backend, RunOptions options) {
  CaseRunner runner(c, options);
  return runner.Run(backend);
}

}  // namespace varlen
