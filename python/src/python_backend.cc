#include "python_backend.h"

#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nanobind/stl/string.h"
#include "varlen/contract/resolve.h"
#include "varlen/core/status.h"

namespace nb = nanobind;

namespace varlen::python {
namespace {

// Rows of a [tokens, heads, dim] buffer of `numel` elements addressed with
// these strides (the last dim contiguous).
int64_t RowsOf(int64_t numel, int64_t token_stride, int64_t heads, int64_t head_stride,
               int64_t dim) {
  const int64_t row = (heads - 1) * head_stride + dim;
  if (numel < row || token_stride <= 0) return 0;
  return (numel - row) / token_stride + 1;
}

// A [tokens, heads, dim] view of a launch's buffer of `numel` elements,
// borrowed for the duration of one call into Python: the owner keeps no
// storage alive, so a backend must not keep its arguments.
nb::object Borrowed(const void* data, DType dtype, int64_t numel, int64_t heads, int64_t dim,
                    int64_t token_stride, int64_t head_stride) {
  const size_t shape[3] = {
      static_cast<size_t>(RowsOf(numel, token_stride, heads, head_stride, dim)),
      static_cast<size_t>(heads), static_cast<size_t>(dim)};
  const int64_t strides[3] = {token_stride, head_stride, 1};
  nb::capsule owner(data, [](void*) noexcept {});
  return nb::cast(
      nb::ndarray<>(const_cast<void*>(data), 3, shape, owner, strides, DLPackDType(dtype)));
}

nb::object Int32Array(const std::vector<int32_t>& values) {
  auto* copy = new std::vector<int32_t>(values);
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<int32_t>*>(p); });
  const size_t shape[1] = {copy->size()};
  return nb::cast(nb::ndarray<>(copy->data(), 1, shape, owner, nullptr, nb::dtype<int32_t>()));
}

std::string PythonErrorText(const nb::python_error& e) {
  nb::gil_scoped_acquire gil;
  std::string type = nb::cast<std::string>(e.type().attr("__name__"));
  std::string message = nb::cast<std::string>(nb::str(e.value()));
  return message.empty() ? type : absl::StrCat(type, ": ", message);
}

// A Value as the bridge reads it: plain Python values, a tensor as
// {"__tensor__": array, "device": ..., "id": n} (one id per storage, so that
// one tensor passed twice stays one object), a SingletonCache as
// {"__cache__": tensor-or-None}.
class CallDescriber {
 public:
  nb::object Tensor(const varlen::Tensor& t) {
    nb::dict d;
    const auto key = std::make_pair(t.has_storage() ? t.data<void>() : nullptr, t.shape());
    auto [it, inserted] = ids_.try_emplace(key, static_cast<int>(ids_.size()));
    d["__tensor__"] = TensorToArray(t);
    d["device"] = std::string(DeviceName(t.device()));
    d["id"] = it->second;
    return d;
  }

  nb::object Of(const Value& value) {
    switch (value.kind()) {
      case Value::Kind::kNone:
        return nb::none();
      case Value::Kind::kBool:
        return nb::bool_(value.as_bool());
      case Value::Kind::kInt:
        return nb::int_(value.as_int());
      case Value::Kind::kFloat:
        return nb::float_(value.as_float());
      case Value::Kind::kStr:
        return nb::str(value.as_str().c_str());
      case Value::Kind::kTensor:
        return Tensor(value.as_tensor());
      case Value::Kind::kList: {
        nb::list items;
        for (const Value& item : value.as_list()) items.append(Of(item));
        return items;
      }
      case Value::Kind::kSingletonCache: {
        nb::dict d;
        const auto& data = value.as_cache()->data;
        d["__cache__"] = data.has_value() ? Tensor(*data) : nb::none();
        return d;
      }
    }
    return nb::none();
  }

 private:
  std::map<std::pair<const void*, Shape>, int> ids_;
};

}  // namespace

absl::StatusOr<CuSeqlensLaunch> AsCuSeqlens(const VarlenAttentionParams& p) {
  CuSeqlensLaunch launch;
  launch.cu_seqlens.push_back(0);
  int64_t next = 0;
  for (int b = 0; b < p.batch; ++b) {
    const int64_t rows = p.seqlen_q[b], keys = p.seqlen_k[b];
    if (rows != keys) {
      return absl::UnimplementedError(
          absl::StrCat("sequence ", b, " has ", rows, " queries and ", keys,
                       " keys: a Python kernel takes one cu_seqlens for both"));
    }
    if (rows > p.max_rows_q || keys > p.max_keys) {
      return absl::UnimplementedError(absl::StrCat(
          "the launch computes ", std::min(rows, p.max_rows_q), " of the ", rows,
          " rows of sequence ", b, " (max_seqlen ", p.max_rows_q,
          "): a Python kernel takes cu_seqlens and max lengths, and each kernel truncates its "
          "own way"));
    }
    if (rows > 0) {
      const struct {
        const char* name;
        int64_t start, stride;
      } tensors[] = {{"q", p.q_start[b], p.q_token_stride},
                     {"k", p.k_start[b], p.k_token_stride},
                     {"v", p.v_start[b], p.v_token_stride},
                     {"o", p.o_start[b], p.o_token_stride}};
      for (const auto& t : tensors) {
        if (t.start != next * t.stride) {
          return absl::UnimplementedError(absl::StrCat(
              "sequence ", b, " starts at element ", t.start, " of ", t.name, ", not at token ",
              next, " (element ", next * t.stride,
              "): a Python kernel takes sequences packed back to back at whole tokens"));
        }
      }
    }
    next += rows;
    if (next > std::numeric_limits<int32_t>::max()) {
      return absl::UnimplementedError(
          absl::StrCat(next, " tokens: int32 cu_seqlens cannot hold the offsets"));
    }
    launch.cu_seqlens.push_back(static_cast<int32_t>(next));
    launch.max_seqlen = std::max(launch.max_seqlen, rows);
  }
  launch.tokens = next;
  return launch;
}

nb::dlpack::dtype DLPackDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return nb::dtype<float>();
    case DType::kFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::kBFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case DType::kFloat64:
      return nb::dtype<double>();
    case DType::kInt16:
      return nb::dtype<int16_t>();
    case DType::kInt32:
      return nb::dtype<int32_t>();
    case DType::kInt64:
      return nb::dtype<int64_t>();
    case DType::kBool:
      return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

absl::StatusOr<DType> FromDLPack(nb::dlpack::dtype dtype, const std::string& what) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(dtype.code);
  if (dtype.lanes == 1) {
    if (code == Code::Float && dtype.bits == 32) return DType::kFloat32;
    if (code == Code::Float && dtype.bits == 16) return DType::kFloat16;
    if (code == Code::Bfloat && dtype.bits == 16) return DType::kBFloat16;
    if (code == Code::Float && dtype.bits == 64) return DType::kFloat64;
    if (code == Code::Int && dtype.bits == 16) return DType::kInt16;
    if (code == Code::Int && dtype.bits == 32) return DType::kInt32;
    if (code == Code::Int && dtype.bits == 64) return DType::kInt64;
    if (code == Code::Bool && dtype.bits == 8) return DType::kBool;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, " has DLPack dtype code ", int{dtype.code}, " with ", int{dtype.bits},
      " bits: it must be float32, float16, bfloat16, float64, int16, int32, int64 or bool"));
}

nb::object TensorToArray(const Tensor& t) {
  std::vector<size_t> shape;
  for (int64_t n : t.shape()) shape.push_back(static_cast<size_t>(n));
  if (!t.has_storage()) {
    throw nb::value_error(absl::StrCat("a tensor of shape ", ShapeToString(t.shape()),
                                       " has no storage (too large for this harness to allocate)")
                              .c_str());
  }
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  return nb::cast(nb::ndarray<>(keep->mutable_data<void>(), shape.size(), shape.data(), owner,
                                t.strides().data(), DLPackDType(t.dtype())));
}

absl::StatusOr<Tensor> ArrayToTensor(nb::handle array, const std::string& what) {
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(array, a)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a ", nb::cast<std::string>(nb::type_name(array.type())),
                     ", not a tensor or array"));
  }
  if (a.device_type() != nb::device::cpu::value) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is on DLPack device ", a.device_type(), ", not the CPU"));
  }
  absl::StatusOr<DType> dtype = FromDLPack(a.dtype(), what);
  if (!dtype.ok()) return dtype.status();
  Shape shape;
  for (size_t i = 0; i < a.ndim(); ++i) shape.push_back(static_cast<int64_t>(a.shape(i)));
  Tensor t = Tensor::Zeros(*dtype, Device::kCpu, shape);
  const size_t size = DTypeSize(*dtype);
  const auto* from = static_cast<const unsigned char*>(a.data());
  auto* to = t.mutable_data<unsigned char>();
  const int64_t n = t.numel();
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset += index[d] * a.stride(d);
    std::memcpy(to + i * size, from + offset * static_cast<int64_t>(size), size);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return t;
}

PythonBackend::PythonBackend(PythonBackendSpec spec, nb::object adapter)
    : spec_(std::move(spec)), adapter_(std::move(adapter)) {}

PythonBackend::~PythonBackend() {
  // The registry outlives nothing but the interpreter: drop the reference
  // only while Python still runs.
  if (Py_IsInitialized()) {
    nb::gil_scoped_acquire gil;
    adapter_.reset();
  } else {
    adapter_.release();
  }
}

absl::Status PythonBackend::Available() const {
  nb::gil_scoped_acquire gil;
  try {
    const std::string why = nb::cast<std::string>(adapter_.attr("available")());
    if (why.empty()) return absl::OkStatus();
    return absl::UnavailableError(why);
  } catch (const nb::python_error& e) {
    return absl::UnavailableError(absl::StrCat("available() raised ", PythonErrorText(e)));
  }
}

absl::Status PythonBackend::Supports(const VarlenAttentionParams& params) const {
  VARLEN_RETURN_IF_ERROR(Backend::Supports(params));
  return AsCuSeqlens(params).status();
}

absl::Status PythonBackend::Run(const VarlenAttentionParams& p) const {
  absl::StatusOr<CuSeqlensLaunch> launch = AsCuSeqlens(p);
  if (!launch.ok()) return launch.status();
  nb::gil_scoped_acquire gil;
  try {
    adapter_.attr("run_launch")(Borrowed(p.q, p.input_dtype, p.q_numel, p.num_heads_q,
                                         p.head_dim_qk, p.q_token_stride, p.q_head_stride),
                                Borrowed(p.k, p.input_dtype, p.k_numel, p.num_heads_kv,
                                         p.head_dim_qk, p.k_token_stride, p.k_head_stride),
                                Borrowed(p.v, p.input_dtype, p.v_numel, p.num_heads_kv,
                                         p.head_dim_v, p.v_token_stride, p.v_head_stride),
                                Borrowed(p.o, p.output_dtype, p.o_numel, p.num_heads_q,
                                         p.head_dim_v, p.o_token_stride, p.o_head_stride),
                                Int32Array(launch->cu_seqlens), Int32Array(launch->cu_seqlens),
                                launch->max_seqlen, launch->max_seqlen, p.softmax_scale);
  } catch (const nb::python_error& e) {
    return absl::InternalError(absl::StrCat(spec_.name, " raised ", PythonErrorText(e)));
  }
  return absl::OkStatus();
}

nb::dict DescribeCall(const AttentionCall& call, Profile profile) {
  const AttentionCall seen = BackendCallOf(call, profile);
  CallDescriber describe;
  nb::dict d;
  d["profile"] = std::string(ProfileName(profile));
  const bool vllm = EngineOf(profile) == Engine::kVllm;
  d["engine"] = std::string(EngineName(EngineOf(profile)));
  d["version"] = std::string(call.version.name());
  if (vllm) {
    // MMEncoderAttention(num_heads, head_size, scale=..., num_kv_heads=...).
    nb::dict layer;
    layer["num_heads"] = call.vllm_layer.num_heads;
    layer["head_size"] = call.vllm_layer.head_size;
    layer["num_kv_heads"] = call.vllm_layer.num_kv_heads;
    layer["scale"] = call.vllm_layer.scale.has_value()
                         ? nb::object(nb::float_(*call.vllm_layer.scale))
                         : nb::none();
    d["vllm_layer"] = layer;
  }
  d["entry"] = std::string(EntryName(call.entry));
  // transformers' layer: whether the rotary embedding made q and k dense.
  d["rotary"] = call.rotary;
  // transformers' tower: its window config (None: one segment per frame).
  if (call.tower_windows.has_value()) {
    nb::dict windows;
    windows["window_size"] = call.tower_windows->window_size;
    windows["patch_size"] = call.tower_windows->patch_size;
    windows["spatial_merge_size"] = call.tower_windows->spatial_merge_size;
    d["windows"] = windows;
  } else {
    d["windows"] = nb::none();
  }
  d["graph_mode"] = call.graph_mode;
  d["q"] = describe.Tensor(seen.q);
  d["k"] = describe.Tensor(seen.k);
  d["v"] = describe.Tensor(seen.v);
  d["bsz"] = seen.bsz;
  d["seq_len"] = seen.seq_len;
  d["cu_seqlens"] = describe.Of(seen.cu_seqlens);
  nb::dict kwargs;
  for (const auto& [key, value] : seen.kwargs.items()) kwargs[key.c_str()] = describe.Of(value);
  d["kwargs"] = kwargs;
  if (seen.forward_metadata.has_value()) {
    const VisionAttentionMetadata& m = *seen.forward_metadata;
    nb::dict fields;
    fields["cu_seqlens"] = describe.Of(m.cu_seqlens);
    fields["seq_lens"] = describe.Of(m.seq_lens);
    fields["max_seqlen"] = describe.Of(m.max_seqlen);
    fields["packed_indptrs"] = describe.Of(m.packed_indptrs);
    fields["sequence_lengths"] = describe.Of(m.sequence_lengths);
    fields["flashinfer_max_seqlen"] = describe.Of(m.flashinfer_max_seqlen);
    d["forward_metadata"] = fields;
  } else {
    d["forward_metadata"] = nb::none();
  }
  nb::dict sdpa;
  sdpa["flatten_batch"] = seen.sdpa.flatten_batch;
  sdpa["softmax_in_single_precision"] = seen.sdpa.softmax_in_single_precision;
  // The backend object is constructed as its caller constructs it: through
  // the layer, VisionAttention hands the constructor its own softmax_scale.
  if (call.entry == Entry::kLayer) {
    sdpa["softmax_scale"] = describe.Of(call.kwargs.get("softmax_scale"));
  } else {
    sdpa["softmax_scale"] = seen.sdpa.softmax_scale.has_value()
                                ? nb::object(nb::float_(*seen.sdpa.softmax_scale))
                                : nb::none();
  }
  d["sdpa"] = sdpa;
  return d;
}

namespace {

// The calls of a function the engine makes (FunctionCallsOf), each with its
// q, k and v token views, its keywords, and how the caller takes its result.
absl::Status DescribeFunctionCalls(const AttentionCall& call, Profile profile, nb::dict d) {
  absl::StatusOr<FunctionCalls> calls = FunctionCallsOf(call, profile);
  if (!calls.ok()) return calls.status();
  CallDescriber describe;
  nb::list described;
  for (const FunctionCall& fn : calls->calls) {
    nb::dict c;
    c["q"] = describe.Tensor(fn.call.q);
    c["k"] = describe.Tensor(fn.call.k);
    c["v"] = describe.Tensor(fn.call.v);
    nb::dict kwargs;
    for (const auto& [key, value] : fn.call.kwargs.items())
      kwargs[key.c_str()] = describe.Of(value);
    c["kwargs"] = kwargs;
    c["unpacks_result"] = fn.unpacks_result;
    described.append(c);
  }
  nb::dict module;
  for (const auto& [key, value] : calls->module.items()) module[key.c_str()] = describe.Of(value);
  d["function_calls"] = described;
  d["module"] = module;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineCallResult> PythonBackend::CallEngine(const AttentionCall& call,
                                                           Profile profile) const {
  nb::gil_scoped_acquire gil;
  try {
    const nb::dict d = DescribeCall(call, profile);
    if (CallsFunctions(profile)) VARLEN_RETURN_IF_ERROR(DescribeFunctionCalls(call, profile, d));
    const nb::dict r = nb::cast<nb::dict>(adapter_.attr("call")(d));
    EngineCallResult result;
    if (!r["raised"].is_none()) {
      const nb::tuple raised = nb::cast<nb::tuple>(r["raised"]);
      result.raised_type = nb::cast<std::string>(raised[0]);
      result.raised_message = nb::cast<std::string>(raised[1]);
    }
    if (!r["output"].is_none()) {
      absl::StatusOr<varlen::Tensor> output = ArrayToTensor(r["output"], "forward's output");
      if (!output.ok()) return output.status();
      result.output = *std::move(output);
    }
    if (!r["device_events"].is_none()) {
      const nb::dict events = nb::cast<nb::dict>(r["device_events"]);
      DeviceEventCounts counts;
      counts.host_syncs = nb::cast<int>(events["host_syncs"]);
      counts.host_to_device_copies = nb::cast<int>(events["host_to_device_copies"]);
      counts.device_to_host_copies = nb::cast<int>(events["device_to_host_copies"]);
      result.device_events = counts;
    }
    return result;
  } catch (const nb::python_error& e) {
    return absl::InternalError(
        absl::StrCat("the harness's call into ", spec_.name, " failed: ", PythonErrorText(e)));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("the harness's call into ", spec_.name, " failed: ", e.what()));
  }
}

}  // namespace varlen::python
