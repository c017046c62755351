#include "varlen/backend/bind.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "varlen/core/status.h"

namespace varlen {

Tensor KernelCall::PackedOutput() const {
  const VarlenAttentionParams& p = base_;
  const Shape packed_shape = {output_.size(0), p.num_heads_q, p.head_dim_v};
  const Shape strides = ContiguousStrides(packed_shape);
  if (p.o_token_stride == strides[0] && p.o_head_stride == strides[1]) return output_;
  // Copy bytes, not values: the poison's NaN payload must survive.
  Tensor packed = Tensor::Zeros(output_.dtype(), output_.device(), packed_shape);
  const size_t size = DTypeSize(output_.dtype());
  const unsigned char* from = output_.data<unsigned char>();
  unsigned char* to = packed.mutable_data<unsigned char>();
  for (int64_t t = 0; t < packed_shape[0]; ++t) {
    for (int64_t h = 0; h < p.num_heads_q; ++h) {
      for (int64_t d = 0; d < p.head_dim_v; ++d) {
        const int64_t source = t * p.o_token_stride + h * p.o_head_stride + d;
        std::memcpy(to + ((t * p.num_heads_q + h) * p.head_dim_v + d) * size, from + source * size,
                    size);
      }
    }
  }
  return packed;
}

std::optional<LaunchShape> KernelCall::Launch() const {
  const VarlenAttentionParams p = params();
  if (!host_rows_.empty() || !CheckKernelBounds(p).ok()) return std::nullopt;
  const struct {
    const Tensor& tensor;
    int64_t token_stride, head_stride;
  } read[] = {{q_, p.q_token_stride, p.q_head_stride},
              {k_, p.k_token_stride, p.k_head_stride},
              {v_, p.v_token_stride, p.v_head_stride}};
  for (const auto& r : read) {
    if (r.tensor.dim() != 3 || r.tensor.strides()[0] != r.token_stride ||
        r.tensor.strides()[1] != r.head_stride) {
      return std::nullopt;
    }
  }
  LaunchShape shape{.heads_q = p.num_heads_q,
                    .heads_kv = p.num_heads_kv,
                    .head_dim_qk = p.head_dim_qk,
                    .head_dim_v = p.head_dim_v,
                    .input_dtype = p.input_dtype,
                    .softmax_scale = p.softmax_scale,
                    .output_rows = output_.size(0),
                    .sequences = {},
                    .window_left = p.window_left,
                    .window_right = p.window_right,
                    .sinks = sinks_};
  // Row r of a tensor with this token stride, or -1 when `offset` is not one.
  auto row = [](int64_t offset, int64_t token_stride) -> int64_t {
    return token_stride > 0 && offset % token_stride == 0 ? offset / token_stride : -1;
  };
  for (int b = 0; b < p.batch; ++b) {
    const SequenceView s = SequenceAt(p, b);
    if (s.rows == 0) continue;
    const LaunchShape::Sequence rows{row(s.q_offset, p.q_token_stride),
                                     s.rows,
                                     s.keys > 0 ? row(s.k_offset, p.k_token_stride) : 0,
                                     s.keys > 0 ? row(s.v_offset, p.v_token_stride) : 0,
                                     s.keys,
                                     row(s.o_offset, p.o_token_stride)};
    if (rows.q_row < 0 || rows.k_row < 0 || rows.v_row < 0 || rows.o_row < 0) return std::nullopt;
    shape.sequences.push_back(rows);
  }
  std::sort(shape.sequences.begin(), shape.sequences.end());
  return shape;
}

void KernelCall::ApplyEpilogue() const {
  const VarlenAttentionParams& p = base_;
  for (const HostRows& u : host_rows_) {
    // softmax in float32 gives 1/keys, rounded to q's dtype before P @ V.
    const double weight = RoundToDType(1.0 / static_cast<double>(u.keys), p.input_dtype);
    for (int h = 0; h < p.num_heads_q; ++h) {
      const int64_t kv_head = KvHeadFor(p, h);
      for (int d = 0; d < p.head_dim_v; ++d) {
        double value = std::numeric_limits<double>::quiet_NaN();
        if (!u.nan) {
          value = 0.0;
          for (int64_t j = 0; j < u.keys; ++j) {
            value += weight * v_.DoubleAt((u.v_start + j) * p.v_token_stride +
                                          kv_head * p.v_head_stride + d);
          }
        }
        for (int64_t r = 0; r < u.rows; ++r) {
          output_.SetDoubleAt((u.o_start + r) * p.o_token_stride + h * p.o_head_stride + d, value);
        }
      }
    }
  }
}

VarlenAttentionParams KernelCall::params() const {
  VarlenAttentionParams p = base_;
  p.q = q_.has_storage() ? q_.data<unsigned char>() : nullptr;
  p.k = k_.has_storage() ? k_.data<unsigned char>() : nullptr;
  p.v = v_.has_storage() ? v_.data<unsigned char>() : nullptr;
  p.o = output_.has_storage() ? output_.mutable_data<unsigned char>() : nullptr;
  p.batch = static_cast<int>(seqlen_q_.size());
  p.q_start = q_start_.data();
  p.k_start = k_start_.data();
  p.v_start = v_start_.data();
  p.o_start = o_start_.data();
  p.seqlen_q = seqlen_q_.data();
  p.seqlen_k = seqlen_k_.data();
  p.sinks = sinks_.empty() ? nullptr : sinks_.data();
  return p;
}

// A buffer the kernel writes, with storage only where q has it: a case too
// big to run forward binds shape-only tensors to check the kernel's entry.
Tensor OutputBufferLike(const Tensor& q, DType dtype, Shape shape) {
  return q.has_storage() ? Tensor::Zeros(dtype, q.device(), std::move(shape))
                         : Tensor::ShapeOnly(dtype, q.device(), std::move(shape));
}

// Assembles a KernelCall for packed [T, H, D] q, k, v and a fresh contiguous
// output [T, Hq, Dv].
class KernelCallBuilder {
 public:
  KernelCallBuilder(const Tensor& q3, const Tensor& k3, const Tensor& v3, double scale,
                    DType output_dtype) {
    call_.q_ = q3;
    call_.k_ = k3;
    call_.v_ = v3;
    call_.output_ = OutputBufferLike(q3, output_dtype, {q3.size(0), q3.size(1), v3.size(2)});
    call_.result_shape_ = call_.output_.shape();
    VarlenAttentionParams& p = call_.base_;
    p.input_dtype = q3.dtype();
    p.output_dtype = output_dtype;
    // A view of a wider buffer (a fused projection output) lets a kernel
    // reach past its last logical element: the bounds are the buffer's.
    p.q_numel = q3.extent();
    p.k_numel = k3.extent();
    p.v_numel = v3.extent();
    p.o_numel = call_.output_.extent();
    SetStrides(q3, &p.q_token_stride, &p.q_head_stride);
    SetStrides(k3, &p.k_token_stride, &p.k_head_stride);
    SetStrides(v3, &p.v_token_stride, &p.v_head_stride);
    SetStrides(call_.output_, &p.o_token_stride, &p.o_head_stride);
    p.num_heads_q = static_cast<int>(q3.size(1));
    p.num_heads_kv = static_cast<int>(k3.size(1));
    p.head_dim_qk = static_cast<int>(q3.size(2));
    p.head_dim_v = static_cast<int>(v3.size(2));
    p.softmax_scale = scale;
    p.max_rows_q = std::numeric_limits<int64_t>::max();
    p.max_keys = std::numeric_limits<int64_t>::max();
  }

  // A sequence whose first token is token `start` of every tensor. Offsets
  // that do not fit in int64 saturate; the bounds check then refuses them.
  void AddTokenSequence(int64_t start, int64_t length) {
    AddTokenSequence(start, length, start, length);
  }
  // Query rows [q_start, q_start + rows) attending to keys [k_start,
  // k_start + keys) (rows without keys are written as 0).
  void AddTokenSequence(int64_t q_start, int64_t rows, int64_t k_start, int64_t keys) {
    const VarlenAttentionParams& p = call_.base_;
    AddElementSequence(Offset(q_start, p.q_token_stride), Offset(k_start, p.k_token_stride),
                       Offset(k_start, p.v_token_stride), Offset(q_start, p.o_token_stride), rows,
                       keys);
  }

  void AddElementSequence(int64_t q, int64_t k, int64_t v, int64_t o, int64_t length) {
    AddElementSequence(q, k, v, o, length, length);
  }
  void AddElementSequence(int64_t q, int64_t k, int64_t v, int64_t o, int64_t rows, int64_t keys) {
    call_.q_start_.push_back(q);
    call_.k_start_.push_back(k);
    call_.v_start_.push_back(v);
    call_.o_start_.push_back(o);
    call_.seqlen_q_.push_back(rows);
    call_.seqlen_k_.push_back(keys);
  }

  // Output rows [o_start, o_start + rows) that the library, not the kernel,
  // fills with the mean of values [v_start, v_start + keys) (equal weights).
  void AddUniformRows(int64_t o_start, int64_t rows, int64_t v_start, int64_t keys) {
    call_.host_rows_.push_back({o_start, rows, v_start, keys, /*nan=*/false});
  }
  // Output rows the library fills with NaN.
  void AddNanRows(int64_t o_start, int64_t rows) {
    call_.host_rows_.push_back({o_start, rows, 0, 0, /*nan=*/true});
  }

  // The kernel addresses q, k and v as dense [T, H, D] whatever their real
  // strides (cuDNN's graph is built with the packed strides H*D, D, 1).
  // REQUIRES: no sequence added yet.
  void AssumeDenseInputs() {
    VarlenAttentionParams& p = call_.base_;
    for (auto [token, head, heads, dim] :
         {std::tuple{&p.q_token_stride, &p.q_head_stride, p.num_heads_q, p.head_dim_qk},
          std::tuple{&p.k_token_stride, &p.k_head_stride, p.num_heads_kv, p.head_dim_qk},
          std::tuple{&p.v_token_stride, &p.v_head_stride, p.num_heads_kv, p.head_dim_v}}) {
      *token = int64_t{heads} * dim;
      *head = dim;
    }
  }

  // The kernel computes `variant` (a window, sinks) rather than full attention.
  // REQUIRES: no sinks, or one per query head.
  void SetVariant(const AttentionVariant& variant) {
    call_.base_.window_left = variant.window_left;
    call_.base_.window_right = variant.window_right;
    call_.sinks_ = variant.sinks;
  }

  void LimitRows(int64_t max_rows_q) { call_.base_.max_rows_q = max_rows_q; }
  void LimitKeys(int64_t max_keys) { call_.base_.max_keys = max_keys; }
  // The kernel writes into `output` with its own strides (a workspace).
  // REQUIRES: no sequence added yet (their o offsets use these strides).
  void SetOutput(Tensor output) {
    call_.output_ = std::move(output);
    call_.result_shape_ = call_.output_.shape();
    call_.base_.o_numel = call_.output_.extent();
    SetStrides(call_.output_, &call_.base_.o_token_stride, &call_.base_.o_head_stride);
  }
  void SetResultShape(Shape shape) { call_.result_shape_ = std::move(shape); }
  // The kernel writes into `buffer` with strides of its own choosing (not
  // the buffer's), bounded by the buffer's extent.
  // REQUIRES: no sequence added yet.
  void SetOutputBuffer(Tensor buffer, int64_t token_stride, int64_t head_stride) {
    SetOutput(std::move(buffer));
    call_.base_.o_token_stride = token_stride;
    call_.base_.o_head_stride = head_stride;
  }

  KernelCall Finish(std::string description) {
    call_.description_ = std::move(description);
    return std::move(call_);
  }

 private:
  static int64_t Offset(int64_t token, int64_t stride) {
    int64_t offset;
    if (!__builtin_mul_overflow(token, stride, &offset)) return offset;
    return (token < 0) == (stride < 0) ? std::numeric_limits<int64_t>::max()
                                       : std::numeric_limits<int64_t>::min();
  }

  static void SetStrides(const Tensor& t, int64_t* token_stride, int64_t* head_stride) {
    *token_stride = t.strides()[0];
    *head_stride = t.strides()[1];
  }

  KernelCall call_;
};

namespace {

// Rows a grid of ceil(max_seqlen / block) row blocks covers.
int64_t GridRows(int64_t max_seqlen, int64_t block) {
  if (max_seqlen <= 0) return 0;
  if (max_seqlen > std::numeric_limits<int64_t>::max() - block) return max_seqlen;  // no wrap
  return (max_seqlen + block - 1) / block * block;
}

// A Python int argument of a kernel entry point (bool is an int in Python).
absl::StatusOr<int64_t> IntArgument(const Value& value, absl::string_view function,
                                    absl::string_view argument) {
  if (value.kind() == Value::Kind::kInt) return value.as_int();
  if (value.kind() == Value::Kind::kBool) return value.as_bool() ? 1 : 0;
  return PythonError(
      PyErrorKind::kTypeError,
      absl::StrCat(function, "(): argument '", argument, "' must be int, not ", value.TypeName()));
}

absl::StatusOr<KernelCall> BindFlashinferCudnn(const ResolvedArgs& resolved,
                                               const FlashinferCudnnArgs& args) {
  const Tensor q3 = FlattenBatch(resolved.q), k3 = FlattenBatch(resolved.k),
               v3 = FlattenBatch(resolved.v);
  KernelCallBuilder builder(q3, k3, v3, args.scale, q3.dtype());
  if (!args.inputs_as_strided) {
    builder.AssumeDenseInputs();
  } else {
    // vLLM's output buffer is torch.empty_like(q) (vit_attn_wrappers.py,
    // flashinfer_wrapper), while cuDNN's graph writes O dense with v's head
    // size (flashinfer/cudnn/prefill.py: O's stride (.., d_vo, d_vo * h_qo,
    // 1)) from batch_offsets_o, q's offsets: a v head size other than q's
    // writes past the buffer or leaves it misplaced.
    const int64_t heads = q3.size(1), dim_v = v3.size(2);
    builder.SetOutputBuffer(OutputBufferLike(q3, q3.dtype(), q3.shape()), heads * dim_v, dim_v);
  }
  const int64_t batch = args.actual_seq_lens.numel();
  for (const Tensor* t : {&args.actual_seq_lens, &args.batch_offsets_qk, &args.batch_offsets_v,
                          &args.batch_offsets_o}) {
    // vLLM passes them as the caller gave them (SGLang's resolution made
    // them int32 on q's device).
    if (args.inputs_as_strided && (t->dtype() != DType::kInt32 || t->device() != q3.device())) {
      return absl::UnimplementedError(absl::StrCat("cudnn_batch_prefill_with_kv_cache given ",
                                                   DTypeName(t->dtype()), " lengths or offsets on ",
                                                   DeviceName(t->device()),
                                                   ": cuDNN's response is not modelled"));
    }
    if (t != &args.actual_seq_lens && t->numel() < batch) {
      return absl::OutOfRangeError(absl::StrCat("cudnn_batch_prefill_with_kv_cache reads ", batch,
                                                " offsets per section (one per "
                                                "entry of actual_seq_lens) but a section has ",
                                                t->numel(),
                                                ": the kernel would read past the buffer"));
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    // Device-side reads by the kernel: no host sync. k shares q's offsets.
    const int64_t qk = args.batch_offsets_qk.IntAt(b);
    builder.AddElementSequence(qk, qk, args.batch_offsets_v.IntAt(b), args.batch_offsets_o.IntAt(b),
                               args.actual_seq_lens.IntAt(b));
  }
  builder.LimitRows(args.max_token_per_sequence);
  builder.LimitKeys(args.max_sequence_kv);
  if (args.inputs_as_strided) {
    builder.SetResultShape(args.input_shape);  // the buffer, rearranged back to q's form
  } else if (args.output_4d) {
    builder.SetResultShape({args.input_shape[0], args.input_shape[1], q3.size(1), v3.size(2)});
  }
  return builder.Finish(absl::StrCat("cudnn_batch_prefill_with_kv_cache: ", batch,
                                     " sequences, element offsets, "
                                     "max_token_per_sequence=",
                                     args.max_token_per_sequence));
}

absl::StatusOr<Tensor> CuSeqlensArgument(const Value& cu, absl::string_view function,
                                         absl::string_view argument) {
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat(function, "(): argument '", argument, "' must be Tensor, not ",
                                    cu.TypeName()));
  }
  return cu.as_tensor();
}

absl::Status RuntimeError(absl::string_view message) {
  return PythonError(PyErrorKind::kRuntimeError, message);
}

constexpr absl::string_view kCapabilityPayload = "varlen/kernel-capability-limit";

// An error that refuses the geometry (IsKernelCapabilityLimit).
absl::Status CapabilityLimit(absl::string_view message,
                             PyErrorKind kind = PyErrorKind::kRuntimeError) {
  absl::Status status = PythonError(kind, message);
  status.SetPayload(kCapabilityPayload, absl::Cord("1"));
  return status;
}

// FlashAttention's C++ entry checks on cu_seqlens_q, in the order of the
// build: FA2's mha_varlen_fwd checks the dtype, then the device, then
// contiguity; FA3's mha_fwd the device, contiguity, then the dtype.
absl::Status CheckFlashCuSeqlens(const Tensor& cu, const Tensor& q, int fa_version) {
  const bool int32 = cu.dtype() == DType::kInt32, on_device = cu.device() == q.device();
  if (fa_version == 3) {
    if (!on_device) return RuntimeError("cu_seqlens_q must be on CUDA");
    if (!cu.is_contiguous()) return RuntimeError("cu_seqlens_q must be contiguous");
    if (!int32) return RuntimeError("cu_seqlens_q must have dtype torch.int32");
    return absl::OkStatus();
  }
  if (!int32) return RuntimeError("cu_seqlens_q must have dtype int32");
  if (!on_device) return RuntimeError("cu_seqlens_q must be on CUDA");
  if (!cu.is_contiguous()) return RuntimeError("cu_seqlens_q must be contiguous");
  return absl::OkStatus();
}

// The entry checks of vLLM's FlashAttention builds (vllm-project/
// flash-attention, whose checks and texts are Dao-AILab/flash-attention
// v2.8.3's; line numbers are v2.8.3's). vLLM's wrapper passes one tensor as
// cu_seqlens_q and cu_seqlens_k, and makes q, k and v contiguous first
// (maybe_contiguous), so the checks on cu_seqlens_k and on q's, k's and v's
// last stride pass whenever those before them do. q, k and v are 3-d here.
//
// Before any size is read: the dtypes, then cu_seqlens_q.
absl::Status CheckFlashDtypesAndCuSeqlens(const ResolvedArgs& call, const Tensor& cu,
                                          int fa_version) {
  const DType dtype = call.q.dtype();
  const bool half = dtype == DType::kFloat16 || dtype == DType::kBFloat16;
  if (!half) {
    return CapabilityLimit(fa_version == 2
                               // csrc/flash_attn/flash_api.cpp:545
                               ? "FlashAttention only support fp16 and bf16 data type"
                               // hopper/flash_api.cpp:680 (this harness has no fp8 dtype)
                               : "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type");
  }
  // csrc/flash_attn/flash_api.cpp:547-548, hopper/flash_api.cpp:686-687
  if (call.k.dtype() != dtype) return CapabilityLimit("query and key must have the same dtype");
  if (call.v.dtype() != dtype) return CapabilityLimit("query and value must have the same dtype");
  // csrc/flash_attn/flash_api.cpp:549-569, hopper/flash_api.cpp:708-710
  return CheckFlashCuSeqlens(cu, call.q, fa_version);
}

// Then the head sizes and shapes, once FA2 has checked the batch.
// `head_pad` columns the Python wrapper added to each of q, k and v.
absl::Status CheckFlashHeadsAndShapes(const ResolvedArgs& call, const Tensor& cu, int fa_version,
                                      int64_t head_pad) {
  const int64_t heads = call.q.size(1), head_size = call.q.size(2) + head_pad;
  const int64_t kv_heads = call.k.size(1), head_size_v = call.v.size(2) + head_pad;
  // csrc/flash_attn/flash_api.cpp:604, hopper/flash_api.cpp:745
  if (head_size > 256) {
    return CapabilityLimit("FlashAttention forward only supports head dimension at most 256");
  }
  if (fa_version == 2 && head_size % 8 != 0) {  // csrc/flash_attn/flash_api.cpp:605
    return CapabilityLimit(
        "query, key, value, and out_ must have a head_size that is a multiple of 8");
  }
  if (kv_heads == 0) {
    return absl::UnimplementedError(
        "num_heads % num_heads_k with no key/value heads divides by zero in the kernel's entry: "
        "not modelled");
  }
  // csrc/flash_attn/flash_api.cpp:606, hopper/flash_api.cpp:746
  if (heads % kv_heads != 0) {
    return CapabilityLimit("Number of heads in key/value must divide number of heads in query");
  }
  // hopper/flash_api.cpp:748-750 (vLLM runs FA3 on Hopper only, so the
  // next check, "Only Hopper supports different V headdim", passes).
  if (fa_version == 3 && head_size_v != head_size &&
      !((head_size > 128 && head_size <= 192 && head_size_v > 96 && head_size_v <= 128) ||
        (head_size <= 64 && head_size_v <= 512))) {
    return CapabilityLimit(
        "If V headdim is different from Q/K dim, we only support Q/K headdim in (128, 192] and V "
        "headdim in (96, 128], or (Q/K <= 64 and V <= 512).");
  }
  // FA2 checks q, k, v, then cu_seqlens (csrc/flash_attn/flash_api.cpp:611-622);
  // FA3 q, cu_seqlens, then k and v (hopper/flash_api.cpp:775-784). q's
  // shape holds by construction (its sizes are read from it).
  const bool k_ok = call.k.size(2) + head_pad == head_size;
  const bool v_ok = call.v.size(0) == call.k.size(0) && call.v.size(1) == kv_heads &&
                    (fa_version == 3 || head_size_v == head_size);
  const bool cu_ok = cu.dim() == 1;
  const absl::Status bad_k = RuntimeError("k must have shape (total_k, num_heads_k, head_size)");
  const absl::Status bad_v =
      RuntimeError(fa_version == 2 ? "v must have shape (total_k, num_heads_k, head_size)"
                                   : "v must have shape (total_k, num_heads_k, head_size_v)");
  const absl::Status bad_cu = RuntimeError("cu_seqlens_q must have shape (batch_size + 1)");
  if (fa_version == 2) {
    if (!k_ok) return bad_k;
    if (!v_ok) return bad_v;
    if (!cu_ok) return bad_cu;
    return absl::OkStatus();
  }
  if (!cu_ok) return bad_cu;
  if (!k_ok) return bad_k;
  if (!v_ok) return bad_v;
  // hopper/flash_api.cpp:819-821 (alignment 8 for fp16 and bf16)
  if (head_size % 8 != 0) return CapabilityLimit("head_size should be a multiple of 8");
  if (head_size_v % 8 != 0) return CapabilityLimit("head_size_v should be a multiple of 8");
  return absl::OkStatus();
}

// The launch of a FlashAttention-family kernel whose entry checks passed.
absl::StatusOr<KernelCall> LaunchFlashVarlen(const ResolvedArgs& call, const FlashVarlenArgs& args,
                                             const Tensor& cu, std::optional<int64_t> max_seqlen) {
  const absl::string_view kFunction = args.kernel;
  const int64_t batch = std::max<int64_t>(cu.numel() - 1, 0);
  KernelCallBuilder builder(call.q, call.k, call.v, args.scale, call.q.dtype());
  builder.SetVariant(args.variant);
  for (int64_t b = 0; b < batch; ++b) {
    // The kernel computes each length in int32: a wrapped offset gives a
    // wrapped length (huge, or negative and then no rows at all).
    const int32_t length = WrapInt32(cu.IntAt(b + 1) - cu.IntAt(b));
    builder.AddTokenSequence(cu.IntAt(b), length);
  }
  const std::string kernel = absl::StrCat(
      kFunction, args.fa_version != 0 ? absl::StrCat(" (FA", args.fa_version, ")") : "",
      args.variant.full() ? "" : absl::StrCat(" with ", args.variant.Describe()));
  if (!max_seqlen.has_value())
    return builder.Finish(absl::StrCat(kernel, ": ", batch, " sequences"));
  // FlashAttention's C++ entry takes `int max_seqlen_q`: the value narrows.
  const int32_t kernel_max = WrapInt32(*max_seqlen);
  if (args.variant.windowed()) {
    // FlashAttention clamps the window's bounds against max_seqlen (the
    // clamps at mha:2812-2814 above): harmless while every sequence fits
    // the max, the only case this models.
    for (int64_t b = 0; b < batch; ++b) {
      if (WrapInt32(cu.IntAt(b + 1) - cu.IntAt(b)) > kernel_max) {
        return absl::UnimplementedError(absl::StrCat(
            kernel, ": a window with max_seqlen=", *max_seqlen,
            " below a sequence's length; how the kernel clamps the window to max_seqlen is not "
            "modelled"));
      }
    }
  }
  const int64_t rows = GridRows(kernel_max, kFa3BlockRows);
  builder.LimitRows(rows);
  return builder.Finish(absl::StrCat(kernel, ": ", batch, " sequences, max_seqlen=", *max_seqlen,
                                     " -> rows covered per sequence ", rows));
}

// SGLang's fa3 on sm90 (sglang/kernels/ops/attention/flash_attention_v3.py)
// calls flash_attn_varlen_func of the FA3 build it loads: the hub's
// sgl-flash-attn3, else sgl-kernel's. Their Python wrappers and op schemas
// differ from build to build (whether q, k, v and cu_seqlens are made
// contiguous first; the op's namespace, which the dispatcher's type errors
// quote with the whole schema), so those steps are not modelled; the C++
// entry is FA3's mha_fwd in all of them. Returns max_seqlen_q as mha_fwd
// reads it.
absl::StatusOr<int64_t> CheckSglangFa3Entry(const ResolvedArgs& call, const FlashVarlenArgs& args) {
  const Value& cu_seqlens = args.cu_seqlens;
  const Value& max_seqlen = args.max_seqlen;
  auto not_modelled = [](absl::string_view what) {
    return absl::UnimplementedError(absl::StrCat(
        "SGLang's FA3 build: ", what,
        "; its wrapper and op differ from build to build, so the response is not modelled"));
  };
  if (!cu_seqlens.is_tensor()) {
    return not_modelled(absl::StrCat("cu_seqlens_q=", cu_seqlens.Repr(), " is not a tensor"));
  }
  const Tensor& cu = cu_seqlens.as_tensor();
  for (const Tensor* t : {&call.q, &call.k, &call.v}) {
    if (t->dim() == 0 || t->strides().back() != 1) {
      return not_modelled("q, k or v has a last dimension of stride other than 1");
    }
  }
  if (!cu.is_contiguous()) return not_modelled("cu_seqlens_q is not contiguous");
  // The op's `int? max_seqlen_q`: None and Python ints pass (bool is an
  // int); mha_fwd narrows it to a C int.
  std::optional<int64_t> max;
  if (max_seqlen.kind() == Value::Kind::kInt || max_seqlen.kind() == Value::Kind::kBool) {
    max = max_seqlen.kind() == Value::Kind::kInt ? max_seqlen.as_int() : max_seqlen.as_bool();
    if (*max < std::numeric_limits<int32_t>::min() || *max > std::numeric_limits<int32_t>::max()) {
      return not_modelled(absl::StrCat("max_seqlen_q=", *max, " lies outside a C int"));
    }
  } else if (!max_seqlen.is_none()) {
    return not_modelled(absl::StrCat("max_seqlen_q=", max_seqlen.Repr(), " (a ",
                                     max_seqlen.TypeName(), ") meets the op's int? argument"));
  }
  // The op's `float softmax_scale` (a Python int or bool passes).
  VARLEN_RETURN_IF_ERROR(args.scale_not_modelled);
  // hopper/flash_api.cpp mha_fwd: the dtypes (680-687), cu_seqlens_q's
  // device, contiguity and dtype (708-710), then max_seqlen_q (711).
  VARLEN_RETURN_IF_ERROR(CheckFlashDtypesAndCuSeqlens(call, cu, 3));
  if (!max.has_value()) {
    return RuntimeError("max_seqlen_q must be provided if cu_seqlens_q is provided");
  }
  if (call.q.dim() != 3 || call.k.dim() != 3 || call.v.dim() != 3 || cu.dim() == 0) {
    return absl::UnimplementedError(
        "mha_fwd reads sizes of q, k, v or cu_seqlens_q that it has not checked: not modelled");
  }
  VARLEN_RETURN_IF_ERROR(CheckFlashHeadsAndShapes(call, cu, 3, /*head_pad=*/0));
  return *max;
}

// xpu_attn: its kernel's entry checks are not read from a source here. The
// launch is predicted only for the arguments its engine's own path hands
// it: a 1-d int32 cu_seqlens, contiguous, on q's device; an int max_seqlen
// (mha_fwd-style C int); fp16 or bf16 q, k and v of one dtype, [T, H, D]
// each, with one head size, a multiple of 8 up to 256, and key/value heads
// dividing the query heads. Anything else is not modelled. Returns
// max_seqlen.
absl::StatusOr<int64_t> CheckUnreadFlashEntry(const ResolvedArgs& call,
                                              const FlashVarlenArgs& args) {
  const Value& cu_seqlens = args.cu_seqlens;
  const Value& max_seqlen = args.max_seqlen;
  auto not_modelled = [kernel = args.kernel](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat(kernel, "() given ", what,
                     ": its entry checks are not read from a source, so its "
                     "response is not modelled"));
  };
  VARLEN_RETURN_IF_ERROR(args.scale_not_modelled);
  if (const Value::Kind kind = args.scale_argument.kind();
      kind != Value::Kind::kNone && kind != Value::Kind::kFloat) {
    return not_modelled("a softmax_scale that is not a float");
  }
  if (!args.variant.sinks.empty()) return not_modelled("sinks");
  if (!cu_seqlens.is_tensor()) {
    return not_modelled(absl::StrCat("cu_seqlens_q=", cu_seqlens.Repr()));
  }
  const Tensor& cu = cu_seqlens.as_tensor();
  if (cu.dtype() != DType::kInt32 || cu.dim() != 1 || !cu.is_contiguous() ||
      cu.device() != call.q.device()) {
    return not_modelled(absl::StrCat("a cu_seqlens_q of dtype ", DTypeName(cu.dtype()), ", shape ",
                                     ShapeToString(cu.shape()), " on ", DeviceName(cu.device()),
                                     cu.is_contiguous() ? "" : ", not contiguous"));
  }
  if (max_seqlen.kind() != Value::Kind::kInt && max_seqlen.kind() != Value::Kind::kBool) {
    return not_modelled(
        absl::StrCat("max_seqlen_q=", max_seqlen.Repr(), " (a ", max_seqlen.TypeName(), ")"));
  }
  const int64_t max =
      max_seqlen.kind() == Value::Kind::kInt ? max_seqlen.as_int() : max_seqlen.as_bool();
  if (max < 0 || max > std::numeric_limits<int32_t>::max()) {
    return not_modelled(absl::StrCat("max_seqlen_q=", max));
  }
  const DType dtype = call.q.dtype();
  const bool half = dtype == DType::kFloat16 || dtype == DType::kBFloat16;
  if (!half || call.k.dtype() != dtype || call.v.dtype() != dtype) {
    return not_modelled(absl::StrCat("q, k, v of dtypes ", DTypeName(dtype), ", ",
                                     DTypeName(call.k.dtype()), ", ", DTypeName(call.v.dtype())));
  }
  if (call.q.dim() != 3 || call.k.dim() != 3 || call.v.dim() != 3) {
    return not_modelled("q, k or v of other than three dimensions");
  }
  const int64_t head_size = call.q.size(2), kv_heads = call.k.size(1);
  if (head_size % 8 != 0 || head_size > 256 || call.k.size(2) != head_size ||
      call.v.size(2) != head_size) {
    return not_modelled(
        absl::StrCat("head sizes q ", head_size, ", k ", call.k.size(2), ", v ", call.v.size(2)));
  }
  if (kv_heads == 0 || call.q.size(1) % kv_heads != 0 || call.v.size(1) != kv_heads ||
      call.v.size(0) != call.k.size(0)) {
    return not_modelled(absl::StrCat(call.q.size(1), " query heads and k, v of shapes ",
                                     ShapeToString(call.k.shape()), ", ",
                                     ShapeToString(call.v.shape())));
  }
  return max;
}

// amx_attn: sgl-kernel's CPU op flash_attn_varlen_func (csrc/cpu/
// flash_attn.cpp, the same entry at sgl-project/sglang 05837a8 and 6aa7668;
// the messages are those its common.h macros make). SGLang's path hands it int32
// cu_seqlens on q's device and an int max from .max().item(), and no scale
// (the kernel uses 1/sqrt(head_size)). The op is registered for the CPU
// only: a device tensor meets torch's dispatcher, whose message (the list
// of registered backends) is not modelled; nor is the op's schema (a
// non-int max). Returns the offsets the kernel reads.
absl::StatusOr<Tensor> CheckAmxEntry(const ResolvedArgs& call, const FlashVarlenArgs& args) {
  auto not_modelled = [](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat("sgl_kernel's CPU flash_attn_varlen_func given ", what, ": not modelled"));
  };
  if (!args.cu_seqlens.is_tensor() || args.max_seqlen.kind() != Value::Kind::kInt) {
    return not_modelled(absl::StrCat("cu_seqlens_q=", args.cu_seqlens.Repr(),
                                     ", max_seqlen_q=", args.max_seqlen.Repr()));
  }
  const Tensor& cu = args.cu_seqlens.as_tensor();
  for (const Tensor* t : {&call.q, &call.k, &call.v, &cu}) {
    if (t->device() != Device::kCpu) {
      return not_modelled(absl::StrCat("a tensor on ", DeviceName(t->device()),
                                       " (torch's dispatcher finds no kernel for it)"));
    }
  }
  // CHECK_LAST_DIM_CONTIGUOUS_INPUT(q), (k), (v): the macro's text has no
  // space after the name.
  for (const auto& [name, t] : {std::pair{"q", &call.q}, {"k", &call.k}, {"v", &call.v}}) {
    if (t->dim() == 0 || t->strides().back() != 1) {
      return RuntimeError(absl::StrCat(name, "must be contiguous at last dimension"));
    }
  }
  for (const auto& [name, t] : {std::pair{"q", &call.q}, {"k", &call.k}, {"v", &call.v}}) {
    if (t->dim() != 3) return RuntimeError(absl::StrCat(name, " must be a 3D tensor"));
  }
  // CHECK_INPUT(cu_seqlens_q), (cu_seqlens_k): one tensor here.
  if (!cu.is_contiguous()) return RuntimeError("cu_seqlens_q must be contiguous");
  if (cu.dtype() != DType::kInt32) {
    return RuntimeError(absl::StrCat("CHECK_EQ(cu_seqlens_q.scalar_type(), at::kInt) failed. ",
                                     TorchScalarTypeName(cu.dtype()), " vs Int"));
  }
  // num_seqs = cu_seqlens_q.size(0) - 1; the kernel reads the offsets
  // through data_ptr, i.e. the first size(0) elements of the contiguous
  // storage, whatever the tensor's other dimensions.
  if (cu.dim() == 0 || cu.size(0) < 2) {
    return not_modelled(absl::StrCat("a cu_seqlens of shape ", ShapeToString(cu.shape()),
                                     " (no sequences: the output stays as torch.empty left it)"));
  }
  // The sizes: k's head size, v's heads and cu_seqlens_k's length hold for
  // the one geometry a case has; then the head sizes, even for the 512-bit
  // transposes ("D and DV need to be even").
  if (call.k.size(2) != call.q.size(2) || call.v.size(1) != call.k.size(1)) {
    return not_modelled("k and v of another head size or head count than q's");
  }
  if (call.q.size(2) % 2 != 0) {
    return CapabilityLimit(absl::StrCat("invalid head_size ", call.q.size(2)));
  }
  if (call.v.size(2) % 2 != 0) {
    return CapabilityLimit(absl::StrCat("invalid head_size_v ", call.v.size(2)));
  }
  // AT_DISPATCH_REDUCED_FLOATING_TYPES(q.scalar_type(), "flash_attn_varlen_func").
  const DType dtype = call.q.dtype();
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return CapabilityLimit(absl::StrCat("\"flash_attn_varlen_func\" not implemented for '",
                                        TorchScalarTypeName(dtype), "'"),
                           PyErrorKind::kNotImplementedError);
  }
  if (call.k.dtype() != dtype || call.v.dtype() != dtype) {
    return not_modelled("k or v of another dtype than q's");
  }
  if (call.k.size(1) == 0 || call.q.size(1) % call.k.size(1) != 0) {
    return not_modelled("key/value heads that do not divide the query heads");
  }
  // The kernel checks every length against the max (TORCH_CHECK without a
  // message); a negative length takes build-dependent paths.
  const int64_t max = args.max_seqlen.as_int();
  for (int64_t b = 0; b + 1 < cu.size(0); ++b) {
    const int64_t length = cu.IntAtLogical(b + 1) - cu.IntAtLogical(b);
    if (length < 0) return not_modelled(absl::StrCat("a negative length ", length));
    if (length > max) {
      return RuntimeError(
          "Expected seqlen_q <= max_seqlen_q && seqlen_k <= max_seqlen_k to be true, but got "
          "false.  (Could this error message be improved?  If so, please report an enhancement "
          "request to PyTorch.)");
    }
  }
  std::vector<int64_t> offsets(cu.size(0));
  for (int64_t b = 0; b < cu.size(0); ++b) offsets[b] = cu.IntAtLogical(b);
  return Tensor::FromInts(offsets, DType::kInt32, Device::kCpu);
}

// aiter's two ops as aiter/jit/utils/torch_guard.py registers them (the
// schemas its generate_schema makes of the stubs at mha.py:929 and 1029).
constexpr absl::string_view kAiterMhaVarlenFwd =
    "aiter::mha_varlen_fwd(Tensor(a0!) q, Tensor(a1!) k, Tensor(a2!) v, Tensor(a3!) "
    "cu_seqlens_q, Tensor(a4!)? cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, SymInt "
    "min_seqlen_q, float dropout_p, float softmax_scale, float logits_soft_cap, bool "
    "zero_tensors, bool is_causal, SymInt window_size_left, SymInt window_size_right, SymInt "
    "sink_size, bool return_softmax_lse, bool return_dropout_randval, Tensor(a18!)? out=None, "
    "Tensor(a19!)? block_table=None, Tensor(a20!)? bias=None, Tensor(a21!)? alibi_slopes=None, "
    "Tensor(a22!)? q_descale=None, Tensor(a23!)? k_descale=None, Tensor(a24!)? v_descale=None, "
    "Generator? gen=None, Tensor(a26!)? cu_seqlens_q_padded=None, Tensor(a27!)? "
    "cu_seqlens_k_padded=None, Tensor(a28!)? sink_ptr=None) -> (Tensor, Tensor, Tensor, Tensor)";
constexpr absl::string_view kAiterFmhaV3VarlenFwd =
    "aiter::fmha_v3_varlen_fwd(Tensor(a0!) q, Tensor(a1!) k, Tensor(a2!) v, Tensor(a3!) "
    "cu_seqlens_q, Tensor(a4!) cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, SymInt "
    "min_seqlen_q, float dropout_p, float softmax_scale, float logits_soft_cap, bool "
    "zero_tensors, bool is_causal, SymInt window_size_left, SymInt window_size_right, bool "
    "return_softmax_lse, bool return_dropout_randval, SymInt how_v3_bf16_cvt, Tensor(a18!)? "
    "out=None, Tensor(a19!)? block_table=None, Tensor(a20!)? bias=None, Tensor(a21!)? "
    "alibi_slopes=None, Tensor(a22!)? q_descale=None, Tensor(a23!)? k_descale=None, "
    "Tensor(a24!)? v_descale=None, Generator? gen=None, Tensor(a26!)? cu_seqlens_q_padded=None, "
    "Tensor(a27!)? cu_seqlens_k_padded=None) -> (Tensor, Tensor, Tensor, Tensor)";

// Whether the dispatcher's quote of `value` is modelled: Python scalars,
// host tensors TorchRepr prints, and lists of those (a device tensor's repr
// and an engine class's are not).
bool Quotable(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kTensor:
      return value.as_tensor().device() == Device::kCpu;
    case Value::Kind::kList: {
      const std::vector<Value>& items = value.as_list();
      return std::all_of(items.begin(), items.end(), Quotable);
    }
    case Value::Kind::kSingletonCache:
      return false;
    default:
      return true;
  }
}

// torch's dispatcher refusing `value` for an op's `expected` argument (a
// Python int for SymInt, float for float), with pybind11's cast line. Not
// modelled where the quoted value would print a device tensor, or a class
// whose module path is its engine's.
absl::Status OpTypeError(absl::string_view declaration, absl::string_view argument, int position,
                         absl::string_view expected, const Value& value) {
  const std::optional<std::string> repr = internal::DispatcherRepr(value);
  absl::string_view python_class;
  switch (value.kind()) {
    case Value::Kind::kFloat:
      python_class = "float";
      break;
    case Value::Kind::kStr:
      python_class = "str";
      break;
    case Value::Kind::kList:
      python_class = "list";
      break;
    case Value::Kind::kTensor:
      python_class = "torch.Tensor";
      break;
    default:
      break;
  }
  if (!repr.has_value() || python_class.empty() || !Quotable(value)) {
    return absl::UnimplementedError(absl::StrCat(
        "the dispatcher refuses ", argument, "=", value.Repr(),
        " and quotes it as torch prints it: that printing is not modelled for this value"));
  }
  const absl::string_view op = declaration.substr(0, declaration.find('('));
  return RuntimeError(absl::StrCat(
      op, "() Expected a value of type '", expected, "' for argument '", argument,
      "' but instead found type '", value.TypeName(), "'.\nPosition: ", position,
      "\nValue: ", *repr, "\nDeclaration: ", declaration,
      "\nCast error details: Unable to cast Python instance of type <class '", python_class,
      "'> to C++ type '?' (#define PYBIND11_DETAILED_ERROR_MESSAGES or compile in debug mode "
      "for details)"));
}

// Python's int() of a float, as aiter's host arithmetic takes it.
absl::StatusOr<int64_t> PythonIntOfFloat(double value) {
  if (std::isnan(value)) {
    return PythonError(PyErrorKind::kValueError, "cannot convert float NaN to integer");
  }
  if (std::isinf(value)) {
    return PythonError(PyErrorKind::kOverflowError, "cannot convert float infinity to integer");
  }
  if (std::abs(value) >= 9.2e18) {
    return absl::UnimplementedError("int() of a float beyond 64 bits: not modelled");
  }
  return static_cast<int64_t>(value);
}

// aiter as SGLang 0.5.23's aiter_attn calls it, on an MI300 (gfx942), where
// SGLang picks aiter_attn: ROCm/aiter c16d44b9 (the commit SGLang's ROCm
// image pins), aiter/ops/mha.py flash_attn_varlen_func up to the C++ entry
// of CK's mha_varlen_fwd (csrc/py_itfs_ck/mha_varlen_fwd_kernels.cu) or of
// the assembly kernel's fmha_v3_varlen_fwd (csrc/py_itfs_cu/
// asm_mha_varlen_fwd.cu); "mha:", "ck:" and "v3:" below are those files'
// lines. Returns max_seqlen_k, which the kernel reads as an int; at most 0,
// the kernel zero-fills the output. Which kernel CK's generated code then
// selects is not read: the launch is assumed.
absl::StatusOr<int64_t> CheckAiterEntry(const ResolvedArgs& call, const FlashVarlenArgs& args) {
  auto not_modelled = [](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat("aiter.flash_attn_varlen_func() given ", what, ": not modelled"));
  };
  const Tensor &q = call.q, &k = call.k, &v = call.v;
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3) {
    return not_modelled("q, k or v of other than three dimensions");
  }
  // mha:3278-3282: q and k are padded by q's amount, v by its own, to
  // multiples of 8 (fresh contiguous tensors).
  auto padded = [](int64_t d) { return d % 8 == 0 ? d : d + 8 - d % 8; };
  const int64_t hdim_q = padded(q.size(2)), hdim_v = padded(v.size(2));
  const int64_t hdim_k = k.size(2) + (hdim_q - q.size(2));
  // mha:2802: batch_size = cu_seqlens_q.numel() - 1.
  if (!args.cu_seqlens.is_tensor()) {
    return PythonError(
        PyErrorKind::kAttributeError,
        absl::StrCat("'", args.cu_seqlens.TypeName(), "' object has no attribute 'numel'"));
  }
  const Tensor& cu = args.cu_seqlens.as_tensor();
  const int64_t batch = cu.numel() - 1;
  // mha:2812-2814: the window and sink clamps compare max_seqlen_k with
  // ints and take the truth of the result.
  const Value& max_seqlen = args.max_seqlen;
  switch (max_seqlen.kind()) {
    case Value::Kind::kInt:
    case Value::Kind::kBool:
    case Value::Kind::kFloat:
      break;
    case Value::Kind::kTensor:
      // The truth of a comparison with a tensor of other than one element.
      if (const int64_t n = max_seqlen.as_tensor().numel(); n != 1) {
        return RuntimeError(n == 0 ? "Boolean value of Tensor with no values is ambiguous"
                                   : "Boolean value of Tensor with more than one value is "
                                     "ambiguous");
      }
      return not_modelled(absl::StrCat("max_seqlen_k=", max_seqlen.Repr(),
                                       " (a one-element tensor, which the op's SymInt takes)"));
    default:
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat("'>=' not supported between instances of 'int' and '",
                                      max_seqlen.TypeName(), "'"));
  }
  const int64_t heads = q.size(1), kv_heads = v.size(1);  // mha:2801, 2804: v's heads
  if (kv_heads == 0 || k.size(1) == 0) return not_modelled("k or v without heads");
  const bool bf16 = q.dtype() == DType::kBFloat16;
  // mha:2838-2861: the assembly kernel takes bf16 with (D, D_v) of (128, 128)
  // or (192, 128), heads dividing, and for (192, 128) k and v spanning less
  // than 2**32 bytes at int(max_seqlen_k) rows (mha:28-29, strides after the
  // padding and maybe_contiguous, mha:1708).
  bool assembly =
      bf16 && hdim_v == 128 && (hdim_q == 128 || hdim_q == 192) && heads % kv_heads == 0;
  if (assembly && hdim_q == 192) {
    int64_t rows = 0;
    if (max_seqlen.kind() == Value::Kind::kFloat) {
      VARLEN_ASSIGN_OR_RETURN(rows, PythonIntOfFloat(max_seqlen.as_float()));
    } else {
      rows = max_seqlen.kind() == Value::Kind::kInt ? max_seqlen.as_int() : max_seqlen.as_bool();
    }
    // A padded tensor is a fresh contiguous one; maybe_contiguous copies one
    // whose last stride is not 1 unless torch calls it contiguous already.
    auto token_stride = [](const Tensor& t, int64_t head_dim) {
      const bool fresh = head_dim != t.size(2) || (t.strides().back() != 1 && !t.is_contiguous());
      return fresh ? t.size(1) * head_dim : t.strides()[0];
    };
    const int64_t element = static_cast<int64_t>(DTypeSize(q.dtype()));
    for (const auto& [t, head_dim] :
         {std::pair<const Tensor*, int64_t>{&k, hdim_k}, {&v, hdim_v}}) {
      const absl::int128 bytes = absl::int128(rows) * token_stride(*t, head_dim) * element;
      if (bytes >= (absl::int128(1) << 32)) assembly = false;
    }
  }
  // The op's type gate (torch_guard.py:292-296): its SymInt takes a Python
  // int or bool, its float a float, int or bool. Whatever it refuses, its
  // message is not modelled while a device tensor is among the arguments.
  const absl::string_view op = assembly ? kAiterFmhaV3VarlenFwd : kAiterMhaVarlenFwd;
  const bool refused = max_seqlen.kind() == Value::Kind::kFloat || !args.scale_not_modelled.ok();
  if (refused && args.scale_argument.is_tensor() &&
      args.scale_argument.as_tensor().device() != Device::kCpu) {
    return not_modelled("a type error of the op's dispatcher among device tensors");
  }
  if (max_seqlen.kind() == Value::Kind::kFloat) {
    return OpTypeError(op, "max_seqlen_q", 5, "int", max_seqlen);
  }
  if (!args.scale_not_modelled.ok()) {
    return OpTypeError(op, "softmax_scale", 9, "float", args.scale_argument);
  }
  const int64_t max =
      max_seqlen.kind() == Value::Kind::kInt ? max_seqlen.as_int() : max_seqlen.as_bool();
  // mha:765-775: CK builds fp16 and bf16 alone.
  if (!assembly && q.dtype() != DType::kFloat16 && !bf16) {
    return CapabilityLimit("Unsupported dtype for MHA", PyErrorKind::kNotImplementedError);
  }
  // The pybind11 call narrows max_seqlen to a C int.
  if (max < std::numeric_limits<int32_t>::min() || max > std::numeric_limits<int32_t>::max()) {
    return not_modelled(absl::StrCat("max_seqlen_k=", max, " beyond a C int"));
  }
  // ck:392-513 / v3:273-389, in that order.
  if (k.dtype() != q.dtype()) return CapabilityLimit("query and key must have the same dtype");
  if (v.dtype() != q.dtype()) return CapabilityLimit("query and value must have the same dtype");
  if (cu.dtype() != DType::kInt32) return RuntimeError("cu_seqlens_q must have dtype int32");
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&q, "q"},
                                {&k, "k"},
                                {&v, "v"},
                                {&cu, "cu_seqlens_q"}}) {
    if (t->device() != Device::kCuda) return RuntimeError(absl::StrCat(name, " must be on CUDA"));
  }
  if (!cu.is_contiguous()) return RuntimeError("cu_seqlens_q must be contiguous");
  if (batch <= 0) return RuntimeError("batch size must be postive");  // aiter's spelling
  if (hdim_q > 256 || hdim_v > 256) {
    return CapabilityLimit("CK only supports head dimension at most 256");
  }
  if (heads % k.size(1) != 0) {
    return CapabilityLimit("Number of heads in key/value must divide number of heads in query");
  }
  if (hdim_k != hdim_q)
    return RuntimeError("k must have shape (total_k, num_heads_k, head_size_q)");
  if (v.size(0) != k.size(0) || v.size(1) != k.size(1)) {
    return RuntimeError("v must have shape (total_k, num_heads_k, head_size_v)");
  }
  if (cu.dim() != 1) return RuntimeError("cu_seqlens_q must have shape (batch_size + 1)");
  return max;
}

// torch's name of a dtype, as FA4's assertion messages print it.
std::string TorchDTypeName(DType dtype) { return absl::StrCat("torch.", DTypeName(dtype)); }

// FA4 as SGLang 0.5.23 vendors it, on sm100 (the platform SGLang picks fa4
// for): sglang/kernels/ops/attention/flash_attention_v4.py
// flash_attn_varlen_func, then flash_attn/cute/interface.py's
// flash_attn_varlen_func and _flash_attn_fwd up to its compile ("v4:" and
// "if:" below are those files' lines). Returns whether the kernel launches
// (false: no query rows or keys, and the output is zeroed). What the CuTe
// DSL decides when it converts the arguments is not modelled.
absl::StatusOr<bool> CheckFa4Entry(const ResolvedArgs& call, const FlashVarlenArgs& args) {
  auto assertion = [](absl::string_view message) {
    return PythonError(PyErrorKind::kAssertionError, message);
  };
  auto geometry = [](absl::string_view message) {  // a refusal of the geometry
    return CapabilityLimit(message, PyErrorKind::kAssertionError);
  };
  auto not_modelled = [](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat("FA4: ", what, " is decided by the CuTe DSL's compile: not modelled"));
  };
  const Tensor &q = call.q, &k = call.k, &v = call.v;
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3) {
    return absl::UnimplementedError(
        "FA4 given q, k or v of other than three dimensions: not modelled");
  }
  // v4:241-243: cu_seqlens.stride(-1) decides whether it is made contiguous.
  const Value& cu_value = args.cu_seqlens;
  if (cu_value.is_none()) {
    return assertion("");  // if:507: a 3-d k never has the 4-d (batch, seqlen) shape
  }
  if (!cu_value.is_tensor()) {
    return PythonError(
        PyErrorKind::kAttributeError,
        absl::StrCat("'", cu_value.TypeName(), "' object has no attribute 'stride'"));
  }
  const Tensor& cu = cu_value.as_tensor();
  if (cu.dim() == 0) {
    return PythonError(PyErrorKind::kIndexError,
                       "Dimension specified as -1 but tensor has no dimensions");
  }
  const int64_t head_dim = q.size(2), head_dim_v = v.size(2);
  const int64_t heads = q.size(1), kv_heads = v.size(1);
  // if:513: k is (v's tokens, v's heads, q's head size); if:515-517: cu is 1-d.
  if (k.size(0) != v.size(0) || k.size(1) != kv_heads || k.size(2) != head_dim) {
    return assertion("");
  }
  if (cu.dim() != 1) return assertion("cu_seqlens_k must have shape (batch_size + 1,)");
  // if:563-568: v's dtype, then the pairs (q, k), (q, v), (k, v) (if:580-586).
  if (v.dtype() != DType::kFloat16 && v.dtype() != DType::kBFloat16) {
    return geometry("inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2");
  }
  const struct {
    const char* name;
    const Tensor& t;
  } named[] = {{"q", q}, {"k", k}, {"v", v}};
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 3; ++j) {
      if (named[i].t.dtype() != named[j].t.dtype()) {
        return geometry(absl::StrCat(named[i].name, ".dtype ", TorchDTypeName(named[i].t.dtype()),
                                     " != ", named[j].name, ".dtype ",
                                     TorchDTypeName(named[j].t.dtype())));
      }
    }
  }
  // if:590-597: int32, then stride(0) == 1 (after v4:242 made a 1-d cu of
  // other stride contiguous, which leaves one element's stride as it is).
  if (cu.dtype() != DType::kInt32) {
    return assertion("cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be int32");
  }
  if (cu.numel() == 1 && cu.strides()[0] != 1) {
    return assertion("cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be contiguous");
  }
  // if:602-620: every tensor on the GPU.
  for (const Tensor* t : {&q, &k, &v, &cu}) {
    if (t->device() != q.device() || q.device() == Device::kCpu) {
      return assertion("inputs must be on CUDA device");
    }
  }
  // if:625, then sm100's head sizes (if:626-628 -> 141-154).
  if (kv_heads == 0) {
    return CapabilityLimit("integer modulo by zero", PyErrorKind::kZeroDivisionError);
  }
  if (heads % kv_heads != 0) return geometry("num_head must be divisible by num_head_kv");
  const int64_t alignment = 16 / static_cast<int64_t>(DTypeSize(v.dtype()));
  const bool aligned = head_dim % alignment == 0 && head_dim_v % alignment == 0;
  const bool supported =
      (head_dim >= 8 && head_dim <= 128 && head_dim_v >= 8 && head_dim_v <= 128) ||
      (head_dim == 192 && head_dim_v == 128) ||
      ((head_dim == 64 || head_dim == head_dim_v) && head_dim_v == 512) ||
      (head_dim == 256 && head_dim_v == 256);
  if (!supported || !aligned) {
    return geometry(absl::StrCat(
        "(head_dim, head_dim_v)=(", head_dim, ", ", head_dim_v,
        ") is not supported on SM100/SM110. head_dim and head_dim_v must be between 8 and 128 "
        "and divisible by ",
        alignment, ", or (192, 128) for DeepSeek, or (256, 256) for hd256."));
  }
  // if:706-710: no query rows or no keys: the output is zeroed, nothing compiled.
  if (q.size(0) == 0 || v.size(0) == 0) return false;
  // if:811-814: max_seqlen_q * (heads per kv head), compared with the tile.
  const Value& max = args.max_seqlen;
  if (max.kind() == Value::Kind::kStr || max.kind() == Value::Kind::kList) {
    return PythonError(
        PyErrorKind::kTypeError,
        absl::StrCat("'>' not supported between instances of '", max.TypeName(), "' and 'int'"));
  }
  if (!max.is_none() && max.kind() != Value::Kind::kInt && max.kind() != Value::Kind::kBool &&
      max.kind() != Value::Kind::kFloat && max.kind() != Value::Kind::kTensor) {
    return absl::UnimplementedError(
        absl::StrCat("FA4's host arithmetic on max_seqlen_q=", max.Repr(), ": not modelled"));
  }
  // A tensor's product with the heads per kv head is a tensor: the
  // comparison's `if` takes its truth value, which needs one element.
  if (max.is_tensor() && max.as_tensor().numel() != 1) {
    return RuntimeError(max.as_tensor().numel() == 0
                            ? "Boolean value of Tensor with no values is ambiguous"
                            : "Boolean value of Tensor with more than one value is ambiguous");
  }
  // if:1350 on: the compile converts the arguments.
  if (max.is_tensor() && args.dsl_max_seqlen_position > 0) {
    return PythonError(PyErrorKind::kDslRuntimeError,
                       absl::StrCat("expects argument #", args.dsl_max_seqlen_position,
                                    " (max_seqlen_q) to be one of (Int32, int, NoneType), but got "
                                    "torch.Tensor"));
  }
  if (head_dim_v == 512) return not_modelled("the MLA head sizes (x, 512) without qv");
  VARLEN_RETURN_IF_ERROR(args.scale_not_modelled);
  if (const Value::Kind kind = args.scale_argument.kind();
      kind != Value::Kind::kNone && kind != Value::Kind::kFloat) {
    return not_modelled("a softmax_scale that is not a float");
  }
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->strides().back() != 1) continue;  // v4:231 made it contiguous
    bool layout_aligned = t->storage_offset() % alignment == 0;
    for (int64_t d = 0; d + 1 < t->dim(); ++d) {
      if (t->size(d) > 1 && (t->strides()[d] <= 0 || t->strides()[d] % alignment != 0)) {
        layout_aligned = false;
      }
    }
    if (!layout_aligned) return not_modelled("a q, k or v layout off 16-byte alignment");
  }
  if (cu.numel() <= 1 || heads == 0) return not_modelled("a batch of no sequences or no heads");
  return true;
}

// The kernels of the FlashAttention family: vLLM's FA2 and FA3 ops, SGLang's
// fa3, and the kernels whose entry is not read (CheckUnreadFlashEntry).
absl::StatusOr<KernelCall> BindFlashVarlen(const ResolvedArgs& call, const FlashVarlenArgs& args) {
  const absl::string_view kFunction = args.kernel;
  using SglangEntry = FlashVarlenArgs::SglangEntry;
  if (args.fa_version == 0) {
    switch (args.sglang_entry) {
      case SglangEntry::kFa3: {
        VARLEN_ASSIGN_OR_RETURN(const int64_t max_seqlen, CheckSglangFa3Entry(call, args));
        if (!args.variant.sinks.empty()) {
          // Builds check sinks their own ways (dtype, head count) or not at all.
          return absl::UnimplementedError(
              "s_aux reaches SGLang's FA3 build as sinks; what each build accepts there differs "
              "from build to build, so the response is not modelled");
        }
        return LaunchFlashVarlen(call, args, args.cu_seqlens.as_tensor(), max_seqlen);
      }
      case SglangEntry::kFa4: {
        VARLEN_ASSIGN_OR_RETURN(const bool launches, CheckFa4Entry(call, args));
        if (!launches) {
          return KernelCallBuilder(call.q, call.k, call.v, args.scale, call.q.dtype())
              .Finish("FA4: no query rows or no keys: the output is zeroed");
        }
        // The kernel's tile scheduler reads cu_seqlens alone: max_seqlen only
        // sizes host-side heuristics, so it limits no rows.
        return LaunchFlashVarlen(call, args, args.cu_seqlens.as_tensor(), std::nullopt);
      }
      case SglangEntry::kAiter: {
        VARLEN_ASSIGN_OR_RETURN(const int64_t max_seqlen, CheckAiterEntry(call, args));
        if (max_seqlen <= 0) {  // ck:579 / v3:453
          return KernelCallBuilder(call.q, call.k, call.v, args.scale, call.q.dtype())
              .Finish("aiter: max_seqlen_k <= 0, the output is zero-filled");
        }
        return LaunchFlashVarlen(call, args, args.cu_seqlens.as_tensor(), max_seqlen);
      }
      case SglangEntry::kAmx: {
        VARLEN_ASSIGN_OR_RETURN(const Tensor offsets, CheckAmxEntry(call, args));
        // Each length is at most the max (checked): no row is left out.
        return LaunchFlashVarlen(call, args, offsets, std::nullopt);
      }
      case SglangEntry::kUnread: {
        VARLEN_ASSIGN_OR_RETURN(const int64_t max_seqlen, CheckUnreadFlashEntry(call, args));
        return LaunchFlashVarlen(call, args, args.cu_seqlens.as_tensor(), max_seqlen);
      }
    }
  }
  // vLLM's builds (fa_version 2 or 3).
  if (call.q.dim() != 3) {
    return PythonError(PyErrorKind::kRuntimeError,
                       "q must have shape (total_q, num_heads, head_dim)");
  }
  VARLEN_ASSIGN_OR_RETURN(Tensor cu, CuSeqlensArgument(args.cu_seqlens, kFunction, "cu_seqlens_q"));
  // The op's schema refuses a float before the kernel runs.
  if (args.max_seqlen.kind() == Value::Kind::kFloat) {
    return absl::UnimplementedError(absl::StrCat(
        "max_seqlen_q=", args.max_seqlen.Repr(),
        " (a float tensor's .item()): the FlashAttention op's dispatcher refuses a float for its "
        "int argument; that message is not modelled"));
  }
  const bool checked_shapes = call.k.dim() == 3 && call.v.dim() == 3;
  VARLEN_ASSIGN_OR_RETURN(int64_t max_seqlen,
                          IntArgument(args.max_seqlen, kFunction, "max_seqlen_q"));
  if (checked_shapes) {
    VARLEN_RETURN_IF_ERROR(CheckFlashDtypesAndCuSeqlens(call, cu, args.fa_version));
  } else {
    VARLEN_RETURN_IF_ERROR(CheckFlashCuSeqlens(cu, call.q, args.fa_version));
  }
  const int64_t batch = std::max<int64_t>(cu.numel() - 1, 0);
  const int64_t head_pad =
      args.pads_head_dim_to_8 && call.q.size(2) % 8 != 0 ? 8 - call.q.size(2) % 8 : 0;
  if (args.fa_version == 2) {
    // mha_varlen_fwd swaps heads into the sequence axis for one-row queries
    // under GQA, a reshape that assumes every sequence has exactly one row
    // (Dao-AILab/flash-attention#1537).
    const int64_t heads = call.q.size(1), kv_heads = call.k.size(1),
                  dim = call.q.size(2) + head_pad;
    if (max_seqlen == 1 && kv_heads > 0 && heads > kv_heads && dim % 8 == 0 &&
        call.q.size(0) != batch) {
      return RuntimeError(
          absl::StrCat("shape '[", batch, ", ", kv_heads, ", ", heads / kv_heads, ", ", dim,
                       "]' is invalid for input of size ",
                       call.q.numel() / std::max<int64_t>(call.q.size(2), 1) * dim));
    }
    if (batch == 0) return RuntimeError("batch size must be positive");
  }
  if (checked_shapes) {
    VARLEN_RETURN_IF_ERROR(CheckFlashHeadsAndShapes(call, cu, args.fa_version, head_pad));
    // csrc/flash_attn/flash_api.cpp (v2.8.3): mha_varlen_fwd rounds the head
    // size to 32 up to 192, else to 256, and set_params_fprop of a build
    // with FLASHATTENTION_DISABLE_UNEVEN_K refuses any other size. The
    // dropout and local-attention checks before it pass here (dropout is 0;
    // the platform names no build without local attention).
    if (args.disables_uneven_k) {
      const int64_t head_size = call.q.size(2) + head_pad;
      const int64_t rounded = head_size <= 192 ? (head_size + 31) / 32 * 32 : 256;
      if (head_size != rounded) {
        return CapabilityLimit(
            "This flash attention build does not support headdim not being a multiple of 32.");
      }
    }
  }
  return LaunchFlashVarlen(call, args, cu, max_seqlen);
}

namespace {

absl::Status TypeError(std::string message) {
  return PythonError(PyErrorKind::kTypeError, message);
}

// Python's a // b for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

// triton.cdiv(max_input_len, block) is (x + (block - 1)) // block with
// Python's operators: what they refuse, before any launch.
absl::Status CheckCdivOperand(const Value& max_input_len) {
  switch (max_input_len.kind()) {
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kTensor:
      return absl::OkStatus();
    case Value::Kind::kStr:
      return TypeError("can only concatenate str (not \"int\") to str");
    case Value::Kind::kList:
      return TypeError("can only concatenate list (not \"int\") to list");
    default:
      return TypeError(absl::StrCat("unsupported operand type(s) for +: '",
                                    max_input_len.TypeName(), "' and 'int'"));
  }
}

// triton.cdiv(max_input_len, block), then the launcher's PyArg_ParseTuple("i") of that grid
// axis (triton 3.9, backends/nvidia/driver.c launch(): "iiiKKpp..."): a
// float reaches the launcher and is refused there; a tensor is read by its
// __index__ (a host sync on the device).
absl::StatusOr<int64_t> TritonGridBlocks(const Value& max_input_len, int64_t block) {
  int64_t x = 0;
  switch (max_input_len.kind()) {
    case Value::Kind::kBool:
      x = max_input_len.as_bool() ? 1 : 0;
      break;
    case Value::Kind::kInt:
      x = max_input_len.as_int();
      break;
    case Value::Kind::kFloat:
      return TypeError("'float' object cannot be interpreted as an integer");
    case Value::Kind::kTensor: {
      const Tensor& t = max_input_len.as_tensor();
      if (IsFloatingPoint(t.dtype()) || t.numel() != 1) {
        return TypeError("only integer tensors of a single element can be converted to an index");
      }
      VARLEN_ASSIGN_OR_RETURN(Value item,
                              internal::Item(t, "triton.cdiv(max_input_len).__index__()"));
      x = item.kind() == Value::Kind::kBool ? item.as_bool() : item.as_int();
      if (t.dtype() == DType::kInt32) {  // the sum is an int32 tensor: it wraps
        return FloorDiv(WrapInt32(x + (block - 1)), block);
      }
      break;
    }
    default:
      VARLEN_RETURN_IF_ERROR(CheckCdivOperand(max_input_len));
      return absl::InternalError("TritonGridBlocks: an operand triton.cdiv takes");
  }
  // Python's ints do not overflow; C's "i" refuses what an int cannot hold.
  const int64_t blocks = x > std::numeric_limits<int64_t>::max() - block
                             ? x / block + 1
                             : FloorDiv(x + block - 1, block);
  if (blocks > std::numeric_limits<int32_t>::max()) {
    return PythonError(PyErrorKind::kOverflowError, "signed integer is greater than maximum");
  }
  if (blocks < std::numeric_limits<int32_t>::min()) {
    return PythonError(PyErrorKind::kOverflowError, "signed integer is less than minimum");
  }
  return blocks;
}

// A tensor handed to a Triton kernel as a pointer (driver.c extractPointer):
// an empty tensor's data_ptr() is 0, a valid null pointer; any other host
// tensor is refused.
absl::Status CheckTritonPointer(const Tensor& t, Device kernel_device) {
  if (t.numel() == 0 || t.device() == kernel_device) return absl::OkStatus();
  return PythonError(PyErrorKind::kValueError,
                     "Pointer argument cannot be accessed from Triton (cpu tensor?)");
}

}  // namespace

// context_attention_fwd (SGLang's kernels/ops/attention/prefill_attention.py
// and vLLM's v1/attention/ops/triton_prefill_attention.py share the steps):
// batch = b_seq_len.shape[0]; grid = (batch, heads, triton.cdiv(max_input_len,
// BLOCK)); the launch's arguments (o.stride(0) among them); then the
// launcher parses the grid and the pointers, and skips a grid of no blocks.
absl::StatusOr<KernelCall> BindTriton(const ResolvedArgs& call, const TritonArgs& args) {
  constexpr absl::string_view kFunction = "context_attention_fwd";
  if (!args.seq_lens.is_tensor()) {
    return PythonError(
        PyErrorKind::kAttributeError,
        absl::StrCat("'", args.seq_lens.TypeName(), "' object has no attribute 'shape'"));
  }
  const Tensor seq_lens = args.seq_lens.as_tensor();
  if (seq_lens.dim() == 0) return PythonError(PyErrorKind::kIndexError, "tuple index out of range");
  VARLEN_RETURN_IF_ERROR(CheckCdivOperand(args.max_seqlen));
  // The launch's arguments are evaluated (o.stride(0) among them), then
  // the launch specializes them, then parses the grid and the pointers.
  if (args.output_from_workspace && !args.output_ws.is_tensor()) {
    return PythonError(
        PyErrorKind::kAttributeError,
        absl::StrCat("'", args.output_ws.TypeName(), "' object has no attribute 'stride'"));
  }
  VARLEN_RETURN_IF_ERROR(args.scale_not_modelled);
  if (!args.cu_seqlens.is_tensor()) {
    // None specializes as a constexpr; an int is taken as a raw address.
    return absl::UnimplementedError(absl::StrCat(kFunction,
                                                 " given b_start_loc=", args.cu_seqlens.Repr(),
                                                 ": Triton's response is not modelled"));
  }
  VARLEN_ASSIGN_OR_RETURN(const int64_t blocks,
                          TritonGridBlocks(args.max_seqlen, kTritonBlockRows));
  const Tensor cu = args.cu_seqlens.as_tensor();
  VARLEN_RETURN_IF_ERROR(CheckTritonPointer(cu, call.q.device()));
  VARLEN_RETURN_IF_ERROR(CheckTritonPointer(seq_lens, call.q.device()));
  KernelCallBuilder builder(call.q, call.k, call.v, args.scale, call.q.dtype());
  if (args.output_from_workspace) {
    // The kernel writes [T, Hq, Dv] through the workspace's strides.
    const Tensor& ws = args.output_ws.as_tensor();
    if (ws.dim() != 3 || ws.size(0) != call.q.size(0) || ws.size(1) != call.q.size(1) ||
        ws.size(2) < call.v.size(2) || ws.dtype() != call.q.dtype() ||
        ws.device() != call.q.device()) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(kFunction, " received output_ws of shape ", ShapeToString(ws.shape()),
                       " and dtype ", DTypeName(ws.dtype()), " for an output of shape ",
                       ShapeToString({call.q.size(0), call.q.size(1), call.v.size(2)})));
    }
    builder.SetOutput(ws);
  }
  // The grid's first axis is b_seq_len.shape[0]; the kernel reads element
  // b of each (a trailing dimension of size one changes nothing).
  const int64_t batch = seq_lens.size(0);
  const int64_t rows = blocks > 0 && batch > 0 ? blocks * kTritonBlockRows : 0;
  if (cu.numel() < batch) {
    return absl::OutOfRangeError(absl::StrCat(kFunction, " reads b_start_loc[0..", batch - 1,
                                              "] but it has ", cu.numel(),
                                              " entries: the kernel would read past the buffer"));
  }
  // The kernel is handed data_ptr() alone and reads element b at pointer + b:
  // a strided view's strides are never seen, so the reads are of storage.
  for (int64_t b = 0; b < batch; ++b) builder.AddTokenSequence(cu.IntAt(b), seq_lens.IntAt(b));
  builder.LimitRows(rows);
  return builder.Finish(absl::StrCat(kFunction, ": ", batch,
                                     " sequences, max_input_len=", args.max_seqlen.Repr(),
                                     " -> rows covered per sequence ", rows));
}

absl::StatusOr<KernelCall> BindAscend(const ResolvedArgs& call, const AscendArgs& args) {
  KernelCallBuilder builder(call.q, call.k, call.v, args.scale, call.q.dtype());
  if (args.output_from_workspace) builder.SetOutput(args.output_ws.as_tensor());
  int64_t previous = 0;
  for (size_t b = 0; b < args.actual_seq_lengths.size(); ++b) {
    const int64_t end = args.actual_seq_lengths[b];
    const int64_t length = end - previous;
    previous = end;
    if (length < 0) {
      return absl::UnimplementedError(
          absl::StrCat("npu_fused_infer_attention_score: actual_seq_lengths decreases at index ", b,
                       " (", end, " after ", end - length, "): the NPU's error is not modelled"));
    }
    builder.AddTokenSequence(args.row_starts[b], length);
  }
  return builder.Finish(
      absl::StrCat("npu_fused_infer_attention_score (TND): ", args.actual_seq_lengths.size(),
                   " sequences", args.padded ? ", padding rows left unwritten" : ""));
}

// The keys [begin, end) one mask row attends to, within its batch item.
using KeyRange = std::pair<int64_t, int64_t>;

// Row r of the mask of batch item `item`: a block-diagonal row attends to
// the union of the blocks holding it (an interval, since each holds r), a
// padding row to the item's first `kept` keys if r < kept.
std::vector<KeyRange> MaskRows(const SdpaArgs& args, int64_t item) {
  const int64_t s = args.tokens_per_item;
  std::vector<KeyRange> rows(static_cast<size_t>(s), KeyRange{0, 0});
  if (s == 0) return rows;  // torch checks no mask shape for empty items
  switch (args.mask) {
    case SdpaArgs::Mask::kNone:
      std::fill(rows.begin(), rows.end(), KeyRange{0, s});
      break;
    case SdpaArgs::Mask::kPadding: {
      const int64_t kept = args.kept[args.kept.size() == 1 ? 0 : item];
      std::fill(rows.begin(), rows.begin() + kept, KeyRange{0, kept});
      break;
    }
    case SdpaArgs::Mask::kBlockDiagonal:
      for (const auto& [begin, end] : args.blocks) {
        for (int64_t r = begin; r < end; ++r) {
          KeyRange& keys = rows[r];
          keys = keys.first == keys.second
                     ? KeyRange{begin, end}
                     : KeyRange{std::min(keys.first, begin), std::max(keys.second, end)};
        }
      }
      break;
  }
  return rows;
}

absl::StatusOr<KernelCall> BindSdpa(const ResolvedArgs& call, const SdpaArgs& args) {
  KernelCallBuilder builder(call.q, call.k, call.v, args.scale, call.q.dtype());
  const int64_t s = args.tokens_per_item;
  const std::string path =
      args.single_precision ? "matmul + float32 softmax + matmul" : "scaled_dot_product_attention";
  // Single precision adds (~mask) * finfo(dtype).min, computed in float32:
  // for float64 that is 0 * -inf = NaN on every kept logit.
  if (args.single_precision && call.q.dtype() == DType::kFloat64) {
    builder.AddNanRows(0, args.bsz * s);
    return builder.Finish(absl::StrCat(path, ": the float64 mask is NaN, so is every row"));
  }
  if (args.causal) {
    // SDPA refuses is_causal beside a mask; an item without one is one sequence.
    if (args.mask != SdpaArgs::Mask::kNone) {
      return absl::UnimplementedError("scaled_dot_product_attention: is_causal with a mask");
    }
    AttentionVariant causal;
    causal.window_right = 0;
    builder.SetVariant(causal);
  }
  for (int64_t item = 0; item < args.bsz; ++item) {
    const int64_t base = item * s;
    const std::vector<KeyRange> rows = MaskRows(args, item);
    // Consecutive rows with the same keys form one sequence.
    for (int64_t first = 0, next = 0; first < s; first = next) {
      const KeyRange keys = rows[first];
      while (next < s && rows[next] == keys) ++next;
      const int64_t count = next - first;
      if (keys.second > keys.first) {
        builder.AddTokenSequence(base + first, count, base + keys.first, keys.second - keys.first);
      } else if (!args.single_precision) {
        builder.AddTokenSequence(base + first, count, base, 0);  // torch writes 0
      } else if (call.q.dtype() == DType::kFloat16) {
        // finfo(float16).min = -65504 shifts every logit alike: the row
        // attends to the whole item.
        builder.AddTokenSequence(base + first, count, base, s);
      } else {
        builder.AddUniformRows(base + first, count, base, s);  // -3.4e38 swamps every logit
      }
    }
  }
  return builder.Finish(
      absl::StrCat(path,
                   args.mask != SdpaArgs::Mask::kNone ? " with a boolean mask over "
                   : args.causal                      ? " with is_causal=True over "
                                                      : " without a mask over ",
                   args.bsz, args.bsz == 1 ? " item" : " items", " of ", s, " tokens"));
}

}  // namespace

namespace {

absl::StatusOr<KernelCall> BindArgs(const ResolvedArgs& resolved) {
  if (const auto* a = std::get_if<FlashinferCudnnArgs>(&resolved.args)) {
    return BindFlashinferCudnn(resolved, *a);
  }
  if (const auto* a = std::get_if<FlashVarlenArgs>(&resolved.args))
    return BindFlashVarlen(resolved, *a);
  if (const auto* a = std::get_if<TritonArgs>(&resolved.args)) return BindTriton(resolved, *a);
  if (const auto* a = std::get_if<AscendArgs>(&resolved.args)) return BindAscend(resolved, *a);
  return BindSdpa(resolved, std::get<SdpaArgs>(resolved.args));
}

}  // namespace

bool IsKernelCapabilityLimit(const absl::Status& status) {
  return status.GetPayload(kCapabilityPayload).has_value();
}

absl::StatusOr<KernelCall> BindForKernel(const ResolvedArgs& resolved) {
  absl::StatusOr<KernelCall> call = BindArgs(resolved);
  if (call.ok() && !resolved.after_kernel.ok()) return resolved.after_kernel;
  return call;
}

KernelCall BindGroundTruth(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<int64_t>& starts, const std::vector<int64_t>& lengths,
                           double softmax_scale, DType output_dtype,
                           const AttentionVariant& variant) {
  KernelCallBuilder builder(q, k, v, softmax_scale, output_dtype);
  builder.SetVariant(variant);
  for (size_t i = 0; i < lengths.size(); ++i) builder.AddTokenSequence(starts[i], lengths[i]);
  return builder.Finish("ground truth");
}

KernelCall BindGroundTruth(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<int64_t>& lengths, double softmax_scale,
                           DType output_dtype, const AttentionVariant& variant) {
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (int64_t length : lengths) {
    starts.push_back(start);
    start += length;
  }
  return BindGroundTruth(q, k, v, starts, lengths, softmax_scale, output_dtype, variant);
}

}  // namespace varlen
