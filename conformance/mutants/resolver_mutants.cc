// Mutants of the argument handling: cpu_flash's correct kernel behind a
// resolution with one realistic bug (Backend::ResolveCall), each from the
// contract's bug history or the bug classes of vendor argument code.

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flash_attention.h"
#include "mutants.h"
#include "varlen/contract/sglang/metadata.h"

namespace varlen {
namespace {

enum class ResolverBug {
  kMaxFromFirstSequence,     // a max derived from cu_seqlens uses cu[1] - cu[0]
  kInt64OffsetsAsInt32,      // an int64 cu_seqlens handed on as its int32 words
  kSyncsOnPreparedMetadata,  // recomputes the max with .item() despite metadata
  kHardenedChecksNothing,    // hardened mode resolves as faithful does
  kNoneKeyAsAbsentKey,       // a kwarg passed as None treated as never passed
  kDropsZeroLengths,         // padded lengths with the empty sequences removed
  kOffsetsCachedByBatch,     // element offsets cached under the batch size only
  kMaxBucketOneStepSmall,    // the max_seqlen bucket from floor(log2) instead of ceil
};

struct ResolverBugInfo {
  ResolverBug bug;
  const char* name;
  const char* bug_class;
};

constexpr ResolverBugInfo kResolverBugs[] = {
    {ResolverBug::kMaxFromFirstSequence, "max_from_first_sequence",
     "resolver: max_seqlen from the first sequence only"},
    {ResolverBug::kInt64OffsetsAsInt32, "int64_offsets_as_int32",
     "resolver: int64 cu_seqlens not cast (int32 offset handling)"},
    {ResolverBug::kSyncsOnPreparedMetadata, "syncs_on_prepared_metadata",
     "resolver: host sync under CUDA-graph capture"},
    {ResolverBug::kHardenedChecksNothing, "hardened_checks_nothing",
     "resolver: validation skipped (too-small max_seqlen, wrong offsets)"},
    {ResolverBug::kNoneKeyAsAbsentKey, "none_key_as_absent_key",
     "resolver: key None treated like key absent"},
    {ResolverBug::kDropsZeroLengths, "drops_zero_lengths",
     "resolver: zero-length sequences skipped wrongly"},
    {ResolverBug::kOffsetsCachedByBatch, "offsets_cached_by_batch",
     "resolver: packed offsets cached by batch size alone (stale indptrs on a later call)"},
    {ResolverBug::kMaxBucketOneStepSmall, "max_bucket_one_step_small",
     "length: flashinfer_cudnn's max_seqlen bucket one step too small (past 4,096)"},
};

// The bucket a floor(log2) instead of a ceil(log2) picks: one step below
// the right one for lengths past 4096 that are not a power of two.
int64_t FloorBucket(int64_t real_max) {
  int64_t bucket = kMaxSeqlenBuckets.front();
  for (int64_t b : kMaxSeqlenBuckets) {
    if (b <= real_max) bucket = b;
  }
  return bucket;
}

// Whether `call` leaves max_seqlen for resolution to derive from cu_seqlens.
bool MaxDerivedFromOffsets(const AttentionCall& call) {
  if (call.forward_metadata.has_value()) return false;
  const Value* max = call.kwargs.find("max_seqlen");
  return max == nullptr || max->is_none();
}

Tensor Int32WordsOf(const Tensor& int64_offsets) {
  std::vector<int64_t> words(static_cast<size_t>(int64_offsets.numel()));
  std::vector<int32_t> raw(words.size() * 2);
  std::memcpy(raw.data(), int64_offsets.data<int64_t>(), raw.size() * sizeof(int32_t));
  for (size_t i = 0; i < words.size(); ++i) words[i] = raw[i];
  return Tensor::FromInts(words, DType::kInt32, int64_offsets.device());
}

class ResolverMutantBackend final : public Backend {
 public:
  explicit ResolverMutantBackend(const ResolverBugInfo& info)
      : info_(info), name_(absl::StrCat("resolver_", info.name)) {}
  absl::string_view name() const override { return name_; }
  absl::string_view description() const override { return info_.bug_class; }
  BackendCapabilities capabilities() const override { return FlashCapabilities(); }
  absl::Status Run(const VarlenAttentionParams& params) const override {
    FlashAttention(params);
    return absl::OkStatus();
  }

  Resolution ResolveCall(const AttentionCall& call, Profile profile, Mode mode) const override {
    switch (info_.bug) {
      case ResolverBug::kHardenedChecksNothing:
        return Resolve(call, profile, Mode::kFaithful);
      case ResolverBug::kNoneKeyAsAbsentKey: {
        AttentionCall without_none = call;
        for (const auto& [key, value] : call.kwargs.items()) {
          if (value.is_none()) without_none.kwargs.erase(key);
        }
        return Resolve(without_none, profile, mode);
      }
      default:
        break;
    }
    Resolution r = Resolve(call, profile, mode);
    if (!r.status.ok()) return r;
    if (auto* fa3 = std::get_if<FlashVarlenArgs>(&r.args->args)) MutateFa3(call, fa3, &r);
    if (auto* cudnn = std::get_if<FlashinferCudnnArgs>(&r.args->args)) MutateCudnn(cudnn);
    return r;
  }

 private:
  void MutateFa3(const AttentionCall& call, FlashVarlenArgs* args, Resolution* r) const {
    switch (info_.bug) {
      case ResolverBug::kMaxFromFirstSequence:
        // Faithful mode hands the kernel whatever it was given: only offsets
        // that are a tensor have a first sequence.
        if (MaxDerivedFromOffsets(call) && args->cu_seqlens.is_tensor() &&
            args->cu_seqlens.as_tensor().numel() > 1) {
          const Tensor& cu = args->cu_seqlens.as_tensor();
          args->max_seqlen = Value::Int(cu.IntAt(1) - cu.IntAt(0));
        }
        break;
      case ResolverBug::kInt64OffsetsAsInt32:
        if (call.cu_seqlens.is_tensor() && call.cu_seqlens.as_tensor().dtype() == DType::kInt64) {
          args->cu_seqlens = Value::FromTensor(Int32WordsOf(call.cu_seqlens.as_tensor()));
        }
        break;
      case ResolverBug::kSyncsOnPreparedMetadata:
        if (call.forward_metadata.has_value()) {
          r->events.push_back({DeviceEventKind::kHostSync, "(cu[1:] - cu[:-1]).max().item()"});
        }
        break;
      default:
        break;
    }
  }

  void MutateCudnn(FlashinferCudnnArgs* args) const {
    if (info_.bug == ResolverBug::kMaxBucketOneStepSmall) {
      int64_t longest = 0;
      for (int64_t i = 0; i < args->actual_seq_lens.numel(); ++i) {
        longest = std::max(longest, args->actual_seq_lens.IntAt(i));
      }
      if (args->max_token_per_sequence == BucketedMaxSeqlen(longest)) {
        args->max_token_per_sequence = args->max_sequence_kv = FloorBucket(longest);
      }
    }
    if (info_.bug == ResolverBug::kDropsZeroLengths) {
      const Tensor& lengths = args->actual_seq_lens;
      std::vector<int64_t> kept;
      for (int64_t i = 0; i < lengths.numel(); ++i) {
        if (lengths.IntAt(i) != 0) kept.push_back(lengths.IntAt(i));
      }
      kept.resize(static_cast<size_t>(lengths.numel()), 0);
      args->actual_seq_lens =
          Tensor::FromInts(kept, DType::kInt32, lengths.device(), lengths.shape());
    }
    if (info_.bug == ResolverBug::kOffsetsCachedByBatch) {
      // The first offsets built for a padded batch size are reused for every
      // later call of that size, whatever its lengths.
      std::lock_guard<std::mutex> lock(mutex_);
      const int64_t batch = args->actual_seq_lens.numel();
      auto [it, inserted] = offsets_by_batch_.try_emplace(
          batch, std::array<Tensor, 3>{args->batch_offsets_qk, args->batch_offsets_v,
                                       args->batch_offsets_o});
      if (!inserted) {
        args->batch_offsets_qk = it->second[0];
        args->batch_offsets_v = it->second[1];
        args->batch_offsets_o = it->second[2];
      }
    }
  }

  ResolverBugInfo info_;
  std::string name_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::array<Tensor, 3>> offsets_by_batch_;
};

}  // namespace

std::vector<Mutant> ResolverMutants() {
  std::vector<Mutant> mutants;
  for (const ResolverBugInfo& info : kResolverBugs) {
    auto backend = std::make_unique<ResolverMutantBackend>(info);
    mutants.push_back({std::string(backend->name()), info.bug_class, std::move(backend)});
  }
  return mutants;
}

}  // namespace varlen
