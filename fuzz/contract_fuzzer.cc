// Fuzz target: a decoded call (case_decoder.h) resolved in both modes and
// run on a small geometry. For every input:
//
//   * no silent corruption: hardened mode raises, or its launch stays inside
//     the buffers and its output matches the float64 reference of the
//     sequences the call conveys. These are the ground truth's unless the
//     call conveys other, self-consistent boundaries (no cu_seqlens: one
//     sequence per batch item; a valid but different cu_seqlens), which no
//     argument check can tell from the intended ones;
//   * where both modes succeed, they ask the kernel for the same launch;
//   * faithful fa3 and triton_attn calls with builder-made metadata resolve
//     without a host sync (contract: host syncs);
//   * never a crash or undefined behaviour (ASan and UBSan watch).
//
// A violation is reported through ReportViolation (violation.h).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "case_decoder.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/executor.h"
#include "violation.h"

namespace {

std::vector<int64_t> WithoutTrailingZeros(std::vector<int64_t> lengths) {
  while (!lengths.empty() && lengths.back() == 0) lengths.pop_back();
  return lengths;
}

// What a resolved call tells the kernel to compute: the sequence lengths
// (trailing empty ones dropped; empty when the profile's arguments do not
// list them) and the scale.
struct Conveyed {
  std::vector<int64_t> lengths;
  double scale = 0;
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
        if constexpr (std::is_same_v<Args, varlen::Fa3Args> ||
                      std::is_same_v<Args, varlen::TritonArgs>) {
          from_offsets(args.cu_seqlens);
        } else if constexpr (std::is_same_v<Args, varlen::FlashinferCudnnArgs>) {
          for (int64_t i = 0; i < args.actual_seq_lens.numel(); ++i) {
            lengths.push_back(args.actual_seq_lens.IntAt(i));
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const varlen::DecodeLimits limits = *varlen::DecodeLimitsFor("contract");
  static const varlen::Backend* const kernel = varlen::FindBackend("cpu_reference");
  absl::StatusOr<varlen::Case> decoded = varlen::DecodeCase({data, size}, limits);
  if (!decoded.ok()) return 0;
  varlen::Case c = *std::move(decoded);
  c.expect.reset();

  varlen::RunOptions options;
  options.budget = {.macs = 400'000, .elements = 40'000};
  c.mode = varlen::Mode::kHardened;
  const varlen::Outcome hardened = varlen::RunCase(c, *kernel, options);
  if (hardened.observed == varlen::Observed::kCorruption) {
    // Judged again against the sequences the call conveys, when they are
    // other ones that cover every token.
    const Conveyed conveyed = ConveyedBy(*hardened.resolution);
    int64_t conveyed_tokens = 0;
    for (int64_t n : conveyed.lengths) conveyed_tokens += n;
    varlen::Case as_conveyed = c;
    as_conveyed.geometry.seq_lens = conveyed.lengths;
    as_conveyed.geometry.softmax_scale = conveyed.scale;
    const bool other_call = conveyed.lengths != WithoutTrailingZeros(c.geometry.seq_lens) ||
                            conveyed.scale != c.geometry.scale();
    if (!hardened.kernel_fault.ok() || conveyed.lengths.empty() ||
        conveyed_tokens != c.geometry.total_tokens() || !other_call ||
        varlen::RunCase(as_conveyed, *kernel, options).observed != varlen::Observed::kSuccess) {
      varlen::ReportViolation("hardened-silent-corruption",
                              "hardened mode let the call through to a wrong launch or output", c,
                              &hardened);
    }
  }

  varlen::Case faithful_case = c;
  faithful_case.mode = varlen::Mode::kFaithful;
  // The launches are compared only where hardened mode succeeded; elsewhere
  // faithful mode's resolution (its host syncs) is all that is checked, and
  // skipping its forward run halves the cost of most inputs.
  varlen::RunOptions faithful_options = options;
  faithful_options.allow_forward = hardened.observed == varlen::Observed::kSuccess;
  const varlen::Outcome faithful = varlen::RunCase(faithful_case, *kernel, faithful_options);
  if (hardened.observed == varlen::Observed::kSuccess &&
      faithful.observed == varlen::Observed::kSuccess && !hardened.kernel.empty() &&
      !faithful.kernel.empty() && hardened.kernel != faithful.kernel) {
    varlen::ReportViolation("modes-disagree-on-launch",
                            "the modes resolved one call to different launches: hardened \"" +
                                hardened.kernel + "\", faithful \"" + faithful.kernel + "\"",
                            faithful_case, &faithful);
  }

  const bool builder_metadata =
      c.call.forward_metadata.has_value() &&
      c.call.forward_metadata->builder == varlen::MetadataSpec::Builder::kPlain;
  const bool token_profile =
      c.call.profile == varlen::Profile::kFa3 || c.call.profile == varlen::Profile::kTritonAttn;
  if (builder_metadata && token_profile && faithful.resolution.has_value() &&
      faithful.resolution->status.ok() && faithful.resolution->counts().host_syncs != 0) {
    varlen::ReportViolation("host-sync-with-builder-metadata",
                            "resolution from builder-made metadata made a host sync", faithful_case,
                            &faithful);
  }
  return 0;
}
