// Throughput of the CPU backends, and of the float64 oracle every judged
// case runs, on vision-encoder shapes: one image of N patches, 16 heads of
// head dim 80 (Qwen2-VL), bfloat16 inputs. Reports tokens/s, GFLOP/s
// (4 * N^2 * heads * head_dim: Q K^T and P V) and GMAC/s (half of that).
//
//   scripts/bench [--benchmark_filter=...]

#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "reference_attention.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case.h"
#include "varlen/cases/synth.h"

namespace varlen {
namespace {

constexpr int64_t kHeads = 16;
constexpr int64_t kHeadDim = 80;

struct Problem {
  QkvTensors qkv;
  KernelCall call;
};

Problem MakeProblem(int64_t patches, DType output_dtype) {
  Case c;
  c.geometry.seq_lens = {patches};
  c.geometry.num_heads = c.geometry.num_kv_heads = kHeads;
  c.geometry.head_dim = c.geometry.head_dim_v = kHeadDim;
  c.geometry.dtype = DType::kBFloat16;
  QkvTensors qkv = SynthesizeQkv(c);
  KernelCall call =
      BindGroundTruth(qkv.q, qkv.k, qkv.v, {patches}, c.geometry.scale(), output_dtype);
  return {std::move(qkv), std::move(call)};
}

void SetCounters(benchmark::State& state, int64_t patches) {
  const double flops = 4.0 * static_cast<double>(patches) * patches * kHeads * kHeadDim;
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(patches),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] =
      benchmark::Counter(flops * 0.5e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Backend(benchmark::State& state, const std::string& backend_name) {
  const int64_t patches = state.range(0);
  const Problem problem = MakeProblem(patches, DType::kBFloat16);
  const Backend* backend = FindBackend(backend_name);
  if (backend == nullptr) {
    state.SkipWithError("backend not built");
    return;
  }
  for (auto _ : state) {
    const absl::Status ran = backend->Run(problem.call.params());
    if (!ran.ok()) state.SkipWithError(std::string(ran.message()).c_str());
  }
  SetCounters(state, patches);
}

// The judge's float64 oracle: the naive definition and the blocked one, on
// one thread (range 1) or every core (0).
void BM_Oracle(benchmark::State& state, bool blocked) {
  const int64_t patches = state.range(0);
  const Problem problem = MakeProblem(patches, DType::kFloat64);
  for (auto _ : state) {
    if (blocked) {
      FastReferenceAttention(problem.call.params(), ReferencePrecision::kFloat64,
                             static_cast<int>(state.range(1)));
    } else {
      ReferenceAttention(problem.call.params(), ReferencePrecision::kFloat64);
    }
  }
  SetCounters(state, patches);
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
BENCHMARK_CAPTURE(BM_Oracle, naive, false)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Oracle, blocked, true)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({4096, 1})
    ->Args({1024, 0})
    ->Args({4096, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace varlen

BENCHMARK_MAIN();
