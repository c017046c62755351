// vLLM's MMEncoderAttention (0.33.0) resolution for the FLASH_ATTN,
// TRITON_ATTN, TORCH_SDPA and FLASHINFER profiles (docs/contract-vllm.md).
//
// Faithful mode follows forward_cuda step for step: Python's binding of the
// closed keyword set, the both-or-neither assertion (flash, Triton), the
// view to [b, s, heads, head_size] that misreads a packed [T, H, D] tensor,
// the custom op's schema as the type gate (a Python int max_seqlen is the
// dispatcher's RuntimeError, never int()), then the op body: uniform offsets
// when cu_seqlens is None, max_seqlen.item() keeping a float a float, or
// q.size(1) when None; cu_seqlens is never cast or moved. The kernels' own
// checks are the binding's (bind.cc).
//
// Hardened mode takes the same argument forms and refuses, before any
// launch, whatever would give a wrong one.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

// The keywords MMEncoderAttention.forward_cuda accepts besides q, k, v.
constexpr absl::string_view kKeywords[] = {"cu_seqlens", "max_seqlen", "sequence_lengths"};

// One custom op's schema, for the dispatcher's message.
struct OpSchema {
  absl::string_view name;
  absl::string_view declaration;
  int cu_position, max_position, lengths_position;  // -1: not an argument
};

OpSchema SchemaOf(Profile profile) {
  switch (profile) {
    case Profile::kVllmTritonAttn:
      return {"triton_attn_wrapper",
              "vllm::triton_attn_wrapper(Tensor q, Tensor k, Tensor v, SymInt batch_size, float? "
              "scale=None, Tensor? cu_seqlens=None, Tensor? max_seqlen=None) -> Tensor",
              5, 6, -1};
    case Profile::kVllmTorchSdpa:
      return {"torch_sdpa_wrapper",
              "vllm::torch_sdpa_wrapper(Tensor q, Tensor k, Tensor v, float? scale=None, Tensor? "
              "cu_seqlens=None, bool enable_gqa=False) -> Tensor",
              4, -1, -1};
    case Profile::kVllmFlashinfer:
      return {"flashinfer_wrapper",
              "vllm::flashinfer_wrapper(Tensor q, Tensor k, Tensor v, float scale, Tensor "
              "workspace_buffer, Tensor? cu_seqlens=None, Tensor? max_seqlen=None, Tensor? "
              "sequence_lengths=None, Tensor? q_scale=None, Tensor? k_scale=None, Tensor? "
              "v_scale=None, ScalarType? o_data_type=None) -> Tensor",
              5, 6, 7};
    default:
      return {"flash_attn_maxseqlen_wrapper",
              "vllm::flash_attn_maxseqlen_wrapper(Tensor q, Tensor k, Tensor v, SymInt "
              "batch_size, bool is_rocm_aiter, SymInt? fa_version, float? scale=None, Tensor? "
              "cu_seqlens=None, Tensor? max_seqlen=None) -> Tensor",
              7, 8, -1};
  }
}

// The dispatcher's refusal of a non-tensor for a Tensor? argument.
absl::Status GateError(const OpSchema& op, absl::string_view argument, int position,
                       const Value& value) {
  const std::optional<std::string> repr = DispatcherRepr(value);
  if (!repr.has_value()) {
    return absl::UnimplementedError(absl::StrCat(
        "the dispatcher refuses ", argument, "=", value.Repr(),
        " and quotes it as torch prints it: that printing is not modelled for this value"));
  }
  return PythonError(
      PyErrorKind::kRuntimeError,
      absl::StrCat("vllm::", op.name,
                   "() Expected a value of type 'Optional[Tensor]' for argument '", argument,
                   "' but instead found type '", value.TypeName(), "'.\nPosition: ", position,
                   "\nValue: ", *repr, "\nDeclaration: ", op.declaration,
                   "\nCast error details: Unable to cast ",
                   value.kind() == Value::Kind::kStr ? value.as_str() : *repr, " to Tensor"));
}

// The op's Tensor? arguments, in position order.
absl::Status CheckSchema(const ResolveContext& ctx, Profile profile, const Value& cu) {
  const OpSchema op = SchemaOf(profile);
  const std::pair<absl::string_view, int> arguments[] = {{"cu_seqlens", op.cu_position},
                                                         {"max_seqlen", op.max_position},
                                                         {"sequence_lengths", op.lengths_position}};
  for (const auto& [name, position] : arguments) {
    if (position < 0) continue;
    const Value value = name == "cu_seqlens" ? cu : ctx.kwargs.get(name);
    if (!value.is_none() && !value.is_tensor()) return GateError(op, name, position, value);
  }
  return absl::OkStatus();
}

// Python's binding of forward_cuda's arguments: the first keyword it does not
// take (forward_metadata last, where a caller moving from SGLang adds it).
absl::Status CheckKeywords(const AttentionCall& call) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : call.kwargs.items()) keys.push_back(key);
  if (call.forward_metadata.has_value()) keys.push_back("forward_metadata");
  for (const std::string& key : keys) {
    if (std::find(std::begin(kKeywords), std::end(kKeywords), key) == std::end(kKeywords)) {
      return PythonError(
          PyErrorKind::kTypeError,
          absl::StrCat("MMEncoderAttention.forward_cuda() got an unexpected keyword argument '",
                       key, "'"));
    }
  }
  return absl::OkStatus();
}

// view_qkv_to_4d: query.view(bsz, q_len, heads, head_size) with bsz, q_len
// from query.size()[:2] and kv_len from key.size(1).
absl::StatusOr<Tensor> ViewTo4d(const Tensor& t, int64_t bsz, int64_t len, int64_t heads,
                                int64_t head_size) {
  const Shape shape = {bsz, len, heads, head_size};
  if (ShapeNumel(shape) != t.numel()) {
    return PythonError(PyErrorKind::kRuntimeError,
                       absl::StrCat("shape '", ShapeToString(shape),
                                    "' is invalid for input of size ", t.numel()));
  }
  if (t.dim() == 4) return t;
  // [b, s, heads * head_size] splits its last, unit-stride dimension.
  const Shape& st = t.strides();
  return t.AsStrided(shape, {st[0], st[1], head_size * st[2], st[2]}, 0);
}

// einops "b s ... -> (b s) ...": [b, s, h, d] -> [b * s, h, d], a view when
// the items follow one another at the token stride, else a copy.
Tensor Flatten(const Tensor& t) { return FlattenBatch(CanFlattenBatch(t) ? t : t.Contiguous()); }

struct Views {
  Tensor q, k, v;  // [b, s, heads, head_size]
  int64_t bsz = 0, q_len = 0;
};

absl::StatusOr<Views> ViewQkv(const AttentionCall& call) {
  const VllmLayer& layer = call.vllm_layer;
  Views views;
  views.bsz = call.q.size(0);
  views.q_len = call.q.size(1);
  const int64_t kv_len = call.k.size(1);
  VARLEN_ASSIGN_OR_RETURN(
      views.q, ViewTo4d(call.q, views.bsz, views.q_len, layer.num_heads, layer.head_size));
  VARLEN_ASSIGN_OR_RETURN(views.k,
                          ViewTo4d(call.k, views.bsz, kv_len, layer.num_kv_heads, layer.head_size));
  VARLEN_ASSIGN_OR_RETURN(views.v,
                          ViewTo4d(call.v, views.bsz, kv_len, layer.num_kv_heads, layer.head_size));
  return views;
}

double LayerScale(const AttentionCall& call) {
  return call.vllm_layer.scale.value_or(
      DefaultSoftmaxScale(Profile::kVllmFlashAttnFa2, call.vllm_layer.head_size));
}

void SetInputs(ResolvedArgs* resolved, const Tensor& q, const Tensor& k, const Tensor& v) {
  resolved->q = Flatten(q);
  resolved->k = Flatten(k);
  resolved->v = Flatten(v);
}

// --- faithful ---------------------------------------------------------------

// The flash and Triton ops' shared body: uniform offsets when cu_seqlens is
// None, max_seqlen.item() or q.size(1).
struct OpOffsets {
  Tensor cu;
  Value max_seqlen;
};

absl::StatusOr<OpOffsets> OpBody(const ResolveContext& ctx, const Views& views) {
  OpOffsets out;
  const Value cu = ctx.call.cu_seqlens;
  if (cu.is_none()) {
    ctx.Note("cu_seqlens None: uniform offsets arange(0, (b+1)*s, s) on q's device");
    VARLEN_ASSIGN_OR_RETURN(out.cu, Arange(0, (views.bsz + 1) * views.q_len, views.q_len,
                                           DType::kInt32, ctx.call.q.device()));
  } else {
    ctx.Note("cu_seqlens passed on as given (neither cast nor moved)");
    out.cu = cu.as_tensor();
  }
  const Value max = ctx.kwargs.get("max_seqlen");
  if (max.is_none()) {
    ctx.Note(absl::StrCat("max_seqlen None: q.size(1) = ", views.q_len));
    out.max_seqlen = Value::Int(views.q_len);
  } else {
    VARLEN_ASSIGN_OR_RETURN(out.max_seqlen, Item(max.as_tensor(), "max_seqlen.item()"));
  }
  return out;
}

// What the wrapper raises once the kernel returned: einops' "(b s) h d -> b
// s h d" with b = 0 divides by it; the final reshape(bsz, q_len, -1) of a
// [b, s, H*D] input cannot infer -1 from an empty output.
absl::Status AfterKernel(const AttentionCall& call, const Views& views, bool rearranges) {
  if (rearranges && views.bsz == 0) {
    return PythonError(PyErrorKind::kZeroDivisionError, "integer modulo by zero");
  }
  if (call.q.dim() != 4 && views.bsz * views.q_len == 0) {
    return PythonError(PyErrorKind::kRuntimeError,
                       absl::StrCat("cannot reshape tensor of 0 elements into shape [", views.bsz,
                                    ", ", views.q_len,
                                    ", -1] because the unspecified dimension size -1 can be any "
                                    "value and is ambiguous"));
  }
  return absl::OkStatus();
}

absl::Status CheckBothOrNeither(const ResolveContext& ctx) {
  if (ctx.call.cu_seqlens.is_none() != ctx.kwargs.get("max_seqlen").is_none()) {
    return PythonError(PyErrorKind::kAssertionError,
                       "cu_seqlens and max_seqlen should be both set or both None.");
  }
  return absl::OkStatus();
}

absl::StatusOr<ResolvedArgs> FaithfulFlashOrTriton(const ResolveContext& ctx, Profile profile) {
  VARLEN_RETURN_IF_ERROR(CheckBothOrNeither(ctx));
  VARLEN_ASSIGN_OR_RETURN(Views views, ViewQkv(ctx.call));
  VARLEN_RETURN_IF_ERROR(CheckSchema(ctx, profile, ctx.call.cu_seqlens));
  VARLEN_ASSIGN_OR_RETURN(OpOffsets op, OpBody(ctx, views));
  ResolvedArgs resolved;
  SetInputs(&resolved, views.q, views.k, views.v);
  resolved.after_kernel = AfterKernel(ctx.call, views, /*rearranges=*/true);
  if (profile == Profile::kVllmTritonAttn) {
    // b_start_loc = cu[:-1], b_seq_len = cu[1:] - cu[:-1]: device-side
    // (vit_attn_wrappers.py:192-193), a view of any shape and dtype.
    VARLEN_ASSIGN_OR_RETURN(Tensor b_start_loc, WithoutLastRow(op.cu));
    VARLEN_ASSIGN_OR_RETURN(Tensor b_seq_len, SubtractShifted(op.cu));
    TritonArgs args;
    args.cu_seqlens = Value::FromTensor(std::move(b_start_loc));
    args.seq_lens = Value::FromTensor(std::move(b_seq_len));
    args.max_seqlen = op.max_seqlen;
    args.scale = LayerScale(ctx.call);
    resolved.args = args;
  } else {
    FlashVarlenArgs args;
    args.fa_version = profile == Profile::kVllmFlashAttnFa3 ? 3 : 2;
    args.disables_uneven_k = args.fa_version == 2 && Fa2DisablesUnevenK(ctx.call.platform);
    args.cu_seqlens = Value::FromTensor(op.cu);
    args.max_seqlen = op.max_seqlen;
    args.scale = LayerScale(ctx.call);
    resolved.args = args;
  }
  return resolved;
}

absl::StatusOr<ResolvedArgs> FaithfulSdpa(const ResolveContext& ctx) {
  VARLEN_ASSIGN_OR_RETURN(Views views, ViewQkv(ctx.call));
  VARLEN_RETURN_IF_ERROR(CheckSchema(ctx, Profile::kVllmTorchSdpa, ctx.call.cu_seqlens));
  std::vector<int64_t> lens;
  if (!ctx.call.cu_seqlens.is_none()) {
    const Tensor& cu = ctx.call.cu_seqlens.as_tensor();
    ctx.Note(
        "lens = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist(); max_seqlen and "
        "sequence_lengths are never read");
    VARLEN_ASSIGN_OR_RETURN(
        lens, SplitSizesOf(cu, /*reads=*/1, "(cu_seqlens[1:] - cu_seqlens[:-1]).tolist()"));
    VARLEN_RETURN_IF_ERROR(CheckSplitSizes(lens, views.q_len, /*dim=*/1));
  }
  ResolvedArgs resolved;
  SetInputs(&resolved, views.q, views.k, views.v);
  resolved.after_kernel = AfterKernel(ctx.call, views, /*rearranges=*/false);
  resolved.args = ChunkedSdpa(lens, views.bsz, views.q_len, LayerScale(ctx.call));
  return resolved;
}

// flashinfer_wrapper's launch: cu_seqlens split into its two sections
// [q, k and o | v], the lengths as (-1, 1, 1, 1), one max for q and kv.
FlashinferCudnnArgs FlashinferArgsOf(const AttentionCall& call, const Tensor& cu,
                                     const Tensor& lengths, int64_t max_seqlen) {
  const int64_t half = cu.size(0) / 2;
  FlashinferCudnnArgs args;
  args.batch_offsets_qk = cu.Slice(0, half).Reshape({-1, 1, 1, 1});
  args.batch_offsets_v = cu.Slice(half, 2 * half).Reshape({-1, 1, 1, 1});
  args.batch_offsets_o = args.batch_offsets_qk;
  args.actual_seq_lens = lengths.Reshape({-1, 1, 1, 1});
  args.max_token_per_sequence = max_seqlen;
  args.max_sequence_kv = max_seqlen;
  args.scale = LayerScale(call);
  args.output_4d = call.q.dim() == 4;
  args.input_shape = call.q.shape();
  args.inputs_as_strided = true;
  return args;
}

absl::StatusOr<ResolvedArgs> FaithfulFlashinfer(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_RETURN_IF_ERROR(CheckSchema(ctx, Profile::kVllmFlashinfer, call.cu_seqlens));
  const Value max = ctx.kwargs.get("max_seqlen");
  const Value lengths = ctx.kwargs.get("sequence_lengths");
  // q and k made contiguous; v left as the projection made it.
  const Tensor q = Flatten(call.q).Contiguous(), k = Flatten(call.k).Contiguous();
  const Tensor v = Flatten(call.v);
  for (const Value* required : {&call.cu_seqlens, &max, &lengths}) {
    if (required->is_none()) return PythonError(PyErrorKind::kAssertionError, "");
  }
  const Tensor& cu = call.cu_seqlens.as_tensor();
  if (cu.dim() == 0) return PythonError(PyErrorKind::kTypeError, "len() of a 0-d tensor");
  if (cu.size(0) % 2 != 0) {
    return PythonError(PyErrorKind::kAssertionError, "cu_seqlens must be divisible by 2");
  }
  if (cu.dim() != 1 || !cu.is_contiguous() || !lengths.as_tensor().is_contiguous()) {
    return absl::UnimplementedError(
        "a multi-dimensional or strided cu_seqlens or sequence_lengths is not modelled");
  }
  VARLEN_ASSIGN_OR_RETURN(Value m, Item(max.as_tensor(), "max_seqlen.item()"));
  if (m.kind() != Value::Kind::kInt) {
    return absl::UnimplementedError(
        absl::StrCat("max_seqlen.item() is ", m.Repr(), " (", m.TypeName(),
                     "): cudnn_batch_prefill_with_kv_cache's response is not modelled"));
  }
  FlashinferCudnnArgs args = FlashinferArgsOf(call, cu, lengths.as_tensor(), m.as_int());
  ctx.Note("offsets: [q, k and o | v] element sections, v with its own strides");
  ResolvedArgs resolved;
  resolved.q = q;
  resolved.k = k;
  resolved.v = v;
  if (call.q.dim() == 4 && call.q.size(0) == 0) {
    resolved.after_kernel = PythonError(PyErrorKind::kZeroDivisionError, "integer modulo by zero");
  }
  resolved.args = args;
  return resolved;
}

// --- hardened ---------------------------------------------------------------

absl::Status HardenedTypes(const ResolveContext& ctx, Profile profile) {
  const std::pair<absl::string_view, Value> arguments[] = {
      {"cu_seqlens", ctx.call.cu_seqlens},
      {"max_seqlen", ctx.kwargs.get("max_seqlen")},
      {"sequence_lengths", ctx.kwargs.get("sequence_lengths")}};
  for (const auto& [name, value] : arguments) {
    if (value.is_none() || value.is_tensor()) continue;
    return PythonError(
        PyErrorKind::kTypeError,
        absl::StrCat(name, "=", value.Repr(), " (", value.TypeName(), "): vLLM's ",
                     SchemaOf(profile).name,
                     " takes it as a tensor or None (its schema says Tensor?)",
                     name == "max_seqlen" ? "; pass torch.tensor(n, dtype=torch.int32)" : ""));
  }
  return absl::OkStatus();
}

// q, k and v as the layer reads them: [b, s, heads, head_size] or
// [b, s, heads * head_size], with the layer's head counts.
absl::StatusOr<Views> HardenedViews(const AttentionCall& call) {
  const VllmLayer& layer = call.vllm_layer;
  const auto describe = [&](absl::string_view name, const Tensor& t, int64_t heads) {
    return absl::StrCat(name, " has shape ", ShapeToString(t.shape()),
                        ": MMEncoderAttention(num_heads=", layer.num_heads,
                        ", num_kv_heads=", layer.num_kv_heads, ", head_size=", layer.head_size,
                        ") reads [batch, seq, ", heads, ", ", layer.head_size, "] or [batch, seq, ",
                        heads * layer.head_size, "]");
  };
  const std::pair<absl::string_view, const Tensor*> tensors[] = {
      {"q", &call.q}, {"k", &call.k}, {"v", &call.v}};
  for (const auto& [name, t] : tensors) {
    const int64_t heads = t == &call.q ? layer.num_heads : layer.num_kv_heads;
    const bool as_4d = t->dim() == 4 && t->size(2) == heads && t->size(3) == layer.head_size;
    const bool as_3d = t->dim() == 3 && t->size(2) == heads * layer.head_size;
    if (!as_4d && !as_3d) {
      std::string hint;
      if (t->dim() == 3 && t->size(1) == heads && t->size(2) == layer.head_size) {
        hint = absl::StrCat(" (a packed [T, H, D] tensor would be read as batch=", t->size(0),
                            ", seq=", t->size(1), "; add the batch dimension: x.unsqueeze(0))");
      }
      return PythonError(PyErrorKind::kValueError, absl::StrCat(describe(name, *t, heads), hint));
    }
    if (t->size(0) != call.q.size(0) || t->size(1) != call.q.size(1) || t->dim() != call.q.dim()) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat(name, " has shape ", ShapeToString(t->shape()), " and q ",
                                      ShapeToString(call.q.shape()),
                                      ": q, k and v must agree on batch, seq and rank"));
    }
  }
  return ViewQkv(call);
}

// Hardened: refuses up front what the wrapper would raise after the kernel.
absl::Status HardenedAfterKernel(const AttentionCall& call, const Views& views, bool rearranges) {
  const absl::Status after = AfterKernel(call, views, rearranges);
  if (after.ok()) return after;
  return PythonError(PyErrorKind::kValueError,
                     absl::StrCat("q has shape ", ShapeToString(call.q.shape()),
                                  ": an empty batch, on which vLLM's wrapper fails after the "
                                  "kernel (",
                                  FormatPythonError(after), ")"));
}

absl::StatusOr<ResolvedArgs> HardenedFlashOrTriton(const ResolveContext& ctx, Profile profile,
                                                   const Views& views) {
  const AttentionCall& call = ctx.call;
  const Value max = ctx.kwargs.get("max_seqlen");
  if (call.cu_seqlens.is_none() != max.is_none()) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat(call.cu_seqlens.is_none() ? "max_seqlen is given but cu_seqlens is None"
                                               : "cu_seqlens is given but max_seqlen is None",
                     ": vLLM's ", SchemaOf(profile).name,
                     " takes both (packed sequences) or neither (each batch item one sequence)"));
  }
  const int64_t tokens = views.bsz * views.q_len;
  CheckedCuSeqlens checked;
  if (call.cu_seqlens.is_none()) {
    if (views.q_len == 0 && views.bsz > 0) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat("q has ", views.bsz,
                                      " batch items of 0 tokens and no cu_seqlens: uniform "
                                      "offsets need at least one token per item"));
    }
    std::vector<int64_t> offsets;
    for (int64_t b = 0; b <= views.bsz; ++b) offsets.push_back(b * views.q_len);
    checked.cu = Tensor::FromInts(offsets, DType::kInt32, call.q.device());
    checked.offsets = offsets;
    checked.longest = LongestOfOffsets(offsets, "the uniform offsets");
  } else {
    VARLEN_ASSIGN_OR_RETURN(
        checked, CheckCuSeqlensForKernel(ctx, call.cu_seqlens.as_tensor(), "cu_seqlens", tokens,
                                         /*may_cast=*/true));
  }
  int64_t max_seqlen = views.q_len;
  if (!max.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(max_seqlen, CheckMaxSeqlen(max, checked.longest.value,
                                                       checked.longest.source, "max_seqlen"));
  }
  VARLEN_RETURN_IF_ERROR(
      CheckUnusedBoundariesAgree(ctx, checked.offsets, "cu_seqlens", kSequenceLengthsKwarg));
  const VllmLayer& layer = call.vllm_layer;
  const int64_t batch = static_cast<int64_t>(checked.offsets.size()) - 1;
  if (profile == Profile::kVllmFlashAttnFa2 && max_seqlen == 1 &&
      layer.num_heads > layer.num_kv_heads && layer.head_size % 8 == 0 && tokens != batch) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("max_seqlen=1 with ", layer.num_heads, " query heads over ",
                     layer.num_kv_heads, " key/value heads and ", batch - tokens,
                     " empty sequences: FlashAttention 2 then reads one row per sequence "
                     "(Dao-AILab/flash-attention#1537); drop the empty sequences from cu_seqlens"));
  }
  ResolvedArgs resolved;
  SetInputs(&resolved, views.q, views.k, views.v);
  if (profile == Profile::kVllmTritonAttn) {
    TritonArgs args;
    args.cu_seqlens = Value::FromTensor(checked.cu);
    args.seq_lens = Value::FromTensor(Diff(checked.cu));
    args.max_seqlen = Value::Int(max_seqlen);
    args.scale = LayerScale(call);
    resolved.args = args;
  } else {
    FlashVarlenArgs args;
    args.fa_version = profile == Profile::kVllmFlashAttnFa3 ? 3 : 2;
    args.disables_uneven_k = args.fa_version == 2 && Fa2DisablesUnevenK(call.platform);
    args.cu_seqlens = Value::FromTensor(checked.cu);
    args.max_seqlen = Value::Int(max_seqlen);
    args.scale = LayerScale(call);
    resolved.args = args;
  }
  return resolved;
}

absl::StatusOr<ResolvedArgs> HardenedSdpa(const ResolveContext& ctx, const Views& views) {
  std::vector<int64_t> lens;
  if (!ctx.call.cu_seqlens.is_none()) {
    // Every item is split by the same offsets, which must cover it.
    VARLEN_ASSIGN_OR_RETURN(
        std::vector<int64_t> offsets,
        CheckTokenOffsets(ctx.call.cu_seqlens.as_tensor(), "cu_seqlens", views.q_len));
    if (offsets.size() < 2) {
      return PythonError(PyErrorKind::kValueError,
                         "cu_seqlens=[0] describes no sequence: TORCH_SDPA splits each item by "
                         "it and needs at least one (B+1 >= 2 entries)");
    }
    VARLEN_RETURN_IF_ERROR(
        CheckUnusedBoundariesAgree(ctx, offsets, "cu_seqlens", kSequenceLengthsKwarg));
    lens = OffsetsToLengths(offsets);
  }
  ResolvedArgs resolved;
  SetInputs(&resolved, views.q, views.k, views.v);
  resolved.args = ChunkedSdpa(lens, views.bsz, views.q_len, LayerScale(ctx.call));
  return resolved;
}

// Hardened FLASHINFER: the two sections must be the element offsets of the
// lengths, in q's and v's own token strides, inside q and v.
absl::StatusOr<ResolvedArgs> HardenedFlashinfer(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  const Value max = ctx.kwargs.get("max_seqlen");
  const Value lengths_value = ctx.kwargs.get("sequence_lengths");
  for (const auto& [name, value] :
       {std::pair<absl::string_view, const Value*>{"cu_seqlens", &call.cu_seqlens},
        {"max_seqlen", &max},
        {"sequence_lengths", &lengths_value}}) {
    if (value->is_none()) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat(name,
                                      " is None: FLASHINFER needs cu_seqlens, max_seqlen and "
                                      "sequence_lengths as MMEncoderAttention's builders make them "
                                      "(maybe_recompute_cu_seqlens, compute_max_seqlen, "
                                      "maybe_compute_seq_lens)"));
    }
  }
  const Tensor q = Flatten(call.q).Contiguous(), k = Flatten(call.k).Contiguous();
  const Tensor v = Flatten(call.v);
  if (q.dim() != 3 || q.size(1) != call.vllm_layer.num_heads ||
      q.size(2) != call.vllm_layer.head_size) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("q has shape ", ShapeToString(call.q.shape()), ": FLASHINFER reads [T, ",
                     call.vllm_layer.num_heads, ", ", call.vllm_layer.head_size, "] or [b, s, ",
                     call.vllm_layer.num_heads, ", ", call.vllm_layer.head_size, "]"));
  }
  // k is read at q's offsets (batch_offsets_k is batch_offsets_q), and the
  // output, torch.empty_like(q), is written at them with v's heads and head
  // size (flashinfer/cudnn/prefill.py): both must be shaped as q.
  for (const auto& [name, t, role] :
       {std::tuple<absl::string_view, const Tensor*, absl::string_view>{
            "k", &k, "is read at q's offsets (batch_offsets_k = batch_offsets_q)"},
        {"v", &v,
         "gives the output its heads and head size, and the output is torch.empty_like(q)"}}) {
    if (t->dim() != 3 || t->size(0) != q.size(0) || t->size(1) != q.size(1) ||
        t->size(2) != q.size(2)) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat(name, " has shape ", ShapeToString(t->shape()),
                                      " as FLASHINFER reads it and q ", ShapeToString(q.shape()),
                                      ": ", name, " ", role, ", so it must have q's shape"));
    }
  }
  const Tensor& cu = call.cu_seqlens.as_tensor();
  const Device device = q.device();
  for (const auto& [name, t] : {std::pair<absl::string_view, const Tensor*>{"cu_seqlens", &cu},
                                {"sequence_lengths", &lengths_value.as_tensor()}}) {
    if (t->dtype() != DType::kInt32 || t->device() != device) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(name, " is ", DTypeName(t->dtype()), " on ", DeviceName(t->device()),
                       ": cuDNN reads it on the device as int32 (q is on ", DeviceName(device),
                       ")"));
    }
    if (!t->is_contiguous()) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat(name, " has strides ", ShapeToString(t->strides()),
                                      ": cuDNN reads it as a dense array"));
    }
  }
  VARLEN_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, CheckSequenceLengths(lengths_value));
  const std::vector<int64_t> entries = cu.ToHostInts("cu_seqlens (validation)");
  if (cu.dim() != 1 || entries.size() != 2 * (lengths.size() + 1)) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("cu_seqlens has ", entries.size(), " entries and sequence_lengths ",
                     lengths.size(),
                     ": FLASHINFER's offsets are two sections of len + 1 = ", lengths.size() + 1,
                     " entries each ([q, k and o | v]), ", 2 * (lengths.size() + 1), " in all"));
  }
  const int64_t half = static_cast<int64_t>(lengths.size()) + 1;
  const int64_t tokens = q.size(0);
  int64_t start = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    const std::pair<absl::string_view, std::pair<int64_t, int64_t>> sections[] = {
        {"q, k and o", {entries[b], q.strides()[0]}}, {"v", {entries[half + b], v.strides()[0]}}};
    for (const auto& [section, offset_stride] : sections) {
      const auto [offset, stride] = offset_stride;
      // Past a lone token the offset addresses nothing, and that token's
      // stride is whatever torch's reshape chose (a size-1 dimension's).
      if (tokens == 1 && start == 1) continue;
      if (offset != start * stride) {
        const int64_t index = section == "v" ? half + static_cast<int64_t>(b) : b;
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat("cu_seqlens[", index, "]=", offset, " but sequence ", b,
                         " starts at token ", start, ", element ", start * stride, " of ", section,
                         " (token stride ", stride,
                         "): the offsets must be the sequence lengths' running sums times the "
                         "tensor's token stride"));
      }
    }
    start += lengths[b];
  }
  if (start != tokens) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("sequence_lengths sum to ", start, " but q has ", tokens,
                                    " tokens: every token must be in one sequence"));
  }
  const Longest longest = FindLongest(lengths, "sequence_lengths");
  VARLEN_ASSIGN_OR_RETURN(int64_t m, CheckMaxSeqlen(max, longest.value, longest.source));
  const FlashinferCudnnArgs args = FlashinferArgsOf(call, cu, lengths_value.as_tensor(), m);
  ResolvedArgs resolved;
  resolved.q = q;
  resolved.k = k;
  resolved.v = v;
  resolved.args = args;
  return resolved;
}

// The profile's resolver: the arguments and the q, k and v the kernel
// receives.
absl::StatusOr<ResolvedArgs> ResolveVllm(const ResolveContext& ctx, Profile profile) {
  VARLEN_RETURN_IF_ERROR(CheckKeywords(ctx.call));
  if (ctx.hardened()) {
    VARLEN_RETURN_IF_ERROR(HardenedTypes(ctx, profile));
    if (profile == Profile::kVllmFlashinfer) {
      if (ctx.call.q.dim() == 4 && ctx.call.q.size(0) == 0) {
        return PythonError(PyErrorKind::kValueError,
                           absl::StrCat("q has shape ", ShapeToString(ctx.call.q.shape()),
                                        ": a batch of 0, on which vLLM's wrapper fails after the "
                                        "kernel (ZeroDivisionError: integer modulo by zero)"));
      }
      return HardenedFlashinfer(ctx);
    }
    VARLEN_ASSIGN_OR_RETURN(Views views, HardenedViews(ctx.call));
    const bool sdpa = profile == Profile::kVllmTorchSdpa;
    VARLEN_RETURN_IF_ERROR(HardenedAfterKernel(ctx.call, views, /*rearranges=*/!sdpa));
    if (sdpa) return HardenedSdpa(ctx, views);
    return HardenedFlashOrTriton(ctx, profile, views);
  }
  switch (profile) {
    case Profile::kVllmTorchSdpa:
      return FaithfulSdpa(ctx);
    case Profile::kVllmFlashinfer:
      return FaithfulFlashinfer(ctx);
    default:
      return FaithfulFlashOrTriton(ctx, profile);
  }
}

}  // namespace

// MMEncoderAttention is vLLM's only entry: it takes the caller's arguments as
// they are, and the resolver says what the kernel receives.
absl::StatusOr<ResolvedArgs> ResolveVllmCall(const AttentionCall& call, Profile profile, Mode mode,
                                             Resolution* record) {
  const ResolveContext ctx{call, LookedUpKwargs(call.kwargs), mode,
                           BehaviorOf(kLatestSglangVersion), &record->notes};
  absl::StatusOr<ResolvedArgs> args = ResolveVllm(ctx, profile);
  // Only a call that went through has read all it will read. forward_cuda
  // names its keywords and refuses others (CheckKeywords).
  if (args.ok()) record->unread_keywords = ctx.kwargs.NeverLookedUp();
  return args;
}

AttentionCall VllmBackendCall(const AttentionCall& call, Profile) { return call; }

// MMEncoderAttention's constructor: 1.0 / (head_size**0.5).
double VllmDefaultSoftmaxScale(Profile, int64_t head_dim) {
  return 1.0 / std::pow(static_cast<double>(head_dim), 0.5);
}

}  // namespace varlen::internal
