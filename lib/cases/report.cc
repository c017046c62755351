#include "varlen/cases/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/backend/fault.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/engine_calls.h"

namespace varlen {
namespace {

using ojson = nlohmann::ordered_json;

// "1 host sync" / "2 host syncs".
std::string Count(int n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

std::string CountsText(const DeviceEventCounts& c) {
  return absl::StrCat(
      Count(c.host_syncs, "host sync", "host syncs"), ", ",
      Count(c.host_to_device_copies, "host-to-device copy", "host-to-device copies"), ", ",
      Count(c.device_to_host_copies, "device-to-host copy", "device-to-host copies"), ", ",
      Count(c.casts, "cast", "casts"));
}

std::string ArgText(const ArgLiteral& a) {
  if (a.kind == ArgLiteral::Kind::kTensor) {
    const TensorLiteral& t = a.tensor;
    std::vector<std::string> values;
    const size_t n = IsFloatingPoint(t.dtype) ? t.floats.size() : t.ints.size();
    for (size_t i = 0; i < n; ++i) {
      if (n > 12 && i == 6) {
        values.push_back("...");
        i = n - 6;
      }
      values.push_back(IsFloatingPoint(t.dtype) ? absl::StrCat(t.floats[i])
                                                : absl::StrCat(t.ints[i]));
    }
    std::string text = absl::StrCat("tensor([", absl::StrJoin(values, ", "), "]");
    if (t.shape.has_value()) absl::StrAppend(&text, ", shape=", ShapeToString(*t.shape));
    absl::StrAppend(&text, ", dtype=", DTypeName(t.dtype), ", device=", DeviceName(t.device), ")");
    return text;
  }
  if (a.kind == ArgLiteral::Kind::kList) {
    std::vector<std::string> items;
    for (const ArgLiteral& item : a.list) items.push_back(ArgText(item));
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  if (a.kind == ArgLiteral::Kind::kSingletonCache) {
    return a.cache_has_data
               ? absl::StrCat("SingletonCache(data=", ArgText(ArgLiteral::Tensor(a.tensor)), ")")
               : "SingletonCache(data=None)";
  }
  if (a.kind == ArgLiteral::Kind::kEmptyLikeQ) return "torch.empty_like(q)";
  if (a.kind == ArgLiteral::Kind::kNone) return "None";
  if (a.kind == ArgLiteral::Kind::kBool) return a.b ? "True" : "False";
  if (a.kind == ArgLiteral::Kind::kStr) return PyStrRepr(a.s);
  if (a.kind == ArgLiteral::Kind::kFloat) return PyFloatRepr(a.f);
  return ArgLiteralToJson(a).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string MetadataText(const MetadataSpec& m) {
  if (m.builder == MetadataSpec::Builder::kFlashinferCudnn) {
    return absl::StrCat("prepare_flashinfer_cudnn_vision_attention_metadata(",
                        ArgText(m.cu_seqlens), ", elem_per_token=", m.elem_per_token, ")");
  }
  std::vector<std::string> parts = {ArgText(m.cu_seqlens)};
  auto add = [&parts](const char* name, const ArgLiteral& v) {
    if (v.kind != ArgLiteral::Kind::kNone) parts.push_back(absl::StrCat(name, "=", ArgText(v)));
  };
  if (m.builder == MetadataSpec::Builder::kManual) add("seq_lens", m.seq_lens);
  add("max_seqlen", m.max_seqlen);
  add("packed_indptrs", m.packed_indptrs);
  add("sequence_lengths", m.sequence_lengths);
  add("flashinfer_max_seqlen", m.flashinfer_max_seqlen);
  return absl::StrCat(m.builder == MetadataSpec::Builder::kManual
                          ? "VisionAttentionMetadata("
                          : "prepare_vision_attention_metadata(",
                      absl::StrJoin(parts, ", "), ")");
}

std::string ObservedText(const Outcome& o) {
  switch (o.observed) {
    case Observed::kError:
      if (const std::optional<Fault> fault = FaultOf(o.error)) {
        return absl::StrCat("fault in the backend, ", FaultKindName(fault->kind));
      }
      return absl::StrCat("error raised by the ", o.error_stage);
    case Observed::kSuccess:
      return o.resolution_only_reason.empty()
                 ? "success: the output matches the reference"
                 : absl::StrCat("success (", o.resolution_only_reason, ")");
    case Observed::kCorruption:
      return !o.kernel_fault.ok() ? absl::StrCat("silent corruption: ", o.kernel_fault.message())
                                  : "silent corruption: the output does not match the reference";
    case Observed::kUnsupported:
      return absl::StrCat("unsupported: ", o.unsupported.message());
  }
  return "?";
}

std::string ExpectationText(const Expectation& e) {
  std::string text(ExpectedOutcomeName(e.outcome));
  if (e.outcome == Expectation::Outcome::kError) {
    text = FormatPythonError(PythonError(e.error_kind, e.message));
  }
  if (e.host_syncs.has_value()) absl::StrAppend(&text, "; ", *e.host_syncs, " host syncs");
  if (!e.resolved.is_null()) absl::StrAppend(&text, "; resolved ", e.resolved.dump());
  return text;
}

}  // namespace

ojson ValueToJson(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kNone:
      return nullptr;
    case Value::Kind::kBool:
      return value.as_bool();
    case Value::Kind::kInt:
      return value.as_int();
    case Value::Kind::kFloat:
      return ArgLiteralToJson(ArgLiteral::Float(value.as_float()));
    case Value::Kind::kStr:
      return value.as_str();
    case Value::Kind::kTensor:
      return TensorToJson(value.as_tensor());
    case Value::Kind::kList: {
      ojson list = ojson::array();
      for (const Value& item : value.as_list()) list.push_back(ValueToJson(item));
      return list;
    }
    case Value::Kind::kSingletonCache: {
      const SingletonCache& cache = *value.as_cache();
      return {
          {"singleton_cache", cache.data.has_value() ? TensorToJson(*cache.data) : ojson(nullptr)}};
    }
  }
  return nullptr;
}

namespace {

ojson ProfileArgsToJson(const ResolvedArgs& resolved) {
  if (const auto* a = std::get_if<FlashinferCudnnArgs>(&resolved.args)) {
    ojson j = {{"profile", std::string(ProfileName(resolved.profile))},
               {"actual_seq_lens", TensorToJson(a->actual_seq_lens)},
               {"batch_offsets_qk", TensorToJson(a->batch_offsets_qk)},
               {"batch_offsets_v", TensorToJson(a->batch_offsets_v)},
               {"batch_offsets_o", TensorToJson(a->batch_offsets_o)},
               {"max_token_per_sequence", a->max_token_per_sequence},
               {"max_sequence_kv", a->max_sequence_kv},
               {"scale", a->scale},
               {"output_4d", a->output_4d}};
    if (a->inputs_as_strided) j["inputs_as_strided"] = true;
    return j;
  }
  if (const auto* a = std::get_if<FlashVarlenArgs>(&resolved.args)) {
    ojson j = {{"profile", std::string(ProfileName(resolved.profile))},
               {"kernel", std::string(a->kernel)},
               {"cu_seqlens", ValueToJson(a->cu_seqlens)},
               {"max_seqlen", ValueToJson(a->max_seqlen)},
               {"scale", a->scale}};
    if (a->fa_version != 0) j["fa_version"] = a->fa_version;
    if (a->variant.windowed()) j["window"] = {a->variant.window_left, a->variant.window_right};
    if (!a->variant.sinks.empty()) j["sinks"] = a->variant.sinks;
    return j;
  }
  if (const auto* a = std::get_if<TritonArgs>(&resolved.args)) {
    // vLLM hands the kernel start offsets (cu_seqlens[:-1]) and lengths:
    // named as context_attention_fwd names them. SGLang hands it the whole
    // cu_seqlens as b_start_loc.
    const bool vllm = resolved.profile == Profile::kVllmTritonAttn;
    return {{"profile", std::string(ProfileName(resolved.profile))},
            {vllm ? "b_start_loc" : "cu_seqlens", ValueToJson(a->cu_seqlens)},
            {vllm ? "b_seq_len" : "seq_lens", ValueToJson(a->seq_lens)},
            {vllm ? "max_input_len" : "max_seqlen", ValueToJson(a->max_seqlen)},
            {"output_from_workspace", a->output_from_workspace},
            {"scale", a->scale}};
  }
  if (const auto* a = std::get_if<AscendArgs>(&resolved.args)) {
    return {{"profile", std::string(ProfileName(resolved.profile))},
            {"actual_seq_lengths", a->actual_seq_lengths},
            {"row_starts", a->row_starts},
            {"padded", a->padded},
            {"output_from_workspace", a->output_from_workspace},
            {"scale", a->scale}};
  }
  const SdpaArgs& a = std::get<SdpaArgs>(resolved.args);
  const char* mask = a.mask == SdpaArgs::Mask::kBlockDiagonal ? "block_diagonal"
                     : a.mask == SdpaArgs::Mask::kPadding     ? "padding"
                                                              : "none";
  ojson j = {{"profile", std::string(ProfileName(resolved.profile))},
             {"mask", mask},
             {"cu_seqlens", a.cu_seqlens},
             {"bsz", a.bsz},
             {"tokens_per_item", a.tokens_per_item}};
  if (a.mask == SdpaArgs::Mask::kBlockDiagonal) j["blocks"] = a.blocks;
  if (a.mask == SdpaArgs::Mask::kPadding) j["kept"] = a.kept;
  j["scale"] = a.scale;
  j["single_precision"] = a.single_precision;
  if (a.causal) j["causal"] = true;
  return j;
}

}  // namespace

namespace {

// For a person reading text: an array of thousands of offsets (a tensor
// passed where a short one belongs) keeps its first and last entries.
ojson Abridged(const ojson& j) {
  constexpr size_t kKept = 8;
  if (j.is_object()) {
    ojson out = ojson::object();
    for (const auto& [key, value] : j.items()) out[key] = Abridged(value);
    return out;
  }
  if (!j.is_array()) return j;
  ojson out = ojson::array();
  if (j.size() <= 4 * kKept) {
    for (const ojson& item : j) out.push_back(Abridged(item));
    return out;
  }
  for (size_t i = 0; i < kKept; ++i) out.push_back(Abridged(j[i]));
  out.push_back(absl::StrCat("... ", j.size() - 2 * kKept, " more ..."));
  for (size_t i = j.size() - kKept; i < j.size(); ++i) out.push_back(Abridged(j[i]));
  return out;
}

}  // namespace

ojson ResolvedArgsToJson(const ResolvedArgs& resolved) {
  ojson j = ProfileArgsToJson(resolved);
  // The layout the backend receives: dense, or strided views of one buffer.
  if (resolved.q.defined()) {
    j["qkv_strides"] = {resolved.q.strides(), resolved.k.strides(), resolved.v.strides()};
  }
  return j;
}

std::string DescribeCall(const CallSpec& call) {
  std::vector<std::string> parts;
  if (call.vllm_metadata.has_value()) {
    const VllmMetadataSpec& m = *call.vllm_metadata;
    parts.push_back(absl::StrCat(
        "the encoder metadata builders' keywords from ", ArgText(m.cu_seqlens), " (tp_size ",
        m.tp_size, m.hidden_size.has_value() ? absl::StrCat(", hidden_size ", *m.hidden_size) : "",
        m.fp8_padded_hidden_size.has_value()
            ? absl::StrCat(", fp8_padded_hidden_size ", *m.fp8_padded_hidden_size)
            : "",
        ")"));
  } else if (call.entry != Entry::kTower) {  // the tower takes its keywords alone
    parts.push_back(absl::StrCat("cu_seqlens=", ArgText(call.cu_seqlens)));
  }
  if (CallsOf(EngineOf(call.profile)).takes_forward_metadata || call.forward_metadata.has_value()) {
    parts.push_back(absl::StrCat("forward_metadata=", call.forward_metadata.has_value()
                                                          ? MetadataText(*call.forward_metadata)
                                                          : "None"));
  }
  for (const auto& [key, value] : call.kwargs)
    parts.push_back(absl::StrCat(key, "=", ArgText(value)));
  if (call.bsz.has_value()) parts.push_back(absl::StrCat("bsz=", *call.bsz));
  if (call.seq_len.has_value()) parts.push_back(absl::StrCat("seq_len=", *call.seq_len));
  return absl::StrJoin(parts, ", ");
}

namespace {

// Where q, k and v's values come from.
std::string DataText(const DataSpec& data) {
  if (!data.files.has_value()) {
    return absl::StrCat("seed ", data.seed, ", ", DistributionName(data.distribution), " values");
  }
  return absl::StrCat("q, k, v from ", data.files->q, ", ", data.files->k, ", ", data.files->v,
                      data.file_values == nullptr ? " (not read)" : "");
}

ojson DataToJson(const DataSpec& data) {
  if (!data.files.has_value()) {
    return {{"seed", data.seed}, {"distribution", DistributionName(data.distribution)}};
  }
  return {{"files", {{"q", data.files->q}, {"k", data.files->k}, {"v", data.files->v}}},
          {"read", data.file_values != nullptr}};
}

}  // namespace

std::string FormatOutcomeText(const Case& c, const std::string& origin, const Outcome& o) {
  std::string text = absl::StrCat("case ", c.name, "  (", origin, ")\n");
  absl::StrAppend(&text, "  source:     ", c.source, "\n");
  if (!c.description.empty()) absl::StrAppend(&text, "  about:      ", c.description, "\n");
  absl::StrAppend(
      &text, "  call:       ", ProfileName(c.call.profile), " ", ModeName(c.mode),
      c.mode == Mode::kFaithful ? absl::StrCat(" (", c.engine_version().DisplayName(), ")")
                                : " (version-independent)",
      ", ", EntryName(c.call.entry), c.call.graph_mode ? ", cuda-graph mode" : "",
      c.call.layout == QLayout::kPacked ? ""
                                        : absl::StrCat(", layout ", QLayoutName(c.call.layout)),
      c.call.rotary ? ", rotary" : "",
      c.call.windows.has_value()
          ? absl::StrCat(", windows (window_size ", c.call.windows->window_size, ", patch_size ",
                         c.call.windows->patch_size, ", spatial_merge_size ",
                         c.call.windows->spatial_merge_size, ")")
          : "",
      ", backend ", o.backend, "\n");
  absl::StrAppend(
      &text, "  geometry:   seq_lens ",
      c.geometry.seq_lens.size() > 16
          ? absl::StrCat(c.geometry.seq_lens.size(), " sequences, ", c.geometry.total_tokens(),
                         " tokens")
          : absl::StrCat("[", absl::StrJoin(c.geometry.seq_lens, ", "), "]"),
      ", heads ", c.geometry.num_heads, "/", c.geometry.num_kv_heads, ", head_dim ",
      c.geometry.head_dim, "/", c.geometry.head_dim_v, ", ", DTypeName(c.geometry.dtype),
      c.geometry.variant.full() ? "" : absl::StrCat(", ", c.geometry.variant.Describe()),
      c.geometry.padding.empty()
          ? ""
          : absl::StrCat(", padding rows [", absl::StrJoin(c.geometry.padding, ", "),
                         "] (before, between and after the sequences)"),
      "\n");
  absl::StrAppend(&text, "  data:       ", DataText(c.data), "\n");
  if (c.platform.has_value()) {
    absl::StrAppend(&text, "  platform:   ", PlatformName(*c.platform), "\n");
  }
  absl::StrAppend(&text, "  passed:     ", DescribeCall(c.call), "\n");
  if (!o.warmups.empty()) {
    absl::StrAppend(&text,
                    "  warmup:     ", Count(static_cast<int>(o.warmups.size()), "call", "calls"),
                    " first, on the same backend (not judged)\n");
  }
  for (size_t i = 0; i < o.warmups.size(); ++i) {
    const Outcome& w = o.warmups[i];
    absl::StrAppend(&text, "    [", i, "] ",
                    i < c.warmup.size() ? Abridged(c.warmup[i].patch).dump() : "?", ": ",
                    VerdictName(w.verdict), ", ", ObservedText(w), "\n");
    if (w.observed == Observed::kError) {
      absl::StrAppend(&text, "        ", FormatPythonError(w.error), "\n");
    }
  }
  if (!o.builder_events.empty()) {
    absl::StrAppend(&text, "  builder:    ", CountsText(CountDeviceEvents(o.builder_events)), "\n");
  }
  if (o.resolution.has_value()) {
    for (const std::string& note : o.resolution->notes)
      absl::StrAppend(&text, "  resolution: ", note, "\n");
    if (!o.resolution->unread_keywords.empty()) {
      absl::StrAppend(&text, "  unread:     ", absl::StrJoin(o.resolution->unread_keywords, ", "),
                      " (passed, never read: they change nothing)\n");
    }
    absl::StrAppend(&text, "  device:     ", CountsText(o.resolution->counts()), "\n");
    for (const DeviceEvent& e : o.resolution->events) {
      absl::StrAppend(&text, "              ", DeviceEventKindName(e.kind), ": ", e.what, "\n");
    }
    if (o.resolution->args.has_value()) {
      absl::StrAppend(
          &text, "  resolved:   ", Abridged(ResolvedArgsToJson(*o.resolution->args)).dump(), "\n");
    }
  }
  if (!o.kernel.empty()) absl::StrAppend(&text, "  kernel:     ", o.kernel, "\n");
  if (o.engine.has_value()) {
    absl::StrAppend(&text, "  predicted:  ", o.engine->predicted, " (faithful mode, ",
                    c.engine_version().DisplayName(), ")\n");
    if (!o.engine->did.empty())
      absl::StrAppend(&text, "  engine:     forward ", o.engine->did, "\n");
    if (o.engine->device_events.has_value()) {
      absl::StrAppend(&text, "  observed:   ", CountsText(*o.engine->device_events), "\n");
    }
  }
  if (o.numerics.has_value())
    absl::StrAppend(&text, "  numerics:   ", SummarizeNumerics(*o.numerics), "\n");
  absl::StrAppend(&text, "  outcome:    ", ObservedText(o), "\n");
  if (o.observed == Observed::kError && !FaultOf(o.error).has_value()) {
    absl::StrAppend(&text, FormatPythonError(o.error), "\n");
  }
  if (c.expect.has_value() && !o.engine.has_value())  // a call-level run is judged by `predicted`
    absl::StrAppend(&text, "  expected:   ", ExpectationText(*c.expect), "\n");
  absl::StrAppend(&text, "  verdict:    ", VerdictName(o.verdict), "\n");
  for (const std::string& m : o.mismatches) absl::StrAppend(&text, "    - ", m, "\n");
  return text;
}

namespace {

ojson CountsToJson(const DeviceEventCounts& counts) {
  return {{"host_syncs", counts.host_syncs},
          {"host_to_device_copies", counts.host_to_device_copies},
          {"device_to_host_copies", counts.device_to_host_copies},
          {"casts", counts.casts}};
}

// Each event with what made it (the text report's indented lines).
ojson EventsToJson(const std::vector<DeviceEvent>& events) {
  ojson out = ojson::array();
  for (const DeviceEvent& e : events) {
    out.push_back({{"kind", DeviceEventKindName(e.kind)}, {"what", e.what}});
  }
  return out;
}

// A number, or the case format's spelling of infinity: JSON has none, and a
// sequence with an unwritten or wrongly (non-)finite element has no finite
// error to show.
ojson ErrorToJson(double error) { return std::isinf(error) ? ojson("inf") : ojson(error); }

}  // namespace

ojson OutcomeToJson(const Case& c, const std::string& origin, const Outcome& o) {
  ojson j = {{"schema", kOutcomeJsonSchema},
             {"case", c.name},
             {"file", origin},
             {"source", c.source},
             {"description", c.description},
             {"backend", o.backend},
             {"mode", ModeName(c.mode)},
             {"engine", EngineName(c.engine())},
             {EngineName(c.engine()), c.engine_version().name()},
             {"profile", ProfileName(c.call.profile)},
             {"call",
              {{"entry", EntryName(c.call.entry)},
               {"graph_mode", c.call.graph_mode},
               {"layout", QLayoutName(c.call.layout)},
               {"rotary", c.call.rotary},
               {"passed", DescribeCall(c.call)}}},
             {"geometry",
              {{"seq_lens", c.geometry.seq_lens},
               {"num_heads", c.geometry.num_heads},
               {"num_kv_heads", c.geometry.num_kv_heads},
               {"head_dim", c.geometry.head_dim},
               {"head_dim_v", c.geometry.head_dim_v},
               {"dtype", DTypeName(c.geometry.dtype)},
               {"window", {c.geometry.variant.window_left, c.geometry.variant.window_right}},
               {"sinks", c.geometry.variant.sinks},
               {"padding", c.geometry.padding}}},
             {"data", DataToJson(c.data)},
             {"observed", ObservedName(o.observed)},
             {"outcome", ObservedText(o)},
             {"verdict", VerdictName(o.verdict)},
             {"mismatches", o.mismatches}};
  if (c.platform.has_value()) j["platform"] = PlatformName(*c.platform);
  if (c.call.windows.has_value()) {
    j["call"]["windows"] = {{"window_size", c.call.windows->window_size},
                            {"patch_size", c.call.windows->patch_size},
                            {"spatial_merge_size", c.call.windows->spatial_merge_size}};
  }
  if (c.expect.has_value() && !o.engine.has_value()) j["expected"] = ExpectationText(*c.expect);
  if (o.observed == Observed::kError) {
    j["error"] = {{"stage", o.error_stage}, {"text", FormatPythonError(o.error)}};
  }
  if (const std::optional<Fault> fault = FaultOf(o.error)) {
    j["fault"] = {{"kind", FaultKindName(fault->kind)},
                  {"summary", fault->summary},
                  {"log_tail", fault->log_tail}};
  }
  if (!o.resolution_only_reason.empty()) j["resolution_only"] = o.resolution_only_reason;
  if (o.observed == Observed::kUnsupported) j["unsupported"] = std::string(o.unsupported.message());
  if (!o.kernel_fault.ok()) j["kernel_fault"] = std::string(o.kernel_fault.message());
  if (!o.kernel.empty()) j["kernel"] = o.kernel;
  if (o.engine.has_value()) {
    j["engine_call"] = {{"predicted", o.engine->predicted},
                        {"judged_against", c.engine_version().DisplayName()},
                        {"ground_truth_launch", o.engine->ground_truth_launch},
                        {"forward", o.engine->did}};
    if (o.engine->device_events.has_value()) {
      j["engine_call"]["observed_device_events"] = CountsToJson(*o.engine->device_events);
    }
  }
  if (!o.builder_events.empty()) {
    j["builder_device_events"] = CountsToJson(CountDeviceEvents(o.builder_events));
    j["builder_device_events"]["events"] = EventsToJson(o.builder_events);
  }
  if (o.resolution.has_value()) {
    j["device_events"] = CountsToJson(o.resolution->counts());
    j["device_events"]["events"] = EventsToJson(o.resolution->events);
    j["notes"] = o.resolution->notes;
    j["unread_keywords"] = o.resolution->unread_keywords;
    if (o.resolution->args.has_value()) j["resolved"] = ResolvedArgsToJson(*o.resolution->args);
  }
  if (!o.warmups.empty()) {
    ojson warmups = ojson::array();
    for (size_t i = 0; i < o.warmups.size(); ++i) {
      const Outcome& w = o.warmups[i];
      ojson entry = {{"patch", i < c.warmup.size() ? c.warmup[i].patch : ojson(nullptr)},
                     {"observed", ObservedName(w.observed)},
                     {"verdict", VerdictName(w.verdict)},
                     {"summary", ObservedText(w)}};
      if (w.observed == Observed::kError) entry["error"] = FormatPythonError(w.error);
      warmups.push_back(std::move(entry));
    }
    j["warmup"] = std::move(warmups);
  }
  if (o.numerics.has_value()) {
    const NumericReport& n = *o.numerics;
    ojson per_sequence = ojson::array();
    for (size_t s = 0; s < n.per_sequence_max_error.size(); ++s) {
      double worst = n.per_sequence_max_error[s];
      for (int64_t h = 0; h < n.heads; ++h) {
        const size_t cell = s * static_cast<size_t>(n.heads) + static_cast<size_t>(h);
        if (cell < n.per_sequence_head_max_error.size()) {
          worst = std::max(worst, n.per_sequence_head_max_error[cell]);
        }
      }
      per_sequence.push_back(ErrorToJson(worst));
    }
    j["numerics"] = {{"passed", n.passed},
                     {"summary", SummarizeNumerics(n)},
                     {"elements", n.elements},
                     {"max_abs_error", n.max_abs_error},
                     {"max_rel_error", n.max_rel_error},
                     {"bound", n.bound},
                     {"emulation_error", n.emulation_error},
                     {"logit_rounding", n.logit_rounding},
                     {"noise_floor", n.noise_floor},
                     {"tolerance_factor", n.tolerance_factor},
                     {"unwritten", n.unwritten},
                     {"non_finite", n.non_finite},
                     {"lost_non_finite", n.lost_non_finite},
                     {"padding_elements", n.padding_elements},
                     {"padding_unwritten", n.padding_unwritten},
                     {"worst",
                      {{"sequence", n.worst.sequence},
                       {"row", n.worst.row},
                       {"head", n.worst.head},
                       {"dim", n.worst.dim},
                       {"expected", n.worst.expected},
                       {"actual", n.worst.actual}}},
                     {"per_sequence_max_error", per_sequence}};
  }
  return j;
}

namespace {

// What a version comparison looks at: the outcome, the error, the resolved
// arguments and what resolution made the device do.
ojson ComparableOutcome(const Outcome& o) {
  ojson j = {{"observed", ObservedName(o.observed)}};
  if (o.observed == Observed::kError) j["error"] = FormatPythonError(o.error);
  if (o.resolution.has_value()) {
    const DeviceEventCounts counts = o.resolution->counts();
    j["host_syncs"] = counts.host_syncs;
    j["host_to_device_copies"] = counts.host_to_device_copies;
    j["device_to_host_copies"] = counts.device_to_host_copies;
    j["casts"] = counts.casts;
    if (o.resolution->args.has_value()) {
      const ojson resolved = ResolvedArgsToJson(*o.resolution->args);
      for (const auto& [key, value] : resolved.items()) j[absl::StrCat("resolved.", key)] = value;
    }
  }
  return j;
}

bool Succeeded(const Outcome& o) { return o.observed == Observed::kSuccess; }

std::vector<std::string> DifferingFields(const Outcome& before, const Outcome& after) {
  std::vector<std::string> fields;
  const ojson a = ComparableOutcome(before), b = ComparableOutcome(after);
  for (const auto& [key, value] : b.items()) {
    const auto old = a.find(key);
    const ojson old_value = old == a.end() ? ojson() : *old;
    if (old_value != value) {
      fields.push_back(absl::StrCat(key, ": ", old_value.dump(), " -> ", value.dump()));
    }
  }
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key)) {
      fields.push_back(absl::StrCat(key, ": ", value.dump(), " -> absent"));
    }
  }
  return fields;
}

const char* OutcomeVerb(const Outcome& o) {
  switch (o.observed) {
    case Observed::kSuccess:
      return "succeeds";
    case Observed::kError:
      return "raises";
    case Observed::kCorruption:
      return "gives a wrong output";
    case Observed::kUnsupported:
      return "is not modelled or not supported";
  }
  return "?";
}

// "outcome, error, resolved arguments and device events", and which side
// ran for resolution only, with its reason.
std::string Compared(const Outcome& a, absl::string_view a_name, const Outcome& b,
                     absl::string_view b_name) {
  std::string text = "outcome, error, resolved arguments and device events";
  for (const auto& [o, name] : {std::pair{&a, a_name}, std::pair{&b, b_name}}) {
    if (o->resolution_only_reason.empty()) continue;
    absl::StrAppend(&text, "; ", name, " ran for resolution only (", o->resolution_only_reason,
                    "): no output judged there");
  }
  return text;
}

}  // namespace

VersionDifference CompareVersions(const Outcome& before, EngineVersion before_version,
                                  const Outcome& after, EngineVersion after_version) {
  VersionDifference difference;
  difference.fields = DifferingFields(before, after);
  if (difference.fields.empty()) return difference;
  const std::string version(after_version.name());
  difference.compared = Compared(before, before_version.name(), after, version);
  // A side without a forward run has no output to judge: its "success" may
  // hide a corruption, so no fix or regression is claimed across it.
  const bool judged_both =
      before.resolution_only_reason.empty() && after.resolution_only_reason.empty();
  difference.summary = judged_both && !Succeeded(before) && Succeeded(after) ? "fixed in " + version
                       : judged_both && Succeeded(before) && !Succeeded(after)
                           ? "new in " + version
                           : "changed in " + version;
  return difference;
}

VersionDifference CompareEngines(const Case& a, const Outcome& in_a, const Case& b,
                                 const Outcome& in_b) {
  VersionDifference difference;
  difference.fields = DifferingFields(in_a, in_b);
  if (difference.fields.empty()) return difference;
  const auto said = [](const Case& c, const Outcome& o) {
    std::string text = absl::StrCat(QualifiedProfileName(c.call.profile), " ", OutcomeVerb(o));
    if (o.observed == Observed::kError) absl::StrAppend(&text, " ", FormatPythonError(o.error));
    return text;
  };
  difference.summary = absl::StrCat(said(a, in_a), "; ", said(b, in_b));
  difference.compared = Compared(in_a, QualifiedProfileName(a.call.profile), in_b,
                                 QualifiedProfileName(b.call.profile));
  return difference;
}

}  // namespace varlen
