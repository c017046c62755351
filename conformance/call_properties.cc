// The properties of the whole call, contract included: every well-formed
// way of passing one geometry gives the same kernel arguments and the same
// bits in both modes (ArgumentForms), prepared metadata resolves without a
// host sync (GraphSafety), and hardened mode lets no corrupted argument
// through to a wrong output (NoSilentCorruption). They run through the
// executor, with the backend's own resolution (Backend::ResolveCall).

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine_generators.h"
#include "properties.h"
#include "property_support.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/report.h"
#include "varlen/conformance/generators.h"

namespace varlen::internal {
namespace {

// Sequences longer than this make a case long (GenLongForwardCase's).
constexpr int64_t kLongFormsFrom = 512;

// The executor's outcome for `c` with `call` in `mode`, the output kept.
// Every spelling of one geometry has the same reference: `reference` holds
// it once a run has computed it.
Outcome RunForm(const Backend& backend, Case c, const CallSpec& call, Mode mode,
                std::shared_ptr<const Reference>* reference) {
  c.call = call;
  c.mode = mode;
  RunOptions options;
  options.keep_output = true;
  options.reference = *reference;
  CaseRunner runner(std::move(c), options);
  Outcome outcome = runner.Run(backend);
  if (*reference == nullptr) *reference = runner.computed_reference();
  return outcome;
}

}  // namespace

std::string CheckArgumentForms(const Backend& backend, const Case& generated, PropertyRun* run) {
  Case c = generated;
  c.call.layout = QLayout::kPacked;
  const std::vector<CallForm> forms = GeneratorsOf(c.engine()).well_formed_forms(c);
  if (forms.size() < 2) return "";
  // A few forms per case, the default spelling first to compare against;
  // one for a long case, where each costs a long forward run.
  std::vector<size_t> chosen = {0};
  const int others = c.geometry.longest() > kLongFormsFrom ? 1 : 3;
  for (int i = 0; i < others; ++i) chosen.push_back(*rc::gen::inRange<size_t>(1, forms.size()));
  std::optional<Outcome> first;
  std::string first_label;
  std::shared_ptr<const Reference> reference;
  // An engine's own backend class has one mode, which faithful mode models.
  const std::vector<Mode> modes = backend.call_level()
                                      ? std::vector<Mode>{Mode::kFaithful}
                                      : std::vector<Mode>{Mode::kHardened, Mode::kFaithful};
  for (const size_t index : chosen) {
    const CallForm& form = forms[index];
    for (const Mode mode : modes) {
      const std::string label = absl::StrCat(form.label, " (", ModeName(mode), ")");
      const Outcome outcome = RunForm(backend, c, form.call, mode, &reference);
      run->fault = FaultOf(outcome.error);
      if (outcome.verdict == Verdict::kUnsupported) {
        if (!first.has_value()) ++run->unsupported;
        return "";
      }
      Case shown = c;
      shown.call = form.call;
      shown.mode = mode;
      if (outcome.verdict == Verdict::kFail) {
        run->replay = shown;
        return absl::StrCat("a well-formed call failed: ", label, "\n",
                            FormatOutcomeText(shown, "generated", outcome));
      }
      if (!first.has_value()) {
        first = outcome;
        first_label = label;
        continue;
      }
      if (outcome.kernel != first->kernel) {
        return absl::StrCat(label, " asked the kernel for \"", outcome.kernel, "\", ", first_label,
                            " for \"", first->kernel, "\"; geometry ", GeometryJson(c));
      }
      if (outcome.output.has_value() && first->output.has_value() &&
          !SameBits(*outcome.output, 0, *first->output, 0, c.geometry.total_tokens())) {
        return absl::StrCat(label, " gives other output bits than ", first_label,
                            ": one geometry, two spellings of its arguments; geometry ",
                            GeometryJson(c));
      }
    }
  }
  return "";
}

std::string CheckGraphSafety(const Backend& backend, const Case& generated, PropertyRun* run) {
  Case c = generated;
  c.call.layout = QLayout::kPacked;
  const Profile profile = c.call.profile;
  // sdpa builds its mask on the host, ascend_attn its list of ends, by
  // design; amx_attn runs on the CPU; vLLM's TORCH_SDPA splits by
  // cu_seqlens.tolist() (vllm-project/vllm#55882).
  // transformers' split path (sdpa, eager) reads the lengths three times
  // per layer, by design too.
  if (profile == Profile::kSdpa || profile == Profile::kAscendAttn ||
      profile == Profile::kAmxAttn || profile == Profile::kVllmTorchSdpa ||
      (c.engine() == Engine::kTransformers && !IsTransformersFlash(profile))) {
    return "";
  }
  SetCorrectCall(&c, profile, /*prepared=*/true, c.call.entry);
  // SGLang's flashinfer_cudnn path reads a device bool for its bounds check
  // even with prepared metadata (contract: host syncs), and xpu_attn ignores
  // the metadata since 0.5.18 and derives max_seqlen from cu_seqlens on the
  // host; hardened mode must not.
  std::vector<Mode> modes = {Mode::kHardened};
  // An engine's own code has faithful mode's only. Hardened vLLM validates
  // the builders' device tensors on the host: their offsets are not yet
  // stamped as SGLang's hardened builders stamp theirs; hardened
  // transformers validates the tower's cu_seqlens on the host, which no
  // builder stamps.
  if (backend.call_level() || c.engine() != Engine::kSglang) modes.clear();
  const bool sglang_syncs =
      profile == Profile::kFlashinferCudnn ||
      (profile == Profile::kXpuAttn && !BehaviorOf(c.engine_version().sglang()).xpu_reads_metadata);
  if (!sglang_syncs) modes.push_back(Mode::kFaithful);
  std::shared_ptr<const Reference> reference;
  for (const Mode mode : modes) {
    c.mode = mode;
    const Outcome outcome = RunForm(backend, c, c.call, mode, &reference);
    run->fault = FaultOf(outcome.error);
    if (outcome.verdict == Verdict::kUnsupported) {
      ++run->unsupported;
      return "";
    }
    if (outcome.verdict == Verdict::kFail) {
      run->replay = c;
      return absl::StrCat("a call with prepared metadata failed\n",
                          FormatOutcomeText(c, "generated", outcome));
    }
    // A call-level backend: what it was seen doing, where that can be seen.
    const std::optional<DeviceEventCounts> observed =
        outcome.engine.has_value() ? outcome.engine->device_events
                                   : std::optional(outcome.resolution->counts());
    if (!observed.has_value()) continue;
    const DeviceEventCounts& counts = *observed;
    if (counts.host_syncs != 0 || counts.host_to_device_copies != 0) {
      run->replay = c;
      run->replay->expect->host_syncs = 0;
      return absl::StrCat(ModeName(mode), " resolution of a call with prepared metadata made ",
                          counts.host_syncs, " host syncs and ", counts.host_to_device_copies,
                          " host-to-device copies: it cannot be captured in a CUDA graph\n",
                          FormatOutcomeText(c, "generated", outcome));
    }
  }
  return "";
}

std::string CheckNoSilentCorruption(const Backend& backend, const Case& generated,
                                    PropertyRun* run) {
  Case c = generated;
  c.call.layout = QLayout::kPacked;
  c.mode = Mode::kHardened;
  c.expect.reset();
  const Geometry& g = c.geometry;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const Profile profile = c.call.profile;
  // One realistic corruption of a correct call.
  std::vector<std::pair<std::string, CallSpec>> corrupted;
  auto corrupt = [&](std::string what, bool prepared, auto&& edit) {
    Case bad = c;
    SetCorrectCall(&bad, profile, prepared, c.call.entry);
    bad.call.entry = g.total_tokens() == 0 ? Entry::kDirect : bad.call.entry;
    edit(&bad.call);
    corrupted.emplace_back(std::move(what), bad.call);
  };
  const EngineGenerators& engine = GeneratorsOf(c.engine());
  auto cu_with = [&](std::vector<int64_t> cu) {
    return [&engine, cu = std::move(cu)](CallSpec* call) { engine.set_offsets(call, cu); };
  };
  const bool has_prepared = profile != Profile::kSdpa;
  const bool has_kwargs = profile != Profile::kSdpa && profile != Profile::kFlashinferCudnn &&
                          profile != Profile::kVllmFlashinfer;
  if (offsets.size() > 2) {
    std::vector<int64_t> swapped = offsets;
    const size_t i = *rc::gen::inRange<size_t>(1, swapped.size() - 1);
    if (swapped[i] != swapped[i + 1]) {
      std::swap(swapped[i], swapped[i + 1]);
      corrupt("cu_seqlens out of order", has_prepared && !has_kwargs, cu_with(swapped));
    }
  }
  std::vector<int64_t> longer = offsets;
  longer.back() += 1;
  corrupt("cu_seqlens[-1] past the last token", has_prepared && !has_kwargs, cu_with(longer));
  if (g.total_tokens() > 0) {
    std::vector<int64_t> shorter = offsets;
    shorter.back() -= 1;
    corrupt("cu_seqlens[-1] short of the last token", has_prepared && !has_kwargs,
            cu_with(shorter));
  }
  engine.add_corruptions(c, corrupt);
  if (corrupted.empty()) return "";
  const auto& [what, call] = *rc::gen::elementOf(corrupted);
  Case bad = c;
  bad.call = call;
  const Outcome outcome = RunCase(bad, backend);
  run->fault = FaultOf(outcome.error);
  if (outcome.observed == Observed::kUnsupported) {
    ++run->unsupported;
    return "";
  }
  if (outcome.observed != Observed::kCorruption) return "";
  run->replay = bad;  // no expectation: a silent corruption fails it
  return absl::StrCat("hardened mode let a corrupted call through (", what, ") to a wrong output\n",
                      FormatOutcomeText(bad, "generated", outcome));
}

}  // namespace varlen::internal
