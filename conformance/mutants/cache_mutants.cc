// Mutants of a cuDNN-style graph cache: cpu_flash's correct kernel behind a
// cache of built "graphs" (kernels/cudnn/graph_cache.h) keyed, as
// FlashInfer's was, on too few fields. A graph is built for the first call
// of its key and fixes what that call asked for; a later call that differs
// only in the missing field replays it. No single call shows the bug: the
// corpus cases that kill these mutants make a warmup call first.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "flash_attention.h"
#include "graph_cache.h"
#include "mutants.h"

namespace varlen {
namespace {

enum class CacheBug {
  kWithoutScale,  // FlashInfer #4014: the softmax scale is not in the key
  kWithoutDtype,  // FlashInfer #4146, #4270: the dtype is not in the key
};

struct CacheBugInfo {
  CacheBug bug;
  const char* name;
  const char* bug_class;
};

constexpr CacheBugInfo kCacheBugs[] = {
    {CacheBug::kWithoutScale, "without_scale",
     "graph cache keyed without the softmax scale (FlashInfer #4014)"},
    {CacheBug::kWithoutDtype, "without_dtype",
     "graph cache keyed without the dtype (FlashInfer #4146, #4270)"},
};

// What building a graph fixed: the scale it applies and the dtype it reads
// q, k and v as (and writes o as).
struct BuiltGraph {
  double softmax_scale = 0.0;
  DType dtype = DType::kBFloat16;
};

// The call being served. GraphCache builds from the key alone; these
// builders, like FlashInfer's, take what the key lacks from the call that
// happens to build the graph. Builds run on the calling thread.
thread_local const VarlenAttentionParams* serving = nullptr;

class CacheMutantBackend final : public Backend {
 public:
  explicit CacheMutantBackend(const CacheBugInfo& info)
      : info_(info),
        name_(absl::StrCat("cache_", info.name)),
        cache_([](const cudnn_kernels::SdpaGraphKey&)
                   -> absl::StatusOr<std::shared_ptr<const BuiltGraph>> {
          if (serving == nullptr) return absl::InternalError("a graph built outside a call");
          return std::make_shared<const BuiltGraph>(
              BuiltGraph{serving->softmax_scale, serving->input_dtype});
        }) {}

  absl::string_view name() const override { return name_; }
  absl::string_view description() const override { return info_.bug_class; }
  BackendCapabilities capabilities() const override { return FlashCapabilities(); }

  absl::Status Run(const VarlenAttentionParams& params) const override {
    cudnn_kernels::SdpaGraphKey key = cudnn_kernels::KeyFor(params, 0);
    switch (info_.bug) {
      case CacheBug::kWithoutScale:
        key.scale_bits = 0;
        break;
      case CacheBug::kWithoutDtype:
        // The element size stays in the key (a real key holds byte sizes
        // through its strides and extents): a stale graph misreads a buffer
        // but never reads past it.
        if (DTypeSize(key.dtype) == 2) key.dtype = DType::kBFloat16;
        break;
    }
    serving = &params;
    absl::StatusOr<std::shared_ptr<const BuiltGraph>> graph = cache_.Get(key);
    serving = nullptr;
    if (!graph.ok()) return graph.status();
    // Replay: the new call's buffers, run as the graph was built.
    VarlenAttentionParams replay = params;
    replay.softmax_scale = (*graph)->softmax_scale;
    if (params.output_dtype == params.input_dtype) replay.output_dtype = (*graph)->dtype;
    replay.input_dtype = (*graph)->dtype;
    FlashAttention(replay);
    return absl::OkStatus();
  }

 private:
  CacheBugInfo info_;
  std::string name_;
  mutable cudnn_kernels::GraphCache<const BuiltGraph> cache_;  // thread-safe
};

}  // namespace

std::vector<Mutant> CacheMutants() {
  std::vector<Mutant> mutants;
  for (const CacheBugInfo& info : kCacheBugs) {
    auto backend = std::make_unique<CacheMutantBackend>(info);
    mutants.push_back({std::string(backend->name()), info.bug_class, std::move(backend)});
  }
  return mutants;
}

}  // namespace varlen
