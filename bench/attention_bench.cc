// Throughput of the CPU backends on vision-encoder shapes: one image of N
// patches, 16 heads of head dim 80 (Qwen2-VL), bfloat16. Reports tokens/s
// and GFLOP/s (4 * N^2 * heads * head_dim: Q K^T and P V).
//
//   scripts/bench [--benchmark_filter=...]

#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case.h"
#include "varlen/cases/synth.h"

namespace varlen {
namespace {

constexpr int64_t kHeads = 16;
constexpr int64_t kHeadDim = 80;

void BM_Backend(benchmark::State& state, const std::string& backend_name) {
  const int64_t patches = state.range(0);
  Case c;
  c.geometry.seq_lens = {patches};
  c.geometry.num_heads = c.geometry.num_kv_heads = kHeads;
  c.geometry.head_dim = c.geometry.head_dim_v = kHeadDim;
  c.geometry.dtype = DType::kBFloat16;
  const QkvTensors qkv = SynthesizeQkv(c);
  const KernelCall call =
      BindGroundTruth(qkv.q, qkv.k, qkv.v, {patches}, c.geometry.scale(), DType::kBFloat16);
  const Backend* backend = FindBackend(backend_name);
  if (backend == nullptr) {
    state.SkipWithError("backend not built");
    return;
  }
  for (auto _ : state) {
    const absl::Status ran = backend->Run(call.params());
    if (!ran.ok()) state.SkipWithError(std::string(ran.message()).c_str());
  }
  const double flops = 4.0 * static_cast<double>(patches) * patches * kHeads * kHeadDim;
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(patches),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The float64 oracle is slow: its largest size takes minutes.
BENCHMARK_CAPTURE(BM_Backend, cpu_reference, std::string("cpu_reference"))
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Backend, cpu_flash, std::string("cpu_flash"))
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace varlen

BENCHMARK_MAIN();
