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

// One way of passing a case's arguments, and what it is in words.
struct CallForm {
  std::string label;
  CallSpec call;
};

void SetKwarg(CallSpec* call, const std::string& key, ArgLiteral value) {
  std::erase_if(call->kwargs, [&](const auto& item) { return item.first == key; });
  call->kwargs.emplace_back(key, std::move(value));
}

// vLLM's well-formed spellings: cu_seqlens with max_seqlen as a 0-d tensor
// (on the host or the device, int32 or int64), the builders' keywords,
// sequence_lengths passed too (ignored, or checked to agree), uniform
// offsets for one sequence, and for TORCH_SDPA any integer cu_seqlens.
std::vector<CallForm> VllmWellFormedForms(const Case& c) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  std::vector<CallForm> forms;
  auto add = [&](std::string label, bool prepared, auto&& edit) {
    Case form = c;
    SetCorrectCall(&form, profile, prepared);
    edit(&form.call);
    forms.push_back({std::move(label), form.call});
  };
  auto max_tensor = [&](DType dtype, Device device) {
    return ArgLiteral::IntScalarTensor(g.longest(), dtype, device);
  };
  add("the default spelling", /*prepared=*/false, [](CallSpec*) {});
  if (profile == Profile::kVllmFlashinfer) return forms;  // the builders are its one input
  add("the encoder metadata builders' keywords", true, [](CallSpec*) {});
  add("sequence_lengths passed too", false, [&](CallSpec* call) {
    SetKwarg(call, "sequence_lengths",
             ArgLiteral::IntTensor(g.seq_lens, DType::kInt32, Device::kCuda));
  });
  if (profile == Profile::kVllmTorchSdpa) {
    add("cu_seqlens int64 on the host", false, [&](CallSpec* call) {
      call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt64, Device::kCpu);
    });
    return forms;
  }
  add("max_seqlen as a host int64 tensor", false, [&](CallSpec* call) {
    SetKwarg(call, "max_seqlen", max_tensor(DType::kInt64, Device::kCpu));
  });
  add("max_seqlen as a device int32 tensor", false, [&](CallSpec* call) {
    SetKwarg(call, "max_seqlen", max_tensor(DType::kInt32, Device::kCuda));
  });
  if (g.seq_lens.size() == 1 && g.total_tokens() > 0) {
    add("cu_seqlens and max_seqlen None (one sequence)", false, [&](CallSpec* call) {
      call->cu_seqlens = ArgLiteral::None();
      std::erase_if(call->kwargs, [](const auto& kv) { return kv.first == "max_seqlen"; });
    });
  }
  return forms;
}

bool IsTransformersFlash(Profile profile) {
  return EngineOf(profile) == Engine::kTransformers &&
         ProfileName(profile).find("flash") != absl::string_view::npos;
}

// transformers' well-formed spellings: through the layer with or without
// the tower's precomputed max, and the attention interface called as the
// layer calls it, its max as an int or (not for FlashAttention 4's DSL) a
// host tensor the op converts, its scaling None (the kernel's own default,
// the same value).
std::vector<CallForm> TransformersWellFormedForms(const Case& c) {
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  std::vector<CallForm> forms;
  auto add = [&](std::string label, bool prepared, Entry entry, auto&& edit) {
    Case form = c;
    SetCorrectCall(&form, profile, prepared, entry);
    edit(&form.call);
    forms.push_back({std::move(label), form.call});
  };
  auto as_is = [](CallSpec*) {};
  add("through the layer", /*prepared=*/false, Entry::kLayer, as_is);
  add("through the layer with the tower's max_seqlen", true, Entry::kLayer, as_is);
  if (!IsTransformersFlash(profile)) return forms;
  add("the attention interface", false, Entry::kDirect, as_is);
  add("the attention interface, scaling None", false, Entry::kDirect,
      [](CallSpec* call) { SetKwarg(call, "scaling", ArgLiteral::None()); });
  if (profile != Profile::kTfFlashAttention4) {
    add("the attention interface, max_length_q/k as host int64 tensors", false, Entry::kDirect,
        [&](CallSpec* call) {
          for (const char* key : {"max_length_q", "max_length_k"}) {
            SetKwarg(call, key,
                     ArgLiteral::IntScalarTensor(g.longest(), DType::kInt64, Device::kCpu));
          }
        });
  }
  return forms;
}

// Every well-formed spelling of c's arguments in c's calling convention that
// the contract resolves to the same kernel arguments: the forms of
// max_seqlen and cu_seqlens that resolve_precomputed_max_seqlen and the
// casts accept, prepared metadata against keyword arguments, and both
// entries.
std::vector<CallForm> WellFormedForms(const Case& c) {
  if (c.engine() == Engine::kVllm) return VllmWellFormedForms(c);
  if (c.engine() == Engine::kTransformers) return TransformersWellFormedForms(c);
  const Geometry& g = c.geometry;
  const Profile profile = c.call.profile;
  const std::vector<int64_t> offsets = OffsetsOf(g.seq_lens);
  const int64_t longest = g.longest();
  std::vector<CallForm> forms;
  auto add = [&](std::string label, bool prepared, Entry entry, auto&& edit) {
    if (entry == Entry::kLayer && g.total_tokens() == 0) return;  // the layer reshapes q
    Case form = c;
    SetCorrectCall(&form, profile, prepared, entry);
    edit(&form.call);
    forms.push_back(
        {absl::StrCat(label, entry == Entry::kLayer ? ", through the layer" : ""), form.call});
  };
  auto as_is = [](CallSpec*) {};
  for (const Entry entry : {Entry::kDirect, Entry::kLayer}) {
    add("the default spelling", /*prepared=*/false, entry, as_is);
    if (profile == Profile::kSdpa) {
      add("cu_seqlens int64 on the host", false, entry, [&](CallSpec* call) {
        call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt64, Device::kCpu);
      });
      continue;
    }
    if (profile == Profile::kFlashinferCudnn) continue;  // builder metadata is its one input
    add("prepared metadata", /*prepared=*/true, entry, as_is);
    add("prepared metadata with max_seqlen", true, entry,
        [&](CallSpec* call) { call->forward_metadata->max_seqlen = ArgLiteral::Int(longest); });
    add("max_seqlen as a host int64 tensor", false, entry, [&](CallSpec* call) {
      SetKwarg(call, "max_seqlen", ArgLiteral::IntTensor({longest}, DType::kInt64, Device::kCpu));
    });
    add("max_seqlen as a device int32 tensor", false, entry, [&](CallSpec* call) {
      SetKwarg(call, "max_seqlen", ArgLiteral::IntTensor({longest}, DType::kInt32, Device::kCuda));
    });
    if (g.total_tokens() > 0) {  // the maximum of cu_seqlens=[0] is an error
      add("max_seqlen None", false, entry,
          [&](CallSpec* call) { SetKwarg(call, "max_seqlen", ArgLiteral::None()); });
    }
    if (profile != Profile::kTritonAttn) {  // triton_attn passes cu_seqlens on as given
      add("cu_seqlens int64", false, entry, [&](CallSpec* call) {
        call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt64, Device::kCuda);
      });
      add("cu_seqlens on the host", false, entry, [&](CallSpec* call) {
        call->cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCpu);
      });
    }
  }
  return forms;
}

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
  const std::vector<CallForm> forms = WellFormedForms(c);
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
  const int64_t longest = g.longest();
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
  auto cu_with = [&](std::vector<int64_t> cu) {
    return [cu = std::move(cu)](CallSpec* call) {
      const ArgLiteral value = ArgLiteral::IntTensor(cu, DType::kInt32, Device::kCuda);
      if (EngineOf(call->profile) == Engine::kTransformers && call->entry == Entry::kDirect) {
        // The attention interface's keywords (SDPA's and eager's ignore them).
        for (const char* key : {"cu_seq_lens_q", "cu_seq_lens_k"}) {
          if (std::any_of(call->kwargs.begin(), call->kwargs.end(),
                          [&](const auto& kv) { return kv.first == key; })) {
            SetKwarg(call, key, value);
          }
        }
      } else if (call->vllm_metadata.has_value()) {
        call->vllm_metadata->cu_seqlens = ArgLiteral::IntTensor(cu, DType::kInt32, Device::kCpu);
      } else if (call->forward_metadata.has_value()) {
        call->forward_metadata->cu_seqlens = value;
      } else {
        call->cu_seqlens = value;
      }
    };
  };
  const bool vllm = c.engine() == Engine::kVllm;
  const bool transformers = c.engine() == Engine::kTransformers;
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
  if (transformers && IsTransformersFlash(profile) && longest > 0) {
    corrupt("the tower's max_seqlen one below the longest sequence", true, [&](CallSpec* call) {
      if (call->entry == Entry::kLayer) {
        SetKwarg(call, "max_seqlen", ArgLiteral::Int(longest - 1));
      } else {
        SetKwarg(call, "max_length_q", ArgLiteral::Int(longest - 1));
        SetKwarg(call, "max_length_k", ArgLiteral::Int(longest - 1));
      }
    });
    // transformers' dense fallback: a call short of one of the four varlen
    // keywords attends across the whole pack.
    corrupt("one varlen keyword None (the dense fallback over the whole pack)", true,
            [](CallSpec* call) {
              if (call->entry == Entry::kLayer) {
                call->cu_seqlens = ArgLiteral::None();
              } else {
                SetKwarg(call, "max_length_k", ArgLiteral::None());
              }
            });
  } else if (transformers) {
    // The split path ignores max_seqlen: the offsets are its one input.
  } else if (has_kwargs && longest > 0 && vllm && profile != Profile::kVllmTorchSdpa) {
    corrupt("max_seqlen one below the longest sequence", false, [&](CallSpec* call) {
      SetKwarg(call, "max_seqlen",
               ArgLiteral::IntScalarTensor(longest - 1, DType::kInt32, Device::kCpu));
    });
  } else if (has_kwargs && longest > 0 && !vllm) {
    corrupt("max_seqlen one below the longest sequence", false,
            [&](CallSpec* call) { SetKwarg(call, "max_seqlen", ArgLiteral::Int(longest - 1)); });
    corrupt("prepared max_seqlen one below the longest sequence", true, [&](CallSpec* call) {
      call->forward_metadata->max_seqlen = ArgLiteral::Int(longest - 1);
    });
  }
  if (profile == Profile::kVllmFlashinfer) {
    const int64_t width = g.num_heads * g.head_dim;
    corrupt(absl::StrCat("hidden_size ", 2 * width, " instead of ", width), true,
            [width](CallSpec* call) { call->vllm_metadata->hidden_size = 2 * width; });
    corrupt("v dense where the offsets assume the fused projection", true,
            [](CallSpec* call) { call->layout = QLayout::kBatched; });
  }
  if (profile == Profile::kFlashinferCudnn) {
    const int64_t width = g.num_heads * g.head_dim;
    for (const int64_t wrong : {width + g.head_dim, g.head_dim, 2 * width}) {
      if (wrong == width) continue;
      corrupt(absl::StrCat("elem_per_token ", wrong, " instead of ", width), true,
              [wrong](CallSpec* call) { call->forward_metadata->elem_per_token = wrong; });
    }
  }
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
