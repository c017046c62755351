// cuDNN's SDPA forward as a backend under test. It consumes the kernel
// arguments of the flashinfer_cudnn profile as SGLang hands them to
// FlashInfer's cudnn_batch_prefill_with_kv_cache: the q/k element offsets
// for Q and K, the v third for V, the o third for O, the padded lengths for
// both sides and the bucketed max_token_per_sequence as the graph's S. So a
// wrong elements-per-token or a stale packed indptr reaches the vendor
// kernel as it would in SGLang, after the harness's bounds check has caught
// anything that would leave a buffer.
//
// Graphs are cached under SdpaGraphKey; counters() reports the cache's
// builds and hits. Without a device the backend is Unavailable, and
// Supports() still answers from a deviceless validation for sm_90.

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "device_params.h"
#include "graph_cache.h"
#include "sdpa_graph.h"
#include "sdpa_layout.h"
#include "varlen/backend/backend.h"

namespace varlen::cudnn_kernels {
namespace {

using cuda_kernels::CudaDeviceUsable;
using cuda_kernels::CudaStatus;

// The architecture a deviceless validation assumes (what SGLang's vision
// path runs on).
constexpr int kDevicelessSmVersion = 90;

// One cuDNN handle on the current device, created on first use.
struct Device {
  cudnnHandle_t handle = nullptr;
  int index = 0;
};

absl::StatusOr<Device> CurrentDevice() {
  static const absl::StatusOr<Device> device = []() -> absl::StatusOr<Device> {
    if (absl::Status usable = CudaDeviceUsable(); !usable.ok()) return usable;
    Device d;
    cudaGetDevice(&d.index);
    if (cudnnStatus_t s = cudnnCreate(&d.handle); s != CUDNN_STATUS_SUCCESS) {
      return absl::UnavailableError(
          absl::StrCat("cudnnCreate: ", cudnnGetErrorString(s), "; ", CudnnVersions()));
    }
    return d;
  }();
  return device;
}

class CudnnBackend final : public Backend {
 public:
  CudnnBackend()
      : graphs_([](const SdpaGraphKey& key) -> absl::StatusOr<std::shared_ptr<SdpaGraph>> {
          absl::StatusOr<Device> device = CurrentDevice();
          if (!device.ok()) return device.status();
          return SdpaGraph::Build(key, device->handle);
        }) {}

  absl::string_view name() const override { return "cudnn"; }
  absl::string_view description() const override {
    return "cuDNN SDPA forward (frontend graph API): ragged offsets on Q, K, V and O with the "
           "padding mask, as FlashInfer's cudnn_batch_prefill_with_kv_cache builds it";
  }
  BackendCapabilities capabilities() const override {
    return {.input_dtypes = {DType::kBFloat16, DType::kFloat16},
            .max_head_dim = 256,
            .grouped_query_attention = true,
            .distinct_value_head_dim = false,
            .strided_inputs = true,
            .profiles = {Profile::kFlashinferCudnn},
            .device = "cuda"};
  }
  absl::Status Available() const override { return CurrentDevice().status(); }
  absl::Status DeviceHealth() const override { return cuda_kernels::CudaDeviceHealth(); }

  // Everything cuDNN itself refuses is "not supported", with its reason:
  // on a device the graph is built (and cached) here; without one it is
  // validated for sm_90.
  absl::Status Supports(const VarlenAttentionParams& params) const override {
    if (absl::Status s = Backend::Supports(params); !s.ok()) return s;
    if (params.output_dtype != params.input_dtype) {
      return absl::UnimplementedError(absl::StrCat("cuDNN writes O in the input dtype (",
                                                   DTypeName(params.input_dtype), "), not ",
                                                   DTypeName(params.output_dtype)));
    }
    if (absl::StatusOr<RaggedArguments> ragged = RaggedArgumentsFor(params); !ragged.ok()) {
      return absl::UnimplementedError(ragged.status().message());
    }
    absl::StatusOr<Device> device = CurrentDevice();
    if (device.ok()) return graphs_.Get(KeyFor(params, device->index)).status();
    return DevicelessCheck(KeyFor(params, 0));
  }

  absl::Status Run(const VarlenAttentionParams& params) const override {
    absl::StatusOr<Device> device = CurrentDevice();
    if (!device.ok()) return device.status();
    // No query rows: nothing to compute, and cuDNN refuses the null device
    // pointers of empty buffers (CUDNN_STATUS_BAD_PARAM_NULL_POINTER).
    int64_t rows = 0;
    for (int b = 0; b < params.batch; ++b) rows += SequenceAt(params, b).rows;
    if (rows == 0) return absl::OkStatus();
    const SdpaGraphKey key = KeyFor(params, device->index);
    absl::StatusOr<std::shared_ptr<SdpaGraph>> graph = graphs_.Get(key);
    if (!graph.ok()) return graph.status();
    absl::StatusOr<SdpaLaunch> launch = (*graph)->Upload(params);
    if (!launch.ok()) return launch.status();
    {
      // A cuDNN handle is not to be used by two threads at once.
      std::lock_guard<std::mutex> lock(execute_mutex_);
      if (absl::Status s = (*graph)->Execute(device->handle, *launch); !s.ok()) {
        return s;
      }
      if (absl::Status s = CudaStatus(cudaDeviceSynchronize(), "cuDNN SDPA run"); !s.ok()) {
        return s;
      }
    }
    return launch->device.DownloadOutput(params);
  }

  std::vector<BackendCounter> counters() const override {
    const CacheCounters c = graphs_.counters();
    return {{"graph_builds", c.builds}, {"graph_hits", c.hits}};
  }

 private:
  absl::Status DevicelessCheck(const SdpaGraphKey& key) const {
    std::lock_guard<std::mutex> lock(deviceless_mutex_);
    auto [it, inserted] = deviceless_.try_emplace(key);
    if (inserted) it->second = CheckSdpaGraph(key, kDevicelessSmVersion);
    return it->second;
  }

  mutable GraphCache<SdpaGraph> graphs_;
  mutable std::mutex execute_mutex_;
  mutable std::mutex deviceless_mutex_;
  mutable absl::flat_hash_map<SdpaGraphKey, absl::Status> deviceless_;
};

}  // namespace
}  // namespace varlen::cudnn_kernels

VARLEN_BACKEND(cudnn, ::varlen::cudnn_kernels::CudnnBackend)
