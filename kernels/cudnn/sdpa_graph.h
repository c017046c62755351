// One cuDNN SDPA forward graph with ragged offsets on Q, K, V and O and the
// padding mask: what FlashInfer's cudnn_batch_prefill_with_kv_cache builds
// for SGLang's flashinfer_cudnn vision path (non-causal, no LSE kept).
//
// This header hides the cuDNN frontend: only sdpa_graph.cc includes it (a
// heavy, header-only C++ API), so everything else compiles fast and never
// meets the frontend's bundled JSON library.
//
// Without a device, CheckSdpaGraph validates a graph and lowers it to
// cuDNN's backend operation graph for a given architecture: the graph's
// construction is tested on machines with cuDNN and no GPU. Building
// execution plans and running need a device (SdpaGraph::Build).

#ifndef VARLEN_KERNELS_CUDNN_SDPA_GRAPH_H_
#define VARLEN_KERNELS_CUDNN_SDPA_GRAPH_H_

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device_params.h"
#include "graph_cache.h"

namespace varlen::cudnn_kernels {

// Device pointers of one call, bound to the graph's tensors by uid.
struct SdpaBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const void* q_offsets = nullptr;  // key.offset_dtype, B + 1 each
  const void* k_offsets = nullptr;
  const void* v_offsets = nullptr;
  const void* o_offsets = nullptr;
  const void* seq_len_q = nullptr;  // key.seq_len_dtype, B each
  const void* seq_len_kv = nullptr;
};

// One call on the device, ready for SdpaGraph::Execute: `device` owns every
// buffer `buffers` points at, and the graph's workspace.
struct SdpaLaunch {
  cuda_kernels::DeviceParams device;
  SdpaBuffers buffers;
  void* workspace = nullptr;
};

class SdpaGraph {
 public:
  // Builds the graph for `key` on the device behind `handle`: validation,
  // the operation graph, execution plans (heuristics, then fallback), the
  // support check and the chosen plan. Unimplemented with cuDNN's message
  // when cuDNN has no engine for it, Internal for any other failure.
  static absl::StatusOr<std::shared_ptr<SdpaGraph>> Build(const SdpaGraphKey& key,
                                                          cudnnHandle_t handle);
  ~SdpaGraph();
  SdpaGraph(const SdpaGraph&) = delete;
  SdpaGraph& operator=(const SdpaGraph&) = delete;

  int64_t workspace_bytes() const;
  // The SDPA implementation cuDNN chose and the plan's engine name.
  const std::string& description() const;

  // Copies one call to the device: q, k, v and the output buffer, the
  // ragged offsets and lengths (RaggedArgumentsFor) in the key's integer
  // dtypes, and a workspace for this graph. InvalidArgument for misaligned
  // offsets.
  absl::StatusOr<SdpaLaunch> Upload(const VarlenAttentionParams& host) const;

  // Enqueues the graph on `handle`'s stream.
  absl::Status Execute(cudnnHandle_t handle, const SdpaLaunch& launch) const;

 private:
  struct Impl;
  explicit SdpaGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Without a device: validates the graph for `key` as it would be built for
// compute capability `sm_version` (90 for sm_90) and lowers it to cuDNN's
// operation graph. OK, or Unimplemented with cuDNN's reason. Limits that
// cuDNN reads off the device's properties (the largest head dim) are only
// checked by Build.
absl::Status CheckSdpaGraph(const SdpaGraphKey& key, int sm_version);

// "cuDNN 9.19.0 (frontend 1.32.0)": the versions this binary runs with.
std::string CudnnVersions();

}  // namespace varlen::cudnn_kernels

#endif  // VARLEN_KERNELS_CUDNN_SDPA_GRAPH_H_
