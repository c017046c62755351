// The cuda backend on vision-encoder shapes: is it right, and how fast,
// against the device's measured bf16 matrix-product peak.
//
// For each shape (16 heads of head dim 80 or 72, bfloat16; single images of
// 1k, 4k and 16k patches; a packed batch of 64k tokens of mixed sizes):
//   * correctness: the shape run as a case through the harness's executor
//     (fa3's correct call) and judged against the float64 oracle, which
//     runs on the GPU when the shape is over the CPU budget;
//   * time: the kernel alone on device buffers of random data, timed with
//     CUDA events after a warm-up, the median of --repeats launches.
// FLOPs are 4 * heads * head_dim * sum(len^2) (Q K^T and P V). The bf16
// peak they are compared with is measured elsewhere (scripts/gpu-check
// times a large matrix product through PyTorch) and passed in.
//
//   varlen_cuda_bench [--repeats=N] [--json=FILE] [--quick] [--peak-tflops=X]
//
// Prints a table; --json writes every figure for scripts/gpu-check. Exits 1
// when a shape is judged wrong.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "device_params.h"
#include "flash_forward.h"
#include "launch_plan.h"
#include "nlohmann/json.hpp"
#include "varlen/backend/bind.h"
#include "varlen/backend/registry.h"
#include "varlen/cases/executor.h"
#include "varlen/cases/synth.h"

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

Case ShapeCase(const Shape& shape) {
  Case c;
  c.name = "bench";
  c.source = "cuda_attention_bench";
  c.geometry.seq_lens = shape.lengths;
  c.geometry.num_heads = c.geometry.num_kv_heads = kHeads;
  c.geometry.head_dim = c.geometry.head_dim_v = shape.head_dim;
  c.geometry.dtype = DType::kBFloat16;
  c.data.seed = 20261201;
  std::vector<int64_t> offsets = {0};
  for (int64_t n : shape.lengths) offsets.push_back(offsets.back() + n);
  c.call.profile = Profile::kFa3;
  c.call.cu_seqlens = ArgLiteral::IntTensor(offsets, DType::kInt32, Device::kCuda);
  c.call.kwargs.emplace_back(
      "max_seqlen", ArgLiteral::Int(*std::max_element(shape.lengths.begin(), shape.lengths.end())));
  return c;
}

// The kernel alone on random device data.
absl::StatusOr<double> TimeKernel(const Shape& shape, int repeats) {
  int64_t tokens = 0;
  std::vector<int64_t> starts, lengths = shape.lengths;
  for (int64_t n : shape.lengths) {
    starts.push_back(tokens * kHeads * shape.head_dim);
    tokens += n;
  }
  const int64_t numel = tokens * kHeads * shape.head_dim;
  const std::vector<uint16_t> q = RandomBf16(static_cast<size_t>(numel), 2),
                              k = RandomBf16(static_cast<size_t>(numel), 3),
                              v = RandomBf16(static_cast<size_t>(numel), 4);
  std::vector<uint16_t> o(static_cast<size_t>(numel));
  VarlenAttentionParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data();
  p.input_dtype = p.output_dtype = DType::kBFloat16;
  p.q_numel = p.k_numel = p.v_numel = p.o_numel = numel;
  p.q_token_stride = p.k_token_stride = p.v_token_stride = p.o_token_stride =
      int64_t{kHeads} * shape.head_dim;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = shape.head_dim;
  p.num_heads_q = p.num_heads_kv = kHeads;
  p.head_dim_qk = p.head_dim_v = shape.head_dim;
  p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  p.batch = static_cast<int>(lengths.size());
  p.q_start = p.k_start = p.v_start = p.o_start = starts.data();
  p.seqlen_q = p.seqlen_k = lengths.data();
  p.max_rows_q = p.max_keys = *std::max_element(lengths.begin(), lengths.end());

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

int Main(int argc, char** argv) {
  int repeats = 30;
  double peak = 0.0;  // unknown
  bool quick = false;
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
    } else if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--repeats=N>0] [--json=FILE] [--quick] [--peak-tflops=X>0]\n"
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
  cudaDeviceProp props;
  cudaGetDeviceProperties(&props, 0);
  nlohmann::json out = {{"gpu", props.name},
                        {"sm", absl::StrCat(props.major, props.minor)},
                        {"bf16_peak_tflops", peak},
                        {"repeats", repeats},
                        {"shapes", nlohmann::json::array()}};
  std::printf("%s, bf16 peak %s\n\n", props.name,
              peak > 0 ? absl::StrCat(peak, " TFLOP/s (measured)").c_str() : "not given");
  std::printf("%-40s %-8s %10s %9s %7s  %s\n", "shape", "correct", "time ms", "TFLOP/s", "%peak",
              "error (bound)");
  bool all_correct = true;
  for (const Shape& shape : VisionShapes(quick)) {
    const Outcome outcome = RunCase(ShapeCase(shape), *cuda);
    const bool correct = outcome.verdict == Verdict::kPass && outcome.numerics.has_value();
    all_correct = all_correct && correct;
    double sum_sq = 0;
    for (int64_t n : shape.lengths) sum_sq += static_cast<double>(n) * n;
    const double flops = 4.0 * kHeads * shape.head_dim * sum_sq;
    absl::StatusOr<double> ms = TimeKernel(shape, repeats);
    const double tflops = ms.ok() ? flops / (*ms * 1e-3) / 1e12 : 0.0;
    const std::string error =
        outcome.numerics.has_value()
            ? absl::StrCat(outcome.numerics->max_abs_error, " (", outcome.numerics->bound, ")")
            : absl::StrCat(outcome.resolution_only_reason, outcome.unsupported.message(),
                           outcome.error.message());
    std::printf("%-40s %-8s %10.3f %9.1f %6.1f%%  %s\n", shape.name.c_str(),
                correct ? "PASS" : "FAIL", ms.ok() ? *ms : -1.0, tflops,
                peak > 0 ? 100 * tflops / peak : 0.0, error.c_str());
    out["shapes"].push_back({{"name", shape.name},
                             {"lengths", shape.lengths},
                             {"heads", kHeads},
                             {"head_dim", shape.head_dim},
                             {"correct", correct},
                             {"error", error},
                             {"ms", ms.ok() ? *ms : -1.0},
                             {"tflops", tflops},
                             {"fraction_of_peak", peak > 0 ? tflops / peak : 0.0},
                             {"timing_error", ms.ok() ? "" : std::string(ms.status().message())}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return all_correct ? 0 : 1;
}

}  // namespace
}  // namespace varlen

int main(int argc, char** argv) { return varlen::Main(argc, argv); }
