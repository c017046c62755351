// sdpa resolution (contract §2.1): VisionSdpaAttention.forward as torch runs
// it. The boolean mask is built on the host from cu_seqlens
// (`cu.cpu().tolist()`, a host sync): block-diagonal with flatten_batch, else
// a per-item padding mask [n, 1, s, s]. q, k and v are reshaped to
// [bsz, s, heads, head_dim] and attended with the construction-time scale
// (the per-call softmax_scale is ignored), either by
// F.scaled_dot_product_attention or, with softmax_in_single_precision, by
// matmul + softmax + matmul.
//
// Faithful mode reproduces torch 2.15's CPU errors for the shapes that do
// not fit: the reshapes, the q @ k^T broadcast across unequal head counts,
// and the mask's batch against q's. Hardened mode refuses every call whose
// mask does not give each ground-truth sequence exactly its own keys.

#include <algorithm>
#include <cmath>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/device_ledger.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

absl::Status TorchError(absl::string_view message) {
  return PythonError(PyErrorKind::kRuntimeError, message);
}

// torch's broadcast error between the sizes of one dimension.
absl::Status SizeMismatch(int64_t a, int64_t b, int dim) {
  return TorchError(absl::StrCat("The size of tensor a (", a, ") must match the size of tensor b (",
                                 b, ") at non-singleton dimension ", dim));
}

// `t.reshape(shape)` of a tensor of `numel` elements.
absl::Status CheckReshape(const Shape& shape, int64_t numel) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return TorchError(absl::StrCat("invalid shape dimension ", shape[i], " at index ", i,
                                     " of shape ", ShapeToString(shape)));
    }
  }
  if (ShapeNumel(shape) != numel) {
    return TorchError(
        absl::StrCat("shape '", ShapeToString(shape), "' is invalid for input of size ", numel));
  }
  return absl::OkStatus();
}

// Python's floor division, as `q.shape[0] // bsz` computes it.
absl::StatusOr<int64_t> FloorDiv(int64_t a, int64_t b) {
  if (b == 0) {
    return PythonError(PyErrorKind::kZeroDivisionError, "integer division or modulo by zero");
  }
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Python's slice bounds [a:b] on a dimension of length n.
std::pair<int64_t, int64_t> SliceBounds(int64_t a, int64_t b, int64_t n) {
  auto clamp = [n](int64_t i) {
    const absl::int128 wrapped = i < 0 ? absl::int128(i) + n : absl::int128(i);
    return static_cast<int64_t>(std::clamp<absl::int128>(wrapped, 0, n));
  };
  return {clamp(a), clamp(b)};
}

// The scale VisionSdpaAttention was constructed with, as a Python value:
// through the layer VisionAttention passes its own softmax_scale; a direct
// call uses the case's construction option. None becomes 1/math.sqrt(d).
Value ConstructionScale(const ResolveContext& ctx) {
  if (ctx.call.entry == Entry::kLayer) {
    Value scale = ctx.kwargs.get("softmax_scale");
    if (!scale.is_none()) return scale;
  } else if (ctx.call.sdpa.softmax_scale.has_value()) {
    return Value::Float(*ctx.call.sdpa.softmax_scale);
  }
  return Value::Float(DefaultSoftmaxScale(Profile::kSdpa, ctx.call.q.size(-1)));
}

// The construction scale as a number, or the error torch raises when it
// meets a value that is not one: F.scaled_dot_product_attention parses its
// `scale` argument, the single-precision path multiplies by it.
absl::StatusOr<double> NumericScale(const Value& scale, bool single_precision) {
  switch (scale.kind()) {
    case Value::Kind::kFloat:
      return scale.as_float();
    case Value::Kind::kInt:
      return static_cast<double>(scale.as_int());
    case Value::Kind::kBool:
      return scale.as_bool() ? 1.0 : 0.0;
    case Value::Kind::kTensor: {
      const Tensor& t = scale.as_tensor();
      if (t.numel() == 1 && (single_precision || t.dim() == 0) && t.has_storage()) {
        return t.ToHostDoubles("float(softmax_scale)").front();
      }
      if (single_precision) {
        return absl::UnimplementedError(absl::StrCat("a softmax_scale tensor of shape ",
                                                     ShapeToString(t.shape()),
                                                     " broadcast over the logits is not modelled"));
      }
      break;
    }
    default:
      break;
  }
  if (!single_precision) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("scaled_dot_product_attention(): argument 'scale' must be "
                                    "float, not ",
                                    scale.TypeName()));
  }
  if (scale.kind() == Value::Kind::kStr || scale.kind() == Value::Kind::kList) {
    return PythonError(PyErrorKind::kTypeError,
                       "only integer tensors of a single element can be converted to an index");
  }
  return PythonError(
      PyErrorKind::kTypeError,
      absl::StrCat("unsupported operand type(s) for *: 'Tensor' and '", scale.TypeName(), "'"));
}

// generate_patch_attention_mask: `tuple(cu_seqlens.cpu().tolist())`, then
// the cached mask of `s` rows. Sets the mask fields of `args` and returns the
// mask's batch size (1 for the block-diagonal [1, s, s] mask).
absl::StatusOr<int64_t> BuildMask(const ResolveContext& ctx, int64_t s, SdpaArgs* args) {
  const Value& cu = ctx.call.cu_seqlens;
  if (!cu.is_tensor()) {
    return PythonError(PyErrorKind::kAttributeError,
                       absl::StrCat("'", cu.TypeName(), "' object has no attribute 'cpu'"));
  }
  const Tensor host = To(cu.as_tensor(), Device::kCpu, cu.as_tensor().dtype(), "cu_seqlens.cpu()");
  const bool floats = IsFloatingPoint(host.dtype());
  if (host.dim() == 0) {
    const absl::string_view type = floats ? "float" : host.dtype() == DType::kBool ? "bool" : "int";
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("'", type, "' object is not iterable"));
  }
  if (host.dim() >= 2 && host.size(0) > 0) {
    return PythonError(PyErrorKind::kTypeError, "unhashable type: 'list'");  // the lru_cache key
  }
  const int64_t n = host.dim() == 1 ? host.numel() : 0;
  if (!floats) args->cu_seqlens = host.Slice(0, n).ToHostInts("tolist()");
  if (ctx.call.sdpa.flatten_batch) {
    args->mask = SdpaArgs::Mask::kBlockDiagonal;
    ctx.Note("mask: block-diagonal [1, s, s] over cu_seqlens");
    for (int64_t i = 1; i < n; ++i) {
      if (floats) {
        return PythonError(PyErrorKind::kTypeError,
                           "slice indices must be integers or None or have an __index__ method");
      }
      args->blocks.push_back(SliceBounds(args->cu_seqlens[i - 1], args->cu_seqlens[i], s));
    }
    return 1;
  }
  args->mask = SdpaArgs::Mask::kPadding;
  ctx.Note("mask: per-item padding [n, 1, s, s], (row < len) & (col < len)");
  for (int64_t i = 1; i < n; ++i) {
    if (floats) {
      // torch.tensor of Python floats is float32; row < len keeps ceil(len) rows.
      const float length =
          static_cast<float>(host.DoubleAtLogical(i) - host.DoubleAtLogical(i - 1));
      const double kept = std::isnan(length) ? 0.0 : std::clamp<double>(std::ceil(length), 0, s);
      args->kept.push_back(static_cast<int64_t>(kept));
      continue;
    }
    const absl::int128 length = absl::int128(args->cu_seqlens[i]) - args->cu_seqlens[i - 1];
    if (length > std::numeric_limits<int64_t>::max() ||
        length < std::numeric_limits<int64_t>::min()) {
      return PythonError(PyErrorKind::kValueError, "Overflow when unpacking long long");
    }
    args->kept.push_back(static_cast<int64_t>(std::clamp<absl::int128>(length, 0, s)));
  }
  return n > 0 ? n - 1 : 0;
}

absl::StatusOr<SdpaArgs> ResolveFaithful(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  const bool single = call.sdpa.softmax_in_single_precision;
  if (call.sdpa.flatten_batch && call.bsz != 1) {
    return PythonError(PyErrorKind::kAssertionError, "flatten_batch is True, bsz must be 1");
  }
  if (call.q.dim() != 3) {
    return PythonError(PyErrorKind::kAssertionError,
                       absl::StrCat("torch.Size(", ShapeToString(call.q.shape()), ")"));
  }
  const int64_t tokens = call.q.size(0), heads = call.q.size(1), head_dim = call.q.size(2);
  const int64_t kv_heads = call.k.size(1);
  VARLEN_ASSIGN_OR_RETURN(const int64_t s, FloorDiv(tokens, call.bsz));
  SdpaArgs args;
  args.bsz = call.bsz;
  args.tokens_per_item = s;
  args.single_precision = single;
  if (call.entry == Entry::kDirect && !ctx.kwargs.get("softmax_scale").is_none()) {
    ctx.Note("softmax_scale kwarg ignored: sdpa uses its construction-time scale");
  }

  int64_t mask_batch = 1;
  if (!call.cu_seqlens.is_none()) {
    VARLEN_ASSIGN_OR_RETURN(mask_batch, BuildMask(ctx, s, &args));
  } else {
    if (single) return TorchError("Empty attention mask");
    ctx.Note("no cu_seqlens: no mask, each batch item attends to itself");
  }
  if (args.mask != SdpaArgs::Mask::kNone && call.q.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, "attention_mask.to(q.device)");
  }
  // q, k, v.reshape(bsz, s, heads, head_size): the constructor's head_size
  // is q's head_dim, so a different v head_dim does not fit.
  VARLEN_RETURN_IF_ERROR(CheckReshape({call.bsz, s, heads, head_dim}, call.q.numel()));
  VARLEN_RETURN_IF_ERROR(CheckReshape({call.bsz, s, kv_heads, head_dim}, call.k.numel()));
  VARLEN_RETURN_IF_ERROR(CheckReshape({call.bsz, s, kv_heads, head_dim}, call.v.numel()));

  const Value scale = ConstructionScale(ctx);
  // q @ k^T broadcasts [bsz, heads] against [bsz, kv_heads]: one KV head is
  // shared by every query head, other counts do not broadcast.
  const absl::Status heads_mismatch =
      kv_heads != heads && kv_heads != 1 ? SizeMismatch(heads, kv_heads, 1) : absl::OkStatus();
  if (!single) {
    VARLEN_ASSIGN_OR_RETURN(args.scale, NumericScale(scale, single));  // argument parsing
    if (s == 0) return args;  // empty items: torch returns before any shape check
    VARLEN_RETURN_IF_ERROR(heads_mismatch);
    // The logits [bsz, heads, s, s] take the mask in place.
    if (mask_batch != call.bsz && mask_batch != 1) {
      if (call.bsz != 1) return SizeMismatch(call.bsz, mask_batch, 0);
      return TorchError(absl::StrCat("output with shape ", ShapeToString({1, heads, s, s}),
                                     " doesn't match the broadcast shape ",
                                     ShapeToString({mask_batch, heads, s, s})));
    }
    return args;
  }
  VARLEN_RETURN_IF_ERROR(heads_mismatch);
  VARLEN_ASSIGN_OR_RETURN(args.scale, NumericScale(scale, single));
  // logits + mask broadcasts to `batch` items; the output must still
  // reshape to [bsz * s, heads, head_size].
  if (mask_batch != call.bsz && mask_batch != 1 && call.bsz != 1) {
    return SizeMismatch(call.bsz, mask_batch, 0);
  }
  const int64_t batch = call.bsz == 1 ? mask_batch : call.bsz;
  VARLEN_RETURN_IF_ERROR(
      CheckReshape({call.bsz * s, heads, head_dim}, batch * s * heads * call.v.size(2)));
  return args;
}

absl::StatusOr<SdpaArgs> ResolveHardened(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  VARLEN_ASSIGN_OR_RETURN(const int64_t tokens, CheckQkvShapes(call, {.allow_strided = true}));
  const int64_t heads = call.q.size(1), kv_heads = call.k.size(1);
  if (kv_heads != heads && kv_heads != 1) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("q has ", heads, " heads and k ", kv_heads,
                                    ": sdpa broadcasts k over q's heads, so it needs equal "
                                    "heads or a single KV head"));
  }
  if (call.v.size(2) != call.q.size(2)) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("v has head_dim ", call.v.size(2), " but q has ", call.q.size(2),
                     ": sdpa reshapes v with q's head_dim, so they must match"));
  }
  if (call.bsz < 1 || tokens % call.bsz != 0) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("bsz=", call.bsz, " does not divide q.shape[0]=", tokens,
                                    ": sdpa splits the tokens into bsz equal items"));
  }
  if (call.sdpa.flatten_batch && call.bsz != 1) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("bsz=", call.bsz,
                                    " with flatten_batch: the block-diagonal mask covers one "
                                    "packed item, so bsz must be 1"));
  }
  if (call.sdpa.softmax_in_single_precision && call.q.dtype() == DType::kFloat64) {
    return PythonError(PyErrorKind::kValueError,
                       "softmax_in_single_precision with float64 q: the additive mask is built "
                       "in float32, where finfo(float64).min is -inf, so every output row is NaN; "
                       "turn it off for float64 inputs");
  }
  SdpaArgs args;
  args.bsz = call.bsz;
  args.tokens_per_item = tokens / call.bsz;
  args.single_precision = call.sdpa.softmax_in_single_precision;
  const Value construction = ConstructionScale(ctx);
  if (!(construction.kind() == Value::Kind::kFloat) &&
      !(construction.kind() == Value::Kind::kInt)) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("softmax_scale=", construction.Repr(), " is a ",
                                    construction.TypeName(), ": it must be a float or None"));
  }
  args.scale = (construction.kind() == Value::Kind::kFloat)
                   ? construction.as_float()
                   : static_cast<double>(construction.as_int());
  if (!std::isfinite(args.scale)) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("softmax_scale=", construction.Repr(), ": it must be finite"));
  }
  if (call.entry == Entry::kDirect) {
    VARLEN_ASSIGN_OR_RETURN(const double requested, ResolveSoftmaxScale(ctx, Profile::kSdpa));
    if (requested != args.scale) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat("softmax_scale=", ctx.kwargs.get("softmax_scale").Repr(),
                       " differs from the scale sdpa was constructed with (",
                       PyFloatRepr(args.scale),
                       "): sdpa ignores the per-call scale, so it must be set at construction"));
    }
  }
  // sdpa reads cu_seqlens alone: metadata and sequence_lengths are ignored,
  // so they must describe the same sequences.
  constexpr unsigned kUnused = kSequenceLengthsKwarg | kMetadataCuSeqlens | kMetadataSeqLens |
                               kMetadataPackedIndptrs | kMetadataSequenceLengths;
  if (call.cu_seqlens.is_none()) {
    if (call.sdpa.softmax_in_single_precision) {
      return PythonError(PyErrorKind::kValueError,
                         "cu_seqlens=None with softmax_in_single_precision: that path needs a "
                         "mask, so cu_seqlens must be given");
    }
    std::vector<int64_t> items = {0};
    for (int64_t i = 0; i < call.bsz; ++i) items.push_back(items.back() + args.tokens_per_item);
    VARLEN_RETURN_IF_ERROR(
        CheckUnusedBoundariesAgree(ctx, items,
                                   absl::StrCat("cu_seqlens=None (bsz=", call.bsz, " items of ",
                                                args.tokens_per_item, " tokens, no mask)"),
                                   kUnused));
    ctx.Note("no cu_seqlens: no mask, each batch item attends to itself");
    return args;
  }
  VARLEN_ASSIGN_OR_RETURN(Tensor cu, RequireTensorField(call.cu_seqlens, "cu_seqlens"));
  if (call.sdpa.flatten_batch) {
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, CheckTokenOffsets(cu, "cu_seqlens", tokens));
    args.mask = SdpaArgs::Mask::kBlockDiagonal;
    for (size_t i = 1; i < args.cu_seqlens.size(); ++i) {
      args.blocks.emplace_back(args.cu_seqlens[i - 1], args.cu_seqlens[i]);
    }
    ctx.Note("mask: block-diagonal over validated cu_seqlens");
  } else {
    VARLEN_ASSIGN_OR_RETURN(args.cu_seqlens, CheckTokenOffsets(cu, "cu_seqlens", std::nullopt));
    const std::vector<int64_t> lengths = OffsetsToLengths(args.cu_seqlens);
    if (static_cast<int64_t>(lengths.size()) != call.bsz) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat("cu_seqlens describes ", lengths.size(), " sequences but bsz=", call.bsz,
                       ": without flatten_batch the padding mask takes one "
                       "sequence per batch item (more would attend across "
                       "sequences)"));
    }
    // Rows past an item's length have no key under (row < len) & (col < len):
    // their output is not the attention of any sequence, so every item must
    // be full.
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] != args.tokens_per_item) {
        return PythonError(
            PyErrorKind::kValueError,
            absl::StrCat("cu_seqlens[", i + 1, "] - cu_seqlens[", i, "] = ", lengths[i],
                         " != ", args.tokens_per_item,
                         " tokens per batch item: without flatten_batch every item must be one "
                         "full sequence (shorter ones leave rows with no key)"));
      }
    }
    args.kept = lengths;
    args.mask = SdpaArgs::Mask::kPadding;
    ctx.Note("mask: per-item padding over validated lengths");
  }
  VARLEN_RETURN_IF_ERROR(CheckUnusedBoundariesAgree(ctx, args.cu_seqlens, "cu_seqlens", kUnused));
  if (call.q.device() == Device::kCuda) {
    RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, "attention_mask.to(q.device)");
  }
  return args;
}

}  // namespace

absl::StatusOr<SdpaArgs> ResolveSdpa(const ResolveContext& ctx) {
  return ctx.hardened() ? ResolveHardened(ctx) : ResolveFaithful(ctx);
}

}  // namespace varlen::internal
