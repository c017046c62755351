// The only file that includes the cuDNN frontend (see sdpa_graph.h).
// CUDNN_FRONTEND_SKIP_JSON_LIB is set by the build: it leaves out the
// frontend's bundled JSON library (serialization and JSON logging), which
// halves this file's compile cost.

#include "sdpa_graph.h"

#include <cudnn_frontend.h>

#include <cstring>
#include <exception>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sdpa_layout.h"

namespace varlen::cudnn_kernels {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// Tensor uids of the variant pack.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kQOffsets,
  kKOffsets,
  kVOffsets,
  kOOffsets,
  kSeqLenQ,
  kSeqLenKv,
};

fe::DataType_t FrontendType(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return fe::DataType_t::BFLOAT16;
    case DType::kFloat16:
      return fe::DataType_t::HALF;
    case DType::kFloat32:
      return fe::DataType_t::FLOAT;
    case DType::kInt32:
      return fe::DataType_t::INT32;
    case DType::kInt64:
      return fe::DataType_t::INT64;
    default:
      return fe::DataType_t::NOT_SET;
  }
}

// error_t's accessors are not const; take it by value.
absl::Status FrontendStatus(fe::error_t error, absl::string_view step) {
  if (error.is_good()) return absl::OkStatus();
  // Refusals of the launch's geometry are "not supported": cuDNN's own
  // checks, and its backend refusing a descriptor while the operation graph
  // is built (seen on an H200: the strides of a batch whose longest
  // sequence has one token and one head, where B, H and S all get the
  // stride of a token, as FlashInfer's layout gives them too).
  const bool unsupported =
      error.get_code() == fe::error_code_t::GRAPH_NOT_SUPPORTED ||
      error.get_code() == fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED ||
      (error.get_code() == fe::error_code_t::CUDNN_BACKEND_API_FAILED &&
       step == "build_operation_graph");
  std::string message = absl::StrCat("cuDNN ", step, ": ", error.get_message());
  return unsupported ? absl::UnimplementedError(message) : absl::InternalError(message);
}

TensorPtr Integers(fe::graph::Graph& graph, const char* name, Uid uid, int64_t count, DType dtype) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({count, 1, 1, 1})
                          .set_stride({1, 1, 1, 1})
                          .set_data_type(FrontendType(dtype)));
}

TensorPtr Data(fe::graph::Graph& graph, const char* name, Uid uid, const TensorView4d& view,
               const TensorPtr& ragged_offsets) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({view.dims.begin(), view.dims.end()})
                          .set_stride({view.strides.begin(), view.strides.end()})
                          .set_ragged_offset(ragged_offsets));
}

// The graph for `key`, validated. sm_version > 0 builds it for that
// architecture without asking a device (it must be set before the SDPA node
// is added: nodes copy the graph's context).
absl::StatusOr<std::shared_ptr<fe::graph::Graph>> ValidatedGraph(const SdpaGraphKey& key,
                                                                 int sm_version) {
  if (key.dtype != DType::kBFloat16 && key.dtype != DType::kFloat16) {
    return absl::UnimplementedError(
        absl::StrCat("cuDNN SDPA here takes bfloat16 or float16, not ", DTypeName(key.dtype)));
  }
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(FrontendType(key.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (sm_version > 0) graph->set_sm_version(sm_version);

  const int64_t batch = key.batch;
  const SdpaTensorViews views = ViewsFor(key);
  TensorPtr q_offsets = Integers(*graph, "q_offsets", kQOffsets, batch + 1, key.offset_dtype);
  TensorPtr k_offsets = Integers(*graph, "k_offsets", kKOffsets, batch + 1, key.offset_dtype);
  TensorPtr v_offsets = Integers(*graph, "v_offsets", kVOffsets, batch + 1, key.offset_dtype);
  TensorPtr o_offsets = Integers(*graph, "o_offsets", kOOffsets, batch + 1, key.offset_dtype);
  TensorPtr seq_len_q = Integers(*graph, "seq_len_q", kSeqLenQ, batch, key.seq_len_dtype);
  TensorPtr seq_len_kv = Integers(*graph, "seq_len_kv", kSeqLenKv, batch, key.seq_len_dtype);
  TensorPtr q = Data(*graph, "Q", kQ, views.q, q_offsets);
  TensorPtr k = Data(*graph, "K", kK, views.k, k_offsets);
  TensorPtr v = Data(*graph, "V", kV, views.v, v_offsets);

  double scale;
  std::memcpy(&scale, &key.scale_bits, sizeof scale);
  auto attributes = fe::graph::SDPA_attributes()
                        .set_name("varlen_sdpa")
                        .set_generate_stats(false)
                        .set_attn_scale(static_cast<float>(scale))
                        .set_padding_mask(true)
                        .set_seq_len_q(seq_len_q)
                        .set_seq_len_kv(seq_len_kv);
  TensorPtr o;
  try {
    // sdpa() throws when no SDPA implementation fits the attributes.
    auto [output, stats] = graph->sdpa(q, k, v, std::move(attributes));
    o = std::move(output);
  } catch (const std::exception& e) {
    return absl::UnimplementedError(absl::StrCat("cuDNN sdpa: ", e.what()));
  }
  o->set_output(true)
      .set_uid(kO)
      .set_dim({views.o.dims.begin(), views.o.dims.end()})
      .set_stride({views.o.strides.begin(), views.o.strides.end()})
      .set_ragged_offset(o_offsets);
  if (absl::Status s = FrontendStatus(graph->validate(), "validate"); !s.ok()) return s;
  return graph;
}

}  // namespace

struct SdpaGraph::Impl {
  SdpaGraphKey key;
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
  std::string description;
};

SdpaGraph::SdpaGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SdpaGraph::~SdpaGraph() = default;

absl::StatusOr<std::shared_ptr<SdpaGraph>> SdpaGraph::Build(const SdpaGraphKey& key,
                                                            cudnnHandle_t handle) {
  try {
    absl::StatusOr<std::shared_ptr<fe::graph::Graph>> graph = ValidatedGraph(key, 0);
    if (!graph.ok()) return graph.status();
    fe::graph::Graph& g = **graph;
    if (absl::Status s = FrontendStatus(g.build_operation_graph(handle), "build_operation_graph");
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            FrontendStatus(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
                           "create_execution_plans");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = FrontendStatus(g.check_support(handle), "check_support"); !s.ok()) {
      return s;
    }
    if (absl::Status s = FrontendStatus(g.build_plans(handle), "build_plans"); !s.ok()) return s;
    auto impl = std::make_unique<Impl>();
    impl->key = key;
    if (absl::Status s =
            FrontendStatus(g.get_workspace_size(impl->workspace_bytes), "get_workspace_size");
        !s.ok()) {
      return s;
    }
    std::string plan;
    if (g.get_plan_name(plan).is_good()) impl->description = plan;
    impl->graph = std::move(*graph);
    return std::shared_ptr<SdpaGraph>(new SdpaGraph(std::move(impl)));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cuDNN graph build threw: ", e.what()));
  }
}

int64_t SdpaGraph::workspace_bytes() const { return impl_->workspace_bytes; }
const std::string& SdpaGraph::description() const { return impl_->description; }

absl::StatusOr<SdpaLaunch> SdpaGraph::Upload(const VarlenAttentionParams& host) const {
  absl::StatusOr<RaggedArguments> ragged = RaggedArgumentsFor(host);
  if (!ragged.ok()) return ragged.status();
  absl::StatusOr<cuda_kernels::DeviceParams> device = cuda_kernels::DeviceParams::Upload(host);
  if (!device.ok()) return device.status();
  SdpaLaunch launch{.device = *std::move(device), .buffers = {}, .workspace = nullptr};
  const VarlenAttentionParams& d = launch.device.device();
  SdpaBuffers& buffers = launch.buffers;
  buffers.q = d.q, buffers.k = d.k, buffers.v = d.v, buffers.o = d.o;
  const SdpaGraphKey& key = impl_->key;
  const struct {
    const std::vector<int64_t>& values;
    DType dtype;
    const void** to;
  } integers[] = {{ragged->q_offsets, key.offset_dtype, &buffers.q_offsets},
                  {ragged->k_offsets, key.offset_dtype, &buffers.k_offsets},
                  {ragged->v_offsets, key.offset_dtype, &buffers.v_offsets},
                  {ragged->o_offsets, key.offset_dtype, &buffers.o_offsets},
                  {ragged->seq_len_q, key.seq_len_dtype, &buffers.seq_len_q},
                  {ragged->seq_len_kv, key.seq_len_dtype, &buffers.seq_len_kv}};
  for (const auto& integer : integers) {
    const std::vector<uint8_t> bytes = EncodeIntegers(integer.values, integer.dtype);
    absl::StatusOr<void*> copied = launch.device.Copy(bytes.data(), bytes.size());
    if (!copied.ok()) return copied.status();
    *integer.to = *copied;
  }
  absl::StatusOr<void*> workspace =
      launch.device.Allocate(static_cast<size_t>(impl_->workspace_bytes));
  if (!workspace.ok()) return workspace.status();
  launch.workspace = *workspace;
  return launch;
}

absl::Status SdpaGraph::Execute(cudnnHandle_t handle, const SdpaLaunch& launch) const {
  const SdpaBuffers& b = launch.buffers;
  void* workspace = launch.workspace;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(b.q)},
      {kK, const_cast<void*>(b.k)},
      {kV, const_cast<void*>(b.v)},
      {kO, b.o},
      {kQOffsets, const_cast<void*>(b.q_offsets)},
      {kKOffsets, const_cast<void*>(b.k_offsets)},
      {kVOffsets, const_cast<void*>(b.v_offsets)},
      {kOOffsets, const_cast<void*>(b.o_offsets)},
      {kSeqLenQ, const_cast<void*>(b.seq_len_q)},
      {kSeqLenKv, const_cast<void*>(b.seq_len_kv)},
  };
  try {
    return FrontendStatus(impl_->graph->execute(handle, pack, workspace), "execute");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cuDNN execute threw: ", e.what()));
  }
}

absl::Status CheckSdpaGraph(const SdpaGraphKey& key, int sm_version) {
  try {
    absl::StatusOr<std::shared_ptr<fe::graph::Graph>> graph = ValidatedGraph(key, sm_version);
    if (!graph.ok()) return graph.status();
    return FrontendStatus((*graph)->build_operation_graph(nullptr), "build_operation_graph");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cuDNN graph construction threw: ", e.what()));
  }
}

std::string CudnnVersions() {
  const size_t runtime = cudnnGetVersion();
  return absl::StrCat("cuDNN ", runtime / 10000, ".", runtime / 100 % 100, ".", runtime % 100,
                      " (built with ", CUDNN_MAJOR, ".", CUDNN_MINOR, ".", CUDNN_PATCHLEVEL,
                      ", frontend ", CUDNN_FRONTEND_MAJOR_VERSION, ".",
                      CUDNN_FRONTEND_MINOR_VERSION, ".", CUDNN_FRONTEND_PATCH_VERSION, ")");
}

}  // namespace varlen::cudnn_kernels
