// Fuzz target: a decoded call (case_decoder.h) resolved in both modes and
// run on a small geometry. For every input:
//
//   * no silent corruption: hardened mode raises, or its launch stays inside
//     the buffers and its output matches the float64 reference of the
//     sequences the call conveys. These are the ground truth's unless the
//     call conveys other, self-consistent boundaries (no cu_seqlens: one
//     sequence per batch item; a valid but different cu_seqlens) or another
//     attention variant (fa3's window_size and s_aux), which no argument
//     check can tell from the intended ones;
//   * where both modes succeed, they ask the kernel for the same work
//     (SameWork);
//   * faithful fa3 and triton_attn calls with builder-made metadata resolve
//     without a host sync (contract: host syncs);
//   * never a crash or undefined behaviour (ASan and UBSan watch).
//
// A violation is reported through ReportViolation (violation.h).
//
// Most inputs are judged without a forward run: a launch that asks the
// kernel for exactly the ground truth's rows, keys, outputs and scale
// (LaunchShape) gives the reference's output from any correct kernel, and
// the kernels themselves are the differential target's business. Only a
// launch that differs, or cannot be said in rows, runs forward on
// cpu_reference and is judged against the float64 reference.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "case_decoder.h"
#include "fuzzed_backends.h"
#include "varlen/backend/bind.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/synth.h"
#include "violation.h"

namespace {

std::vector<int64_t> WithoutTrailingZeros(std::vector<int64_t> lengths) {
  while (!lengths.empty() && lengths.back() == 0) lengths.pop_back();
  return lengths;
}

// What a resolved call tells the kernel to compute: the sequence lengths
// (trailing empty ones dropped; empty when the profile's arguments do not
// list them), the scale and the attention variant.
struct Conveyed {
  std::vector<int64_t> lengths;
  double scale = 0;
  varlen::AttentionVariant variant;
};

Conveyed ConveyedBy(const varlen::Resolution& r) {
  Conveyed conveyed;
  std::vector<int64_t>& lengths = conveyed.lengths;
  auto from_offsets = [&](const varlen::Value& cu) {
    if (!cu.is_tensor()) return;
    const varlen::Tensor& t = cu.as_tensor();
    for (int64_t i = 1; i < t.numel(); ++i) lengths.push_back(t.IntAt(i) - t.IntAt(i - 1));
  };
  std::visit(
      [&](const auto& args) {
        using Args = std::decay_t<decltype(args)>;
        conveyed.scale = args.scale;
        if constexpr (std::is_same_v<Args, varlen::FlashVarlenArgs>) {
          from_offsets(args.cu_seqlens);
          conveyed.variant = args.variant;
        } else if constexpr (std::is_same_v<Args, varlen::TritonArgs>) {
          from_offsets(args.cu_seqlens);
        } else if constexpr (std::is_same_v<Args, varlen::FlashinferCudnnArgs>) {
          for (int64_t i = 0; i < args.actual_seq_lens.numel(); ++i) {
            lengths.push_back(args.actual_seq_lens.IntAt(i));
          }
        } else if constexpr (std::is_same_v<Args, varlen::AscendArgs>) {
          int64_t previous = 0;
          for (const int64_t end : args.actual_seq_lengths) {
            lengths.push_back(end - previous);
            previous = end;
          }
        } else if (args.mask == varlen::SdpaArgs::Mask::kNone) {
          lengths.assign(static_cast<size_t>(args.bsz), args.tokens_per_item);
        } else if (args.mask == varlen::SdpaArgs::Mask::kPadding) {
          // Items whose padding mask keeps every token are sequences.
          for (const int64_t kept : args.kept) {
            if (kept != args.tokens_per_item) return lengths.clear();
          }
          lengths.assign(static_cast<size_t>(args.bsz), args.tokens_per_item);
        } else if (args.mask == varlen::SdpaArgs::Mask::kBlockDiagonal && args.bsz == 1) {
          // Blocks that tile the item back to back are sequences.
          int64_t next = 0;
          for (const auto& [begin, end] : args.blocks) {
            if (begin != next) return lengths.clear();
            lengths.push_back(end - begin);
            next = end;
          }
        }
      },
      r.args->args);
  lengths = WithoutTrailingZeros(std::move(lengths));
  return conveyed;
}

// Faithful fa3 and triton_attn resolve builder-made metadata without a
// host sync.
void CheckHostSyncs(const varlen::Case& c, const varlen::Case& faithful_case,
                    const varlen::Outcome& faithful) {
  const bool builder_metadata =
      c.call.forward_metadata.has_value() &&
      c.call.forward_metadata->builder == varlen::MetadataSpec::Builder::kPlain;
  // aiter_attn and ascend_attn read the host on every call; amx_attn and
  // xpu_attn (0.5.23) ignore metadata.
  const varlen::Profile p = c.call.profile;
  const bool token_profile = p == varlen::Profile::kFa3 || p == varlen::Profile::kTritonAttn ||
                             p == varlen::Profile::kFa4;
  if (builder_metadata && token_profile && faithful.resolution.has_value() &&
      faithful.resolution->status.ok() && faithful.resolution->counts().host_syncs != 0) {
    varlen::ReportViolation("host-sync-with-builder-metadata",
                            "resolution from builder-made metadata made a host sync", faithful_case,
                            &faithful);
  }
}

// The launch a successful resolution asks for: in rows (unset where rows
// cannot say it), and as the kernel entry describes it.
struct Launch {
  std::optional<varlen::LaunchShape> shape;
  std::string description;
};

Launch ResolvedLaunch(const varlen::Outcome& o) {
  if (o.observed != varlen::Observed::kSuccess || !o.resolution.has_value() ||
      !o.resolution->status.ok() || !o.resolution->args.has_value()) {
    return {};
  }
  absl::StatusOr<varlen::KernelCall> call = varlen::BindForKernel(*o.resolution->args);
  if (!call.ok()) return {};
  return {call->Launch(), call->description()};
}

// Whether two launches ask for the same work: the same description, or the
// same sequences in rows once those of no rows are left out (they write no
// output). SGLang's ascend_attn hands the NPU kernel cu_seqlens' leading 0
// in graph mode, an empty first sequence hardened mode does not ask for.
bool SameWork(const Launch& a, const Launch& b) {
  if (a.description == b.description) return true;
  if (!a.shape.has_value() || !b.shape.has_value()) return false;
  auto working = [](varlen::LaunchShape shape) {
    std::erase_if(shape.sequences, [](const auto& s) { return s.rows == 0; });
    return shape;
  };
  return working(*a.shape) == working(*b.shape);
}

// The launch the float64 reference runs for `lengths` (numerics.cc), in rows.
std::optional<varlen::LaunchShape> GroundTruthLaunch(const varlen::QkvTensors& qkv,
                                                     const std::vector<int64_t>& lengths,
                                                     double scale, varlen::DType dtype,
                                                     const varlen::AttentionVariant& variant) {
  const varlen::KernelCall truth =
      varlen::BindGroundTruth(varlen::FlattenBatch(qkv.q), varlen::FlattenBatch(qkv.k),
                              varlen::FlattenBatch(qkv.v), lengths, scale, dtype, variant);
  return truth.Launch();
}

// Whether the sequences a resolved call conveys are other ones than the
// ground truth's that cover every token (see the header): such a call is
// judged against them.
bool ConveysOtherCoveringCall(const varlen::Case& c, const Conveyed& conveyed) {
  int64_t tokens = 0;
  for (int64_t n : conveyed.lengths) tokens += n;
  const bool other = conveyed.lengths != WithoutTrailingZeros(c.geometry.seq_lens) ||
                     conveyed.scale != c.geometry.scale() ||
                     !(conveyed.variant == c.geometry.variant);
  return !conveyed.lengths.empty() && tokens == c.geometry.total_tokens() && other;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const varlen::DecodeLimits limits = *varlen::DecodeLimitsFor("contract");
  static const varlen::Backend* const kernel = &varlen::FuzzedBackend("cpu_reference");
  absl::StatusOr<varlen::Case> decoded = varlen::DecodeCase({data, size}, limits);
  if (!decoded.ok()) return 0;
  varlen::Case c = *std::move(decoded);
  c.expect.reset();

  varlen::RunOptions options;
  options.budget = {.macs = 400'000, .elements = 40'000};
  c.mode = varlen::Mode::kHardened;
  varlen::Case faithful_case = c;
  faithful_case.mode = varlen::Mode::kFaithful;
  varlen::RunOptions resolution_only = options;
  resolution_only.allow_forward = false;

  // Resolution in both modes first; when every launch that resolved is the
  // one its forward run would be judged against, no forward run can disagree
  // with the reference. (The layer's rotary embedding and contiguous copies
  // hand the kernel new tensors of the same values: their launches compare
  // in rows too.)
  if (varlen::FitsForwardBudget(c.geometry, options.budget)) {
    varlen::CaseRunner hardened_runner(c, resolution_only);
    const varlen::Outcome hardened = hardened_runner.Run(*kernel);
    const varlen::Outcome faithful = varlen::RunCase(faithful_case, *kernel, resolution_only);
    const varlen::QkvTensors qkv = varlen::HeadsApart(c, hardened_runner.tensors());
    const std::optional<varlen::LaunchShape> truth = GroundTruthLaunch(
        qkv, c.geometry.seq_lens, c.geometry.scale(), c.geometry.dtype, c.geometry.variant);
    const Launch hardened_launch = ResolvedLaunch(hardened);
    const Launch faithful_launch = ResolvedLaunch(faithful);
    bool hardened_settled = hardened.observed == varlen::Observed::kError;
    if (!hardened_settled && hardened_launch.shape.has_value()) {
      hardened_settled = hardened_launch.shape == truth;
      if (!hardened_settled) {
        const Conveyed conveyed = ConveyedBy(*hardened.resolution);
        hardened_settled =
            ConveysOtherCoveringCall(c, conveyed) &&
            hardened_launch.shape == GroundTruthLaunch(qkv, conveyed.lengths, conveyed.scale,
                                                       c.geometry.dtype, conveyed.variant);
      }
    }
    // The modes disagree only where both bind and describe their launches
    // differently; the forward runs then say whether both outputs are right.
    const bool faithful_settled = faithful.observed == varlen::Observed::kError ||
                                  hardened.observed == varlen::Observed::kError ||
                                  faithful_launch.description.empty() ||
                                  SameWork(faithful_launch, hardened_launch);
    if (truth.has_value() && hardened_settled && faithful_settled) {
      CheckHostSyncs(c, faithful_case, faithful);
      return 0;
    }
  }

  const varlen::Outcome hardened = varlen::RunCase(c, *kernel, options);
  if (hardened.observed == varlen::Observed::kCorruption) {
    // Judged again against the sequences the call conveys, when they are
    // other ones that cover every token.
    const Conveyed conveyed = ConveyedBy(*hardened.resolution);
    varlen::Case as_conveyed = c;
    as_conveyed.geometry.seq_lens = conveyed.lengths;
    as_conveyed.geometry.softmax_scale = conveyed.scale;
    as_conveyed.geometry.variant = conveyed.variant;
    if (!hardened.kernel_fault.ok() || !ConveysOtherCoveringCall(c, conveyed) ||
        varlen::RunCase(as_conveyed, *kernel, options).observed != varlen::Observed::kSuccess) {
      varlen::ReportViolation("hardened-silent-corruption",
                              "hardened mode let the call through to a wrong launch or output", c,
                              &hardened);
    }
  }

  // The launches are compared only where hardened mode succeeded; elsewhere
  // faithful mode's resolution (its host syncs) is all that is checked, and
  // skipping its forward run halves the cost of most inputs.
  varlen::RunOptions faithful_options = options;
  faithful_options.allow_forward = hardened.observed == varlen::Observed::kSuccess;
  const varlen::Outcome faithful = varlen::RunCase(faithful_case, *kernel, faithful_options);
  // Rows that belong to no sequence are not judged: launches that differ
  // only there (one writes the padding as a sequence of its own, the other
  // leaves it) agree wherever both outputs were judged right.
  const bool judged_on_every_sequence = c.geometry.padding_rows() > 0 &&
                                        hardened.resolution_only_reason.empty() &&
                                        faithful.resolution_only_reason.empty();
  if (hardened.observed == varlen::Observed::kSuccess &&
      faithful.observed == varlen::Observed::kSuccess && !hardened.kernel.empty() &&
      !faithful.kernel.empty() && !judged_on_every_sequence &&
      !SameWork(ResolvedLaunch(hardened), ResolvedLaunch(faithful))) {
    varlen::ReportViolation("modes-disagree-on-launch",
                            "the modes resolved one call to different launches: hardened \"" +
                                hardened.kernel + "\", faithful \"" + faithful.kernel + "\"",
                            faithful_case, &faithful);
  }

  CheckHostSyncs(c, faithful_case, faithful);
  return 0;
}
