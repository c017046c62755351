#include "mutants.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "flash_attention.h"
#include "varlen/cases/case_json.h"
#include "varlen/cases/executor.h"

namespace varlen {
namespace {

struct BugInfo {
  FlashBug bug;
  const char* name;
  const char* bug_class;
};

constexpr BugInfo kBugs[] = {
    {FlashBug::kDropsLastKeyOfPartialTile, "drops_last_key_of_partial_tile",
     "off-by-one at a tile end"},
    {FlashBug::kSkipsLastRowOfPartialTile, "skips_last_row_of_partial_tile",
     "off-by-one at a tile end"},
    {FlashBug::kCompactsEmptySequences, "compacts_empty_sequences",
     "zero-length sequences skipped wrongly"},
    {FlashBug::kReadsOneKeyPastTheSequence, "reads_one_key_past_the_sequence",
     "reading past a sequence end / past cu_seqlens[-1]"},
    {FlashBug::kStaleKeyOffsets, "stale_key_offsets",
     "stale offsets after the first sequence (FlashInfer #3800)"},
    {FlashBug::kQueryOffsetsForKeys, "query_offsets_for_keys",
     "offset math: wrong tensor's offsets"},
    {FlashBug::kScaleFromValueHeadDim, "scale_from_value_head_dim",
     "wrong default scale / value head dim confused"},
    {FlashBug::kScaleInInputDType, "scale_in_input_dtype", "scale off by a rounding"},
    {FlashBug::kNoMaxSubtraction, "no_max_subtraction", "no max subtraction before exp"},
    {FlashBug::kKeysCappedAt128, "keys_capped_at_128", "truncation at a compiled max_seqlen"},
    {FlashBug::kGqaHeadModulo, "gqa_head_modulo", "GQA head mapping"},
    {FlashBug::kAssumesValueHeadDimEqualsQk, "assumes_value_head_dim_equals_qk",
     "value head dim confused with query head dim"},
    {FlashBug::kIgnoresStrides, "ignores_strides", "a stride ignored"},
    {FlashBug::kRoundsOutputTowardZero, "rounds_output_toward_zero", "rounding mode"},
    {FlashBug::kAccumulatesInHalf, "accumulates_in_half", "accumulation precision"},
    {FlashBug::kScoresInInputDType, "scores_in_input_dtype", "logits kept in low precision"},
    {FlashBug::kNoAccumulatorRescale, "no_accumulator_rescale", "online softmax rescaling"},
    {FlashBug::kNoRowSumRescale, "no_row_sum_rescale", "online softmax rescaling"},
    {FlashBug::kTileMaxNotRunningMax, "tile_max_not_running_max", "online softmax rescaling"},
    {FlashBug::kFirstKeyTileOnly, "first_key_tile_only", "loop bound: one tile of keys"},
    {FlashBug::kDropsLastSequence, "drops_last_sequence", "off-by-one at the batch end"},
    {FlashBug::kCausalMask, "causal_mask", "mask: causal applied to full attention"},
    {FlashBug::kExp2WithoutLog2e, "exp2_without_log2e", "exp2 without the log2(e) factor"},
    {FlashBug::kNanToZero, "nan_to_zero", "NaN swallowed (nan_to_num epilogue)"},
    {FlashBug::kKeysCappedAt1024, "keys_capped_at_1024",
     "length: keys past 1,024 dropped (a bounded K cache)"},
    {FlashBug::kSplitKvMergeWithoutRescale, "split_kv_merge_without_rescale",
     "length: split-KV partials merged without rescaling (past 2,048 keys)"},
    {FlashBug::kRowsCappedAt4096, "rows_capped_at_4096",
     "length: a launch grid capped at 64 row blocks (rows past 4,096 unwritten)"},
    {FlashBug::kIgnoresWindow, "ignores_window", "variant: the window dropped"},
    {FlashBug::kWindowRightExclusive, "window_right_exclusive",
     "variant: the window's right bound off by one"},
    {FlashBug::kIgnoresSinks, "ignores_sinks", "variant: the sinks dropped"},
    {FlashBug::kKeyOffsetsFromLengths, "key_offsets_from_lengths",
     "padding: keys found by summing lengths, rows in no sequence assumed away"},
};

class FlashMutantBackend final : public Backend {
 public:
  FlashMutantBackend(const BugInfo& info) : info_(info), name_(absl::StrCat("flash_", info.name)) {}
  absl::string_view name() const override { return name_; }
  absl::string_view description() const override { return info_.bug_class; }
  BackendCapabilities capabilities() const override { return FlashCapabilities(); }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    FlashAttention(params, 0, info_.bug);
    return absl::OkStatus();
  }

 private:
  BugInfo info_;
  std::string name_;
};

// A correct fa3 call (cu_seqlens and max_seqlen keyword arguments) for `g`
// with normal data: what every anchor's tests compare with a reference.
Case AnchorCase(Geometry g, uint64_t seed, const ForwardLimits& limits) {
  FitBudget(&g, limits.max_macs);
  Case c;
  c.name = "anchor";
  c.source = "anchor strategy";
  c.geometry = std::move(g);
  c.data.seed = seed;
  SetCorrectCall(&c, Profile::kFa3);
  return c;
}

rc::Gen<DType> GenHalfDType() { return rc::gen::element(DType::kFloat16, DType::kBFloat16); }

}  // namespace

std::vector<Mutant> FlashMutants() {
  std::vector<Mutant> mutants;
  for (const BugInfo& info : kBugs) {
    auto backend = std::make_unique<FlashMutantBackend>(info);
    mutants.push_back({std::string(backend->name()), info.bug_class, std::move(backend)});
  }
  return mutants;
}

std::vector<Mutant> AllMutants() {
  std::vector<Mutant> mutants = FlashMutants();
  for (Mutant& m : ResolverMutants()) mutants.push_back(std::move(m));
  for (Mutant& m : CacheMutants()) mutants.push_back(std::move(m));
  return mutants;
}

std::vector<AnchorStrategy> AnchorStrategies(const ForwardLimits& limits) {
  std::vector<AnchorStrategy> anchors;
  anchors.push_back(
      {"flash_attention", "random lengths in [max - 20, max] (padding masks near the max)",
       rc::gen::exec([limits] {
         Geometry g;
         const int64_t max_len = *rc::gen::element<int64_t>(113, 128, 203, 217, 256) / 2;
         const int batch = *rc::gen::inRange(2, 9);
         for (int b = 0; b < batch; ++b) {
           g.seq_lens.push_back(
               *rc::gen::inRange<int64_t>(std::max<int64_t>(1, max_len - 20), max_len + 1));
         }
         g.num_kv_heads = *rc::gen::element<int64_t>(3, 1);
         g.num_heads = *rc::gen::element<int64_t>(9, 3) / 3 * 3;
         if (g.num_heads % g.num_kv_heads != 0) g.num_kv_heads = 1;
         g.head_dim = g.head_dim_v = *rc::gen::element<int64_t>(32, 40, 59, 64, 80, 96, 111, 128);
         g.dtype = *GenHalfDType();
         return AnchorCase(g, *rc::gen::inRange<uint64_t>(0, 1000000), limits);
       })});
  anchors.push_back(
      {"flashinfer", "uniform lengths: every sequence the same length", rc::gen::exec([limits] {
         Geometry g;
         const int batch = *rc::gen::element(1, 3, 7, 12);
         const int64_t length = *rc::gen::element<int64_t>(1, 17, 54, 97, 128);
         g.seq_lens.assign(static_cast<size_t>(batch), length);
         g.num_heads = g.num_kv_heads = *rc::gen::element<int64_t>(4, 8);
         g.head_dim = g.head_dim_v = *rc::gen::element<int64_t>(64, 128);
         g.dtype = DType::kFloat16;
         return AnchorCase(g, *rc::gen::inRange<uint64_t>(0, 1000000), limits);
       })});
  anchors.push_back({"cudnn_frontend", "random configurations: b, h, s, d drawn, ragged lengths",
                     rc::gen::exec([limits] {
                       Geometry g;
                       const int batch = *rc::gen::inRange(1, 9);
                       const int64_t max_len = *rc::gen::inRange<int64_t>(1, 257);
                       for (int b = 0; b < batch; ++b) {
                         g.seq_lens.push_back(*rc::gen::inRange<int64_t>(1, max_len + 1));
                       }
                       g.num_kv_heads = *rc::gen::inRange<int64_t>(1, 5);
                       g.num_heads = g.num_kv_heads * *rc::gen::element<int64_t>(1, 2);
                       g.head_dim = g.head_dim_v = *rc::gen::element<int64_t>(64, 128);
                       g.dtype = *GenHalfDType();
                       return AnchorCase(g, *rc::gen::inRange<uint64_t>(0, 1000000), limits);
                     })});
  anchors.push_back({"pytorch", "fixed lengths 11 and 13 (nested tensors)", rc::gen::exec([limits] {
                       Geometry g;
                       g.seq_lens = {11, 13};
                       g.num_heads = g.num_kv_heads = 4;
                       g.head_dim = g.head_dim_v = *rc::gen::element<int64_t>(8, 16);
                       g.dtype =
                           *rc::gen::element(DType::kFloat32, DType::kFloat16, DType::kBFloat16);
                       return AnchorCase(g, *rc::gen::inRange<uint64_t>(0, 1000000), limits);
                     })});
  return anchors;
}

// The first corpus case that fails on `backend`, or an empty kill.
Kill FirstCorpusFailure(const Backend& backend) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<std::string>> files = ListCaseFiles({VARLEN_CORPUS_DIR});
  int64_t executions = 0;
  for (const std::string& file : files.ok() ? *files : std::vector<std::string>()) {
    absl::StatusOr<Case> c = LoadCaseFile(file);
    if (!c.ok()) continue;
    ++executions;
    if (RunCase(*c, backend).verdict == Verdict::kFail) {
      const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
      return {absl::StrCat("Corpus: ", c->name), executions, seconds.count(),
              c->geometry.longest()};
    }
  }
  return {};
}

std::vector<MutantRow> AnalyzeMutants(const MutationOptions& options) {
  // The cheap comparisons first: a kill there costs least.
  std::vector<std::string> order = {
      "PoisonedNeighbours", "SequencePermutation", "SequenceAlone",   "SplitJoin",
      "GqaRepeatedKv",      "LogitShift",          "SystematicError", "Numerics"};
  for (const std::string& property : PropertyNames()) {
    if (std::find(order.begin(), order.end(), property) == order.end()) order.push_back(property);
  }
  std::vector<Mutant> mutants = AllMutants();
  int64_t ordinal = 0;
  std::erase_if(mutants, [&](const Mutant& m) {
    return !options.shard.Owns(ordinal++) ||
           (!options.only.empty() && m.name.find(options.only) == std::string::npos);
  });
  std::vector<AnchorStrategy> anchors;
  if (options.anchors) anchors = AnchorStrategies(BudgetFor("Numerics", options.tier).limits);
  std::vector<MutantRow> rows;
  for (const Mutant& mutant : mutants) {
    MutantRow row{mutant.name, mutant.bug_class, {}, {}};
    std::unique_ptr<Backend> isolated;
    if (options.isolation.has_value()) isolated = Isolate(*mutant.backend, *options.isolation);
    const Backend& backend = isolated != nullptr ? *isolated : *mutant.backend;
    double spent = 0;
    int64_t executions = 0;
    // Every property's cases first, then every property's long cases: a
    // mutant that short cases kill never pays for long ones.
    for (const bool long_cases : {false, true}) {
      for (const std::string& property : order) {
        PropertyRunOptions run;
        run.budget = BudgetFor(property, options.tier);
        (long_cases ? run.budget.cases : run.budget.long_cases) = 0;
        // Counts, not time, bound a measurement: it must not depend on how
        // busy the machine is.
        run.budget.time_budget_s = run.budget.long_time_budget_s = 0;
        run.shrink = false;
        const PropertyRunResult result = RunProperty(property, backend, run);
        if (!result.passed) {
          row.suite = {absl::StrCat(property, long_cases ? " (long)" : ""),
                       executions + result.executions_to_failure, spent + result.seconds_to_failure,
                       result.shrunk.has_value() ? result.shrunk->geometry.longest() : 0};
          break;
        }
        spent += result.seconds;
        executions += result.executed;
      }
      if (!row.suite.by.empty()) break;
    }
    if (row.suite.by.empty()) {
      const Kill corpus = FirstCorpusFailure(backend);
      row.suite = {corpus.by, executions + corpus.executions, spent + corpus.seconds};
    }
    if (row.suite.by.empty()) row.suite = {"", executions, spent};
    for (const AnchorStrategy& anchor : anchors) {
      PropertyRunOptions run;
      run.budget = BudgetFor("Numerics", options.tier);
      run.shrink = false;
      run.generator = anchor.generator;
      const PropertyRunResult result = RunProperty("Numerics", backend, run);
      row.anchors.push_back(result.passed ? Kill{"", result.executed, result.seconds}
                                          : Kill{"Numerics", result.executions_to_failure,
                                                 result.seconds_to_failure,
                                                 result.shrunk->geometry.longest()});
    }
    rows.push_back(std::move(row));
    if (options.progress) {
      options.progress(rows.back(), static_cast<int>(rows.size()),
                       static_cast<int>(mutants.size()));
    }
  }
  return rows;
}

std::string MutantsMarkdown(const std::vector<MutantRow>& rows, const MutationOptions& options) {
  const auto cell = [](const Kill& kill) {
    if (kill.by.empty()) return absl::StrFormat("survived (%d runs)", kill.executions);
    return absl::StrFormat("%d runs, %.2f s", kill.executions, kill.seconds);
  };
  std::string out = "| mutant | bug class | killed by | to the kill | longest sequence |";
  std::string rule = "|---|---|---|---|---|";
  std::vector<AnchorStrategy> anchors;
  if (options.anchors) anchors = AnchorStrategies({});
  for (const AnchorStrategy& anchor : anchors) {
    absl::StrAppend(&out, " ", anchor.name, " |");
    absl::StrAppend(&rule, "---|");
  }
  absl::StrAppend(&out, "\n", rule, "\n");
  int killed = 0;
  std::vector<int> anchor_kills(anchors.size(), 0);
  for (const MutantRow& row : rows) {
    killed += !row.suite.by.empty();
    absl::StrAppend(&out, "| `", row.mutant, "` | ", row.bug_class, " | ",
                    row.suite.by.empty() ? "**survived**" : row.suite.by, " | ", cell(row.suite),
                    " | ", row.suite.by.empty() ? "" : absl::StrCat(row.suite.longest), " |");
    for (size_t a = 0; a < row.anchors.size(); ++a) {
      anchor_kills[a] += !row.anchors[a].by.empty();
      absl::StrAppend(&out, " ", cell(row.anchors[a]), " |");
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "| **killed** | | ", killed, " of ", rows.size(), " | | |");
  for (int kills : anchor_kills) absl::StrAppend(&out, " ", kills, " of ", rows.size(), " |");
  absl::StrAppend(&out, "\n");
  return out;
}

}  // namespace varlen
