// The cuda backend on vision-encoder shapes: is it right, and how fast,
// against the device's measured bf16 matrix-product peak and, where the
// cudnn backend is built, against cuDNN's SDPA on the same shapes.
//
// For each shape (16 heads of head dim 80 or 72, bfloat16; single images of
// 1k, 4k and 16k patches; a packed batch of 64k tokens of mixed sizes):
//   * correctness: the shape run as a case through the harness's executor
//     (fa3's correct call for cuda, SGLang's flashinfer_cudnn call for
//     cudnn; the same data) and judged against the float64 oracle, which
//     runs on the GPU when the shape is over the CPU budget; the two
//     backends' outputs are also compared with each other;
//   * time: each kernel alone on device buffers of random data (cuDNN's
//     graph built beforehand), timed with CUDA events after a warm-up, the
//     median of --repeats launches.
// FLOPs are 4 * heads * head_dim * sum(len^2) (Q K^T and P V). The bf16
// peak they are compared with is measured elsewhere (scripts/gpu-check
// times a large matrix product through PyTorch) and passed in.
//
//   varlen_cuda_bench [--repeats=N] [--json=FILE] [--quick] [--peak-tflops=X]
//                     [--judge_tokens=N]
//
// --judge_tokens=N times the shapes of more than N tokens without judging
// them: the judge's float32 emulations run on the CPU, minutes for the 16k
// and 64k shapes on a few cores.
//
// Prints a table; --json writes every figure for scripts/gpu-check. Exits 1
// when a shape is judged wrong.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device_params.h"
#include "flash_forward.h"
#include "launch_plan.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/correct_call.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/synth.h"
#if defined(VARLEN_BENCH_CUDNN)
#include "sdpa_graph.h"
#endif

namespace varlen {
namespace {

using cuda_kernels::CudaStatus;

constexpr int kHeads = 16;

struct Shape {
  std::string name;
  std::vector<int64_t> lengths;
  int head_dim;
};

std::vector<Shape> VisionShapes(bool quick) {
  std::vector<int64_t> mixed = {16384, 8192, 8192, 4096, 4096};
  for (int i = 0; i < 4; ++i) mixed.push_back(2048);
  for (int i = 0; i < 8; ++i) mixed.push_back(1024);
  for (int i = 0; i < 32; ++i) mixed.push_back(256);  // 65536 tokens in all
  std::vector<Shape> shapes;
  for (int d : {80, 72}) {
    for (int64_t n : {1024, 4096, 16384}) {
      if (quick && n > 1024) continue;
      shapes.push_back({absl::StrCat("1 image, ", n / 1024, "k patches, d=", d), {n}, d});
    }
    if (!quick) shapes.push_back({absl::StrCat("packed 64k tokens (49 images), d=", d), mixed, d});
  }
  return shapes;
}

// Median of `repeats` timings of `launch`, in milliseconds, after a warm-up.
template <typename Launch>
absl::StatusOr<double> MedianMilliseconds(int repeats, Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  absl::Status status;
  for (int i = 0; i < repeats + 3 && status.ok(); ++i) {
    cudaEventRecord(start);
    status = launch();
    cudaEventRecord(stop);
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "timed launch");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);  // the first launches load modules
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  std::sort(times.begin(), times.end());
  return static_cast<double>(times[times.size() / 2]);
}

std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) x = DoubleToBFloat16Bits(normal(rng));
  return out;
}

// The shape as a case: the correct call of `profile`, one seed for all.
Case ShapeCase(const Shape& shape, Profile profile) {
  Case c;
  c.name = "bench";
  c.source = "cuda_attention_bench";
  c.geometry.seq_lens = shape.lengths;
  c.geometry.num_heads = c.geometry.num_kv_heads = kHeads;
  c.geometry.head_dim = c.geometry.head_dim_v = shape.head_dim;
  c.geometry.dtype = DType::kBFloat16;
  c.data.seed = 20261201;
  SetCorrectCall(&c, profile, /*prepared=*/profile == Profile::kFlashinferCudnn);
  return c;
}

// Random bfloat16 q, k and v of a shape packed back to back, and the params
// over them (every sequence computed whole).
struct Problem {
  std::vector<uint16_t> q, k, v, o;
  std::vector<int64_t> starts, lengths;
  VarlenAttentionParams params;
};

std::unique_ptr<Problem> MakeProblem(const Shape& shape) {
  auto problem = std::make_unique<Problem>();
  Problem& h = *problem;
  int64_t tokens = 0;
  h.lengths = shape.lengths;
  for (int64_t n : shape.lengths) {
    h.starts.push_back(tokens * kHeads * shape.head_dim);
    tokens += n;
  }
  const int64_t numel = tokens * kHeads * shape.head_dim;
  h.q = RandomBf16(static_cast<size_t>(numel), 2);
  h.k = RandomBf16(static_cast<size_t>(numel), 3);
  h.v = RandomBf16(static_cast<size_t>(numel), 4);
  h.o.resize(static_cast<size_t>(numel));
  VarlenAttentionParams& p = h.params;
  p.q = h.q.data(), p.k = h.k.data(), p.v = h.v.data(), p.o = h.o.data();
  p.input_dtype = p.output_dtype = DType::kBFloat16;
  p.q_numel = p.k_numel = p.v_numel = p.o_numel = numel;
  p.q_token_stride = p.k_token_stride = p.v_token_stride = p.o_token_stride =
      int64_t{kHeads} * shape.head_dim;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = shape.head_dim;
  p.num_heads_q = p.num_heads_kv = kHeads;
  p.head_dim_qk = p.head_dim_v = shape.head_dim;
  p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  p.batch = static_cast<int>(h.lengths.size());
  p.q_start = p.k_start = p.v_start = p.o_start = h.starts.data();
  p.seqlen_q = p.seqlen_k = h.lengths.data();
  p.max_rows_q = p.max_keys = *std::max_element(h.lengths.begin(), h.lengths.end());
  return problem;
}

// Our kernel alone.
absl::StatusOr<double> TimeKernel(const Problem& problem, int repeats) {
  const VarlenAttentionParams& p = problem.params;
  if (absl::Status bounds = CheckKernelBounds(p); !bounds.ok()) return bounds;
  int device = 0, shared = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  absl::StatusOr<cuda_kernels::LaunchPlan> plan =
      cuda_kernels::PlanForwardLaunch(p, {.shared_bytes_per_block = shared});
  if (!plan.ok()) return plan.status();
  absl::StatusOr<cuda_kernels::DeviceParams> on_device = cuda_kernels::DeviceParams::Upload(p);
  if (!on_device.ok()) return on_device.status();
  return MedianMilliseconds(repeats, [&] {
    return CudaStatus(cuda_kernels::LaunchFlashForward(on_device->device(), *plan, nullptr),
                      "flash kernel launch");
  });
}

#if defined(VARLEN_BENCH_CUDNN)
// cuDNN's graph alone, built before the clock starts. The graph's batch is
// the real one and S_max the longest sequence (SGLang pads both to buckets;
// padded entries have no rows and the buckets only change nominal strides).
absl::StatusOr<double> TimeCudnn(const Problem& problem, int repeats) {
  cudnnHandle_t handle = nullptr;
  if (cudnnStatus_t s = cudnnCreate(&handle); s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cudnnCreate: ", cudnnGetErrorString(s)));
  }
  int device = 0;
  cudaGetDevice(&device);
  const cudnn_kernels::SdpaGraphKey key = cudnn_kernels::KeyFor(problem.params, device);
  absl::StatusOr<double> ms = [&]() -> absl::StatusOr<double> {
    absl::StatusOr<std::shared_ptr<cudnn_kernels::SdpaGraph>> graph =
        cudnn_kernels::SdpaGraph::Build(key, handle);
    if (!graph.ok()) return graph.status();
    absl::StatusOr<cudnn_kernels::SdpaLaunch> launch = (*graph)->Upload(problem.params);
    if (!launch.ok()) return launch.status();
    return MedianMilliseconds(repeats, [&] { return (*graph)->Execute(handle, *launch); });
  }();
  cudnnDestroy(handle);
  return ms;
}
#endif

// The largest |a - b| over two outputs of one shape (NaN when either is
// missing or they differ in size).
double MaxDifference(const Outcome& a, const Outcome& b) {
  if (!a.output.has_value() || !b.output.has_value() || a.output->numel() != b.output->numel()) {
    return std::nan("");
  }
  double worst = 0;
  for (int64_t i = 0; i < a.output->numel(); ++i) {
    worst = std::max(worst, std::abs(a.output->DoubleAt(i) - b.output->DoubleAt(i)));
  }
  return worst;
}

std::string ErrorText(const Outcome& outcome) {
  return outcome.numerics.has_value()
             ? absl::StrCat(outcome.numerics->max_abs_error, " (", outcome.numerics->bound, ")")
             : absl::StrCat(outcome.resolution_only_reason, outcome.unsupported.message(),
                            outcome.error.message());
}

bool Correct(const Outcome& outcome) {
  return outcome.verdict == Verdict::kPass && outcome.numerics.has_value();
}

int Main(int argc, char** argv) {
  int repeats = 30;
  double peak = 0.0;  // unknown
  bool quick = false;
  int64_t judge_tokens = -1;  // every shape
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--repeats=") && absl::SimpleAtoi(arg.substr(10), &repeats) &&
        repeats > 0) {
      continue;
    } else if (absl::StartsWith(arg, "--json=")) {
      json_path = arg.substr(7);
    } else if (absl::StartsWith(arg, "--peak-tflops=") && absl::SimpleAtod(arg.substr(14), &peak) &&
               peak > 0) {
      continue;
    } else if (absl::StartsWith(arg, "--judge_tokens=") &&
               absl::SimpleAtoi(arg.substr(15), &judge_tokens) && judge_tokens >= 0) {
      continue;
    } else if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--repeats=N>0] [--json=FILE] [--quick] [--peak-tflops=X>0] "
                   "[--judge_tokens=N>=0]\n"
                   "unknown: %s\n",
                   argv[0], arg.c_str());
      return 2;
    }
  }
  const Backend* cuda = FindBackend("cuda");
  if (absl::Status available = cuda->Available(); !available.ok()) {
    std::fprintf(stderr, "cuda backend unavailable: %s\n",
                 std::string(available.message()).c_str());
    return 1;
  }
  // cuDNN beside our kernel, where this build has it.
  const Backend* cudnn = FindBackend("cudnn");
  std::string cudnn_missing = "this build has no cudnn backend";
  if (cudnn != nullptr) {
    if (absl::Status available = cudnn->Available(); !available.ok()) {
      cudnn_missing = std::string(available.message());
      cudnn = nullptr;
    }
  }
  cudaDeviceProp props;
  cudaGetDeviceProperties(&props, 0);
  nlohmann::json out = {{"gpu", props.name},
                        {"sm", absl::StrCat(props.major, props.minor)},
                        {"bf16_peak_tflops", peak},
                        {"repeats", repeats},
                        {"cudnn", cudnn != nullptr ? "" : cudnn_missing},
                        {"shapes", nlohmann::json::array()}};
  std::printf("%s, bf16 peak %s; cuDNN: %s\n\n", props.name,
              peak > 0 ? absl::StrCat(peak, " TFLOP/s (measured)").c_str() : "not given",
              cudnn != nullptr ? "beside" : cudnn_missing.c_str());
  std::printf("%-40s %-8s %10s %9s %7s %-8s %10s %9s %8s  %s\n", "shape", "correct", "time ms",
              "TFLOP/s", "%peak", "cudnn", "cudnn ms", "TFLOP/s", "ours/cudnn", "error (bound)");
  bool all_correct = true;
  RunOptions keep;
  keep.keep_output = true;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run cut short keeps its lines
  for (const Shape& shape : VisionShapes(quick)) {
    int64_t tokens = 0;
    for (int64_t n : shape.lengths) tokens += n;
    const bool judged = judge_tokens < 0 || tokens <= judge_tokens;
    const auto run_case = [&](Profile profile, const Backend& backend) {
      if (judged) return RunCase(ShapeCase(shape, profile), backend, keep);
      Outcome skipped;
      skipped.error = absl::UnimplementedError(
          absl::StrCat("not judged: ", tokens, " tokens, over --judge_tokens=", judge_tokens));
      return skipped;
    };
    const auto verdict = [&](const Outcome& outcome) -> nlohmann::json {
      if (!judged) return nullptr;
      return Correct(outcome);
    };
    const auto verdict_cell = [&](const Outcome& outcome) {
      return !judged ? "-" : Correct(outcome) ? "PASS" : "FAIL";
    };
    const Outcome outcome = run_case(Profile::kFa3, *cuda);
    all_correct = all_correct && (!judged || Correct(outcome));
    double sum_sq = 0;
    for (int64_t n : shape.lengths) sum_sq += static_cast<double>(n) * n;
    const double flops = 4.0 * kHeads * shape.head_dim * sum_sq;
    const std::unique_ptr<Problem> problem = MakeProblem(shape);
    absl::StatusOr<double> ms = TimeKernel(*problem, repeats);
    const double tflops = ms.ok() ? flops / (*ms * 1e-3) / 1e12 : 0.0;

    nlohmann::json cudnn_json = nullptr;
    std::string cudnn_cells = absl::StrFormat("%-8s %10s %9s %8s", "-", "-", "-", "-");
    if (cudnn != nullptr) {
      const Outcome theirs = run_case(Profile::kFlashinferCudnn, *cudnn);
      all_correct = all_correct && (!judged || Correct(theirs));
      absl::StatusOr<double> cudnn_ms = absl::UnimplementedError("not timed");
#if defined(VARLEN_BENCH_CUDNN)
      cudnn_ms = TimeCudnn(*problem, repeats);
#endif
      const double cudnn_tflops = cudnn_ms.ok() ? flops / (*cudnn_ms * 1e-3) / 1e12 : 0.0;
      const double ratio = ms.ok() && cudnn_ms.ok() ? *ms / *cudnn_ms : 0.0;
      cudnn_cells = absl::StrFormat("%-8s %10.3f %9.1f %8.2f", verdict_cell(theirs),
                                    cudnn_ms.ok() ? *cudnn_ms : -1.0, cudnn_tflops, ratio);
      cudnn_json = {
          {"correct", verdict(theirs)},
          {"error", ErrorText(theirs)},
          {"ms", cudnn_ms.ok() ? *cudnn_ms : -1.0},
          {"tflops", cudnn_tflops},
          {"our_time_over_cudnn", ratio},
          {"max_difference_from_cuda", MaxDifference(outcome, theirs)},
          {"timing_error", cudnn_ms.ok() ? "" : std::string(cudnn_ms.status().message())}};
    }
    std::printf("%-40s %-8s %10.3f %9.1f %6.1f%% %s  %s\n", shape.name.c_str(),
                verdict_cell(outcome), ms.ok() ? *ms : -1.0, tflops,
                peak > 0 ? 100 * tflops / peak : 0.0, cudnn_cells.c_str(),
                ErrorText(outcome).c_str());
    out["shapes"].push_back({{"name", shape.name},
                             {"lengths", shape.lengths},
                             {"heads", kHeads},
                             {"head_dim", shape.head_dim},
                             {"correct", verdict(outcome)},
                             {"error", ErrorText(outcome)},
                             {"ms", ms.ok() ? *ms : -1.0},
                             {"tflops", tflops},
                             {"fraction_of_peak", peak > 0 ? tflops / peak : 0.0},
                             {"timing_error", ms.ok() ? "" : std::string(ms.status().message())},
                             {"cudnn", cudnn_json}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return all_correct ? 0 : 1;
}

}  // namespace
}  // namespace varlen

int main(int argc, char** argv) { return varlen::Main(argc, argv); }
