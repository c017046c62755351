// Throughput of the CPU backends, and of the float64 oracle every judged
// case runs, on vision-encoder shapes: one image of N patches, 16 heads of
// head dim 80 (Qwen2-VL), bfloat16 inputs. Reports tokens/s, GFLOP/s
// (4 * N^2 * heads * head_dim: Q K^T and P V) and GMAC/s (half of that).
//
//   scripts/bench [--benchmark_filter=...]

#include <cstdint>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "benchmark/benchmark.h"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/case.h"
#include "varlen/cases/synth.h"
#include "varlen/oracle/reference_attention.h"

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
// one thread (range 1) or every core (0); the blocked one on each
// instruction set (kBest: the widest the CPU runs).
void BM_Oracle(benchmark::State& state, bool blocked, OracleIsa isa) {
  const int64_t patches = state.range(0);
  if (!OracleIsaRuns(isa)) {
    state.SkipWithError("this CPU does not run that instruction set");
    return;
  }
  const Problem problem = MakeProblem(patches, DType::kFloat64);
  for (auto _ : state) {
    if (blocked) {
      FastReferenceAttention(problem.call.params(), ReferencePrecision::kFloat64,
                             static_cast<int>(state.range(1)), nullptr, isa);
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
BENCHMARK_CAPTURE(BM_Oracle, naive, false, OracleIsa::kBest)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Oracle, blocked, true, OracleIsa::kBest)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({4096, 1})
    ->Args({1024, 0})
    ->Args({4096, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Oracle, blocked_baseline, true, OracleIsa::kBaseline)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Oracle, blocked_avx2, true, OracleIsa::kAvx2)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Oracle, blocked_avx512, true, OracleIsa::kAvx512)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#if defined(__x86_64__)
// The float64 multiply-add limit of one core, the yardstick of the oracle's
// GMAC/s: 12 independent chains of vector FMAs (more than latency x FMA
// ports on current cores) and nothing else, 2^20 steps per iteration; one
// lane's FMA counts as one multiply-add.
constexpr int kFmaChains = 12;
constexpr int64_t kFmaSteps = 1 << 20;

void SetFmaCounter(benchmark::State& state, int lanes) {
  state.counters["GMAC/s"] = benchmark::Counter(1e-9 * kFmaSteps * kFmaChains * lanes,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

[[gnu::target("avx2,fma")]] void BM_Float64FmaLimit_avx2(benchmark::State& state) {
  if (!OracleIsaRuns(OracleIsa::kAvx2)) return state.SkipWithError("no AVX2 with FMA");
  __m256d acc[kFmaChains];
  for (__m256d& x : acc) x = _mm256_set1_pd(1.0);
  const __m256d m = _mm256_set1_pd(0.999999), a = _mm256_set1_pd(1e-9);
  for (auto _ : state) {
    for (int64_t s = 0; s < kFmaSteps; ++s) {
#pragma GCC unroll 16
      for (__m256d& x : acc) x = _mm256_fmadd_pd(x, m, a);
    }
  }
  // One value escapes, after the loop: an accumulator whose address escaped
  // would live in memory, each FMA waiting on a store (a third of the limit).
  __m256d sum = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < kFmaChains; ++i) sum = _mm256_add_pd(sum, acc[i]);
  benchmark::DoNotOptimize(sum);
  SetFmaCounter(state, 4);
}

[[gnu::target("avx512f")]] void BM_Float64FmaLimit_avx512(benchmark::State& state) {
  if (!OracleIsaRuns(OracleIsa::kAvx512)) return state.SkipWithError("no AVX-512");
  __m512d acc[kFmaChains];
  for (__m512d& x : acc) x = _mm512_set1_pd(1.0);
  const __m512d m = _mm512_set1_pd(0.999999), a = _mm512_set1_pd(1e-9);
  for (auto _ : state) {
    for (int64_t s = 0; s < kFmaSteps; ++s) {
#pragma GCC unroll 16
      for (__m512d& x : acc) x = _mm512_fmadd_pd(x, m, a);
    }
  }
  __m512d sum = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < kFmaChains; ++i) sum = _mm512_add_pd(sum, acc[i]);
  benchmark::DoNotOptimize(sum);
  SetFmaCounter(state, 8);
}
BENCHMARK(BM_Float64FmaLimit_avx2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Float64FmaLimit_avx512)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace
}  // namespace varlen

BENCHMARK_MAIN();
