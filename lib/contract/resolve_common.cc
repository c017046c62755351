// What the per-profile resolvers share.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_ops.h"
#include "resolve_internal.h"
#include "varlen/core/status.h"

namespace varlen::internal {

std::vector<std::string> LookedUpKwargs::NeverLookedUp() const {
  std::vector<std::string> unread;
  for (const auto& [key, value] : kwargs_.items()) {
    if (!looked_up_.contains(key)) unread.push_back(key);
  }
  return unread;
}

namespace {

// The kernel entry that receives the scale, and its argument's name.
struct ScaleArgument {
  absl::string_view kernel, argument;
};

ScaleArgument ScaleArgumentOf(Profile profile) {
  switch (profile) {
    case Profile::kFlashinferCudnn:
      return {"cudnn_batch_prefill_with_kv_cache", "scale"};
    case Profile::kFa3:
      return {"flash_attn_varlen_func", "softmax_scale"};
    case Profile::kTritonAttn:
      return {"context_attention_fwd", "sm_scale"};
    case Profile::kSdpa:
      return {"scaled_dot_product_attention", "scale"};
    case Profile::kFa4:
      return {"flash_attn_varlen_func_fa4", "softmax_scale"};
    case Profile::kAiterAttn:
      return {"aiter.flash_attn_varlen_func", "softmax_scale"};
    case Profile::kAscendAttn:
      return {"npu_fused_infer_attention_score", "scale"};
    case Profile::kAmxAttn:
      return {"torch.ops.sgl_kernel.flash_attn_varlen_func", "softmax_scale"};
    case Profile::kXpuAttn:
      return {"sgl_kernel.flash_attn.flash_attn_varlen_func", "softmax_scale"};
    case Profile::kVllmFlashAttnFa2:
    case Profile::kVllmFlashAttnFa3:
    case Profile::kVllmTritonAttn:
    case Profile::kVllmTorchSdpa:
    case Profile::kVllmFlashinfer:
      break;  // vLLM's scale is the layer's, never a call argument
    case Profile::kTfFlashAttention2:
    case Profile::kTfFlashAttention3:
    case Profile::kTfFlashAttention4:
    case Profile::kTfHubFlashAttn2:
    case Profile::kTfSdpa:
    case Profile::kTfEager:
      break;  // transformers' scale is the interface's `scaling` keyword
  }
  return {"?", "?"};
}

}  // namespace

bool IsFullAttentionWindow(const Value& window_size) {
  if (window_size.is_none()) return true;
  if (window_size.kind() != Value::Kind::kList || window_size.as_list().size() != 2) return false;
  return std::all_of(
      window_size.as_list().begin(), window_size.as_list().end(),
      [](const Value& side) { return side.kind() == Value::Kind::kInt && side.as_int() == -1; });
}

absl::StatusOr<double> ResolveSoftmaxScale(const ResolveContext& ctx, Profile profile) {
  const Value scale = ctx.kwargs.get("softmax_scale");
  double value = 0.0;
  switch (scale.kind()) {
    case Value::Kind::kNone:
      return DefaultSoftmaxScale(profile, ctx.call.q.size(-1));
    case Value::Kind::kFloat:
      value = scale.as_float();
      break;
    case Value::Kind::kInt:
      value = static_cast<double>(scale.as_int());
      break;
    case Value::Kind::kBool:
      value = scale.as_bool() ? 1.0 : 0.0;
      break;
    default:
      if (!ctx.hardened()) {
        // Each kernel takes the scale through its own gate (a C++ op's
        // schema, Triton's specialization, a Python wrapper, a JIT compiler),
        // and none of their responses to a non-number is read from a source
        // here.
        const ScaleArgument entry = ScaleArgumentOf(profile);
        return absl::UnimplementedError(
            absl::StrCat("softmax_scale=", scale.Repr(), " (a ", scale.TypeName(), ") reaches ",
                         entry.kernel, "() as its ", entry.argument,
                         ": the kernel's response to a non-number is not modelled"));
      }
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat("softmax_scale=", scale.Repr(), " is a ", scale.TypeName(),
                                      ": it must be a float or None"));
  }
  if (ctx.hardened() && !std::isfinite(value)) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("softmax_scale=", scale.Repr(), ": it must be finite"));
  }
  // The kernels take the scale as a C float: beyond its range it arrives as
  // inf, below its normal range as 0 or with few bits, and every logit with
  // it (0 * inf is NaN where the caller's scale gives inf).
  const double magnitude = std::abs(value);
  if (ctx.hardened() && magnitude != 0 &&
      (magnitude > std::numeric_limits<float>::max() ||
       magnitude < std::numeric_limits<float>::min())) {
    const ScaleArgument entry = ScaleArgumentOf(profile);
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("softmax_scale=", scale.Repr(), ": ", entry.kernel,
                                    "() takes a float32 ", entry.argument,
                                    ", so a nonzero magnitude must lie within "
                                    "[1.1754943508222875e-38, 3.4028234663852886e+38]"));
  }
  return value;
}

absl::Status ResolveKernelScale(const ResolveContext& ctx, Profile profile, double& scale,
                                absl::Status& not_modelled) {
  absl::StatusOr<double> resolved = ResolveSoftmaxScale(ctx, profile);
  if (absl::IsUnimplemented(resolved.status())) {
    not_modelled = resolved.status();
    return absl::OkStatus();
  }
  VARLEN_ASSIGN_OR_RETURN(scale, std::move(resolved));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckQkvShapes(const AttentionCall& call, QkvLayoutRule rule) {
  const Tensor* tensors[] = {&call.q, &call.k, &call.v};
  constexpr absl::string_view kNames[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = *tensors[i];
    const bool rank_ok = t.dim() == 3 || (rule.allow_4d && t.dim() == 4);
    if (!rank_ok) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat(kNames[i], " has shape ", ShapeToString(t.shape()),
                                      rule.allow_4d ? ": it must be [T, H, D] or [b, s, H, D]"
                                                    : ": it must be [T, H, D]"));
    }
    const bool layout_ok = t.is_contiguous() || (rule.allow_strided && t.strides().back() == 1);
    if (!layout_ok) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(kNames[i], " has strides ", ShapeToString(t.strides()), " for shape ",
                       ShapeToString(t.shape()),
                       rule.allow_strided
                           ? ": the kernel needs head_dim contiguous (stride 1)"
                           : ": this kernel addresses q, k and v as dense [T, H, D] (one element "
                             "offset per token), so they must be contiguous"));
    }
    if (t.dim() != call.q.dim() ||
        ShapeNumel({t.shape().begin(), t.shape().end() - 2}) !=
            ShapeNumel({call.q.shape().begin(), call.q.shape().end() - 2})) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(kNames[i], " has shape ", ShapeToString(t.shape()), " but q has ",
                       ShapeToString(call.q.shape()), ": q, k and v must hold the same tokens"));
    }
  }
  const int64_t heads = call.q.size(-2), kv_heads = call.k.size(-2);
  if (call.v.size(-2) != kv_heads || kv_heads == 0 || heads % kv_heads != 0) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("q has ", heads, " heads, k ", kv_heads, " and v ", call.v.size(-2),
                     ": k and v must have equal heads that divide q's"));
  }
  if (call.k.size(-1) != call.q.size(-1)) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("k has head_dim ", call.k.size(-1), " but q has ",
                                    call.q.size(-1), ": q and k must share head_dim"));
  }
  return ShapeNumel({call.q.shape().begin(), call.q.shape().end() - 2});
}

absl::StatusOr<Tensor> RequireTensorField(const Value& value, absl::string_view field) {
  if (!value.is_tensor()) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat(field, "=", value.Repr(), " is a ", value.TypeName(),
                                    ": it must be a tensor"));
  }
  return value.as_tensor();
}

namespace {

// int32 on q's device and contiguous: Triton reads b_start_loc through its
// data pointer alone and FlashAttention refuses a strided cu_seqlens, while
// `.to()` keeps a strided view as it is when nothing else changes.
Tensor KernelReadyCuSeqlens(const ResolveContext& ctx, const Tensor& cu, absl::string_view name) {
  Tensor ready =
      To(cu, ctx.call.q.device(), DType::kInt32, absl::StrCat(name, ".to(q.device, torch.int32)"));
  if (ready.is_contiguous()) return ready;
  ctx.Note(absl::StrCat(name, ": a strided view, made contiguous for the kernel"));
  return ready.Contiguous();
}

}  // namespace

absl::StatusOr<CheckedCuSeqlens> CheckCuSeqlensForKernel(const ResolveContext& ctx,
                                                         const Tensor& cu, absl::string_view name,
                                                         int64_t tokens, bool may_cast) {
  const Device device = ctx.call.q.device();
  if (!may_cast && (cu.dtype() != DType::kInt32 || cu.device() != device || !cu.is_contiguous())) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat(name, " is ", cu.is_contiguous() ? "" : "a non-contiguous ",
                                    DTypeName(cu.dtype()), " on ", DeviceName(cu.device()),
                                    ": in cuda-graph mode the kernel reads it as it is, so it "
                                    "must be contiguous int32 on q's device (",
                                    DeviceName(device), ")"));
  }
  CheckedCuSeqlens checked;
  const std::optional<VisionAttentionMetadata>& metadata = ctx.call.forward_metadata;
  if (metadata.has_value() && metadata->stamp.has_value() &&
      cu.SharesStorageWith(metadata->stamp->input) && cu.shape() == metadata->stamp->input.shape() &&
      metadata->stamp->total_tokens == tokens) {
    // The very tensor a hardened builder validated: its offsets are on the
    // host already (no sync).
    ctx.Note(absl::StrCat(name, ": the tensor the hardened metadata builder validated"));
    checked.offsets = metadata->stamp->offsets;
  } else {
    VARLEN_ASSIGN_OR_RETURN(checked.offsets, CheckTokenOffsets(cu, name, tokens));
  }
  checked.longest = LongestOfOffsets(checked.offsets, name);
  checked.cu = KernelReadyCuSeqlens(ctx, cu, name);
  return checked;
}

absl::StatusOr<CheckedCuSeqlens> CheckMetadataCuSeqlens(const ResolveContext& ctx,
                                                        const VisionAttentionMetadata& metadata,
                                                        int64_t tokens) {
  VARLEN_ASSIGN_OR_RETURN(Tensor cu,
                          RequireTensorField(metadata.cu_seqlens, "forward_metadata.cu_seqlens"));
  if (!metadata.stamp.has_value()) {
    ctx.Note("source: forward_metadata not built by a hardened builder; validated");
    return CheckCuSeqlensForKernel(ctx, cu, "forward_metadata.cu_seqlens", tokens,
                                   /*may_cast=*/true);
  }
  const MetadataStamp& stamp = *metadata.stamp;
  if (stamp.total_tokens != tokens) {
    return PythonError(
        PyErrorKind::kValueError,
        absl::StrCat("forward_metadata was built for ", stamp.total_tokens, " tokens but q has ",
                     tokens, ": metadata must be rebuilt for every batch"));
  }
  ctx.Note("source: forward_metadata stamped by a hardened builder; checked on the host");
  CheckedCuSeqlens checked;
  checked.offsets = stamp.offsets;
  checked.cu = KernelReadyCuSeqlens(ctx, cu, "forward_metadata.cu_seqlens");
  checked.longest = {.value = stamp.longest, .source = "the longest sequence of the metadata"};
  return checked;
}

absl::StatusOr<TokenSource> ResolveHardenedTokenSource(const ResolveContext& ctx, int64_t tokens,
                                                       const TokenSourceRules& rules) {
  const AttentionCall& call = ctx.call;
  const std::vector<std::string>& graph_layout = rules.list_layout;
  TokenSource source;
  if (call.forward_metadata.has_value() && rules.reads_metadata) {
    source.kind = TokenSource::Kind::kMetadata;
    VARLEN_ASSIGN_OR_RETURN(source.checked,
                            CheckMetadataCuSeqlens(ctx, *call.forward_metadata, tokens));
    source.name = "forward_metadata.cu_seqlens";
    source.unused = kCuSeqlensArgument | kSequenceLengthsKwarg | kMetadataSeqLens |
                    kMetadataPackedIndptrs | kMetadataSequenceLengths;
    source.max_seqlen = call.forward_metadata->max_seqlen;
    source.max_name = "forward_metadata.max_seqlen";
    if (source.max_seqlen.is_none()) {
      return PythonError(PyErrorKind::kTypeError,
                         "forward_metadata.max_seqlen=None: prepared metadata must carry an int");
    }
    return source;
  }
  const bool reads_list = !graph_layout.empty() &&
                          (rules.list_anytime ? call.cu_seqlens.kind() == Value::Kind::kList
                                              : call.graph_mode);
  // Metadata this backend does not read must describe the same sequences.
  const unsigned unread_metadata =
      call.forward_metadata.has_value() ? kMetadataCuSeqlens | kMetadataSeqLens |
                                              kMetadataPackedIndptrs | kMetadataSequenceLengths
                                        : 0u;
  if (reads_list) {
    source.kind = TokenSource::Kind::kGraphList;
    const std::string layout = absl::StrCat("[", absl::StrJoin(graph_layout, ", "), "]");
    VARLEN_RETURN_IF_ERROR(CheckGraphModeList(call.cu_seqlens, layout));
    const std::vector<Value>& list = call.cu_seqlens.as_list();
    if (list.size() != graph_layout.size()) {
      return PythonError(PyErrorKind::kValueError,
                         absl::StrCat("cu_seqlens is a list of ", list.size(),
                                      " items: cuda-graph mode expects ", layout));
    }
    ctx.Note(absl::StrCat("source: cuda-graph list ", layout, "; validated"));
    VARLEN_ASSIGN_OR_RETURN(Tensor cu, RequireTensorField(list.front(), "cu_seqlens[0]"));
    VARLEN_ASSIGN_OR_RETURN(source.checked,
                            CheckCuSeqlensForKernel(ctx, cu, "cu_seqlens[0]", tokens,
                                                    /*may_cast=*/false));
    source.name = "cu_seqlens[0]";
    source.unused = kSequenceLengthsKwarg | unread_metadata;
    source.max_seqlen = list.back();
    source.max_name = absl::StrCat("cu_seqlens[", list.size() - 1, "]");
    if (source.max_seqlen.is_none() || source.max_seqlen.is_tensor()) {
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat(source.max_name, "=", source.max_seqlen.Repr(), " is a ",
                                      source.max_seqlen.TypeName(),
                                      ": the cuda-graph list must carry max_seqlen as a host int "
                                      "(reading a tensor is a host sync, illegal in a graph)"));
    }
    return source;
  }
  ctx.Note("source: cu_seqlens via resolve_seqlens; validated, cast to int32 on q's device");
  VARLEN_ASSIGN_OR_RETURN(Tensor cu, HardenedResolveSeqlens(ctx));
  VARLEN_ASSIGN_OR_RETURN(
      source.checked, CheckCuSeqlensForKernel(ctx, cu, "cu_seqlens", tokens, /*may_cast=*/true));
  source.name = UniformOffsetsName(call);
  source.unused = kSequenceLengthsKwarg | unread_metadata;
  source.max_seqlen = ctx.kwargs.get("max_seqlen");
  source.max_name = "max_seqlen";
  return source;
}

std::string UniformOffsetsName(const AttentionCall& call) {
  const Value& cu = call.cu_seqlens;
  if (cu.is_none() ||
      (cu.kind() == Value::Kind::kSingletonCache && !cu.as_cache()->data.has_value())) {
    return absl::StrCat("cu_seqlens=", cu.Repr(), " (bsz=", call.bsz,
                        " sequences of seq_len=", call.seq_len, ")");
  }
  return "cu_seqlens";
}

absl::StatusOr<int64_t> CheckOrDeriveMaxSeqlen(const ResolveContext& ctx, const Value& max_seqlen,
                                               const Longest& longest, absl::string_view name) {
  if (max_seqlen.is_none()) {
    ctx.Note(absl::StrCat(name, " not given: the longest sequence, ", longest.value));
    return longest.value;
  }
  return CheckMaxSeqlen(max_seqlen, longest.value, longest.source, name);
}

Longest LongestOfOffsets(const std::vector<int64_t>& offsets, absl::string_view name) {
  Longest longest = FindLongest(OffsetsToLengths(offsets), name);
  if (longest.index >= 0) {
    const int64_t i = longest.index;
    longest.source = absl::StrCat(name, "[", i + 1, "] - ", name, "[", i, "]");
  }
  return longest;
}

absl::StatusOr<Tensor> HardenedResolveSeqlens(const ResolveContext& ctx) {
  const AttentionCall& call = ctx.call;
  const Value& cu = call.cu_seqlens;
  const bool uniform = cu.is_none() || (cu.kind() == Value::Kind::kSingletonCache &&
                                        !cu.as_cache()->data.has_value());
  if (uniform && call.seq_len == 0) {
    ctx.Note("cu_seqlens not given and seq_len=0: an empty batch, all-zero offsets");
    Tensor zeros = Tensor::Zeros(DType::kInt32, call.q.device(), {call.bsz + 1});
    if (!cu.is_none()) cu.as_cache()->set_data(zeros);
    return zeros;
  }
  if (!cu.is_none() && !cu.is_tensor() && cu.kind() != Value::Kind::kSingletonCache) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("cu_seqlens=", cu.Repr(), " is a ", cu.TypeName(),
                                    ": outside cuda-graph mode it must be a tensor of token "
                                    "offsets, a SingletonCache or None"));
  }
  return ResolveSeqlens(cu, call.bsz, call.seq_len, call.q.device());
}

namespace {

// The boundaries of `offsets` without repeats: the split of the tokens into
// non-empty sequences.
std::vector<int64_t> DistinctBoundaries(std::vector<int64_t> offsets) {
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  return offsets;
}

// "[48, 72]": the non-empty sequences of `offsets`.
std::string SequencesText(const std::vector<int64_t>& offsets) {
  std::vector<int64_t> lengths;
  for (int64_t length : OffsetsToLengths(offsets)) {
    if (length != 0) lengths.push_back(length);
  }
  constexpr size_t kShown = 12;
  std::string text =
      absl::StrJoin(lengths.begin(), lengths.begin() + std::min(kShown, lengths.size()), ", ");
  if (lengths.size() > kShown) absl::StrAppend(&text, ", ... (", lengths.size(), " in all)");
  return absl::StrCat("[", text, "]");
}

absl::StatusOr<std::vector<int64_t>> LengthsAsOffsets(const Value& value, absl::string_view name,
                                                      int64_t tokens) {
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, CheckSequenceLengths(value, name));
  const std::vector<int64_t> offsets = LengthsToOffsets(lengths);
  if (offsets.back() != tokens) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat("sum(", name, ")=", offsets.back(), " != ", tokens,
                                    " = q.shape[0]: the sequences must cover every packed token"));
  }
  return offsets;
}

// [qk | v | o] element indptrs of one width as token offsets.
absl::StatusOr<std::vector<int64_t>> PackedAsOffsets(const Tensor& packed, absl::string_view name,
                                                     int64_t width, int64_t tokens) {
  if (!IsIntegral(packed.dtype()) || packed.numel() < 3 || packed.numel() % 3 != 0) {
    return PythonError(PyErrorKind::kValueError,
                       absl::StrCat(name, " has ", packed.numel(), " ", DTypeName(packed.dtype()),
                                    " entries: packed indptrs are 3*(B+1) integers [qk | v | o]"));
  }
  const std::vector<int64_t> values = packed.ToHostInts(absl::StrCat(name, ".tolist()"));
  const size_t third = values.size() / 3;
  std::vector<int64_t> offsets;
  for (size_t i = 0; i < third; ++i) {
    if (values[i] != values[third + i] || values[i] != values[2 * third + i] ||
        values[i] % width != 0) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(name, "[", i, "]=", values[i],
                       ": each third must hold the same element offsets, multiples of "
                       "heads*head_dim (",
                       width, ")"));
    }
    offsets.push_back(values[i] / width);
  }
  VARLEN_ASSIGN_OR_RETURN(
      offsets,
      CheckTokenOffsets(Tensor::FromInts(offsets, DType::kInt64, Device::kCpu), name, tokens));
  return offsets;
}

}  // namespace

absl::Status CheckUnusedBoundariesAgree(const ResolveContext& ctx,
                                        const std::vector<int64_t>& offsets, absl::string_view used,
                                        unsigned unused) {
  const AttentionCall& call = ctx.call;
  const int64_t tokens = offsets.back();
  const Tensor q3 = FlattenBatch(call.q);
  const int64_t width = q3.size(1) * q3.size(2);
  const VisionAttentionMetadata* metadata =
      call.forward_metadata.has_value() ? &*call.forward_metadata : nullptr;
  const std::vector<int64_t> truth = DistinctBoundaries(offsets);
  // The fields a hardened builder made describe the offsets it stamped:
  // compare those on the host (reading the fields again would be a sync).
  if (metadata != nullptr && metadata->stamp.has_value()) {
    unsigned vouched = kMetadataCuSeqlens | kMetadataSeqLens;
    if (metadata->stamp->elem_per_token > 0) {
      vouched |= kMetadataPackedIndptrs | kMetadataSequenceLengths;
    }
    if ((unused & vouched) && DistinctBoundaries(metadata->stamp->offsets) != truth) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat("forward_metadata describes the sequences ",
                       SequencesText(metadata->stamp->offsets), " but ", used, " describes ",
                       SequencesText(offsets),
                       ": the kernel uses the latter and ignores "
                       "forward_metadata, so every boundary argument must describe the same "
                       "sequences"));
    }
    unused &= ~vouched;
  }
  enum class As { kOffsets, kLengths, kPacked, kOffsetsOrPacked };
  struct Source {
    unsigned bit;
    Value value;
    std::string name;
    As as;
  };
  std::vector<Source> sources = {
      {kCuSeqlensArgument, call.cu_seqlens, "cu_seqlens", As::kOffsetsOrPacked},
      {kSequenceLengthsKwarg, ctx.kwargs.get("sequence_lengths"), "sequence_lengths",
       As::kLengths}};
  if (metadata != nullptr) {
    sources.push_back(
        {kMetadataCuSeqlens, metadata->cu_seqlens, "forward_metadata.cu_seqlens", As::kOffsets});
    sources.push_back(
        {kMetadataSeqLens, metadata->seq_lens, "forward_metadata.seq_lens", As::kLengths});
    sources.push_back({kMetadataPackedIndptrs, metadata->packed_indptrs,
                       "forward_metadata.packed_indptrs", As::kPacked});
    sources.push_back({kMetadataSequenceLengths, metadata->sequence_lengths,
                       "forward_metadata.sequence_lengths", As::kLengths});
  }
  for (Source& source : sources) {
    if (!(unused & source.bit)) continue;
    Value value = source.value;
    // A cache holds its offsets; a cuda-graph list holds them first.
    if (value.kind() == Value::Kind::kSingletonCache) {
      if (!value.as_cache()->data.has_value()) continue;
      value = Value::FromTensor(*value.as_cache()->data);
    } else if (value.kind() == Value::Kind::kList && !value.as_list().empty()) {
      Value first = value.as_list().front();  // a copy: assigning an element of value to
      value = std::move(first);               // value itself would free it mid-copy
      absl::StrAppend(&source.name, "[0]");
    }
    if (value.is_none()) continue;
    if (value.is_tensor() && metadata != nullptr && metadata->stamp.has_value() &&
        value.as_tensor().SharesStorageWith(metadata->stamp->input) &&
        value.as_tensor().shape() == metadata->stamp->input.shape()) {
      continue;  // the very tensor the hardened builder validated
    }
    if (!value.is_tensor()) {
      return PythonError(PyErrorKind::kTypeError,
                         absl::StrCat(source.name, "=", value.Repr(), " is a ", value.TypeName(),
                                      ": a sequence-boundary argument must be a tensor or None"));
    }
    absl::StatusOr<std::vector<int64_t>> claimed;
    switch (source.as) {
      case As::kLengths:
        claimed = LengthsAsOffsets(value, source.name, tokens);
        break;
      case As::kPacked:
        claimed = PackedAsOffsets(value.as_tensor(), source.name, width, tokens);
        break;
      case As::kOffsets:
      case As::kOffsetsOrPacked:
        claimed = CheckTokenOffsets(value.as_tensor(), source.name, tokens);
        if (source.as == As::kOffsetsOrPacked &&
            (!claimed.ok() || DistinctBoundaries(*claimed) != truth)) {
          // flashinfer_cudnn's cu_seqlens may be packed element indptrs.
          absl::StatusOr<std::vector<int64_t>> packed =
              PackedAsOffsets(value.as_tensor(), source.name, width, tokens);
          if (packed.ok() && DistinctBoundaries(*packed) == truth) claimed = packed;
        }
        break;
    }
    if (!claimed.ok()) return claimed.status();
    if (DistinctBoundaries(*claimed) != truth) {
      return PythonError(
          PyErrorKind::kValueError,
          absl::StrCat(source.name, " describes the sequences ", SequencesText(*claimed), " but ",
                       used, " describes ", SequencesText(offsets),
                       ": the kernel uses the latter and ignores ", source.name,
                       ", so every boundary argument must describe the same sequences"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSglangGraphList(const Value& cu_seqlens) {
  if (cu_seqlens.kind() == Value::Kind::kList) return absl::OkStatus();
  return PythonError(PyErrorKind::kRuntimeError, "cuda-graph mode cu_seqlens should be a list");
}

absl::Status CheckGraphModeList(const Value& cu_seqlens, absl::string_view layout) {
  if (cu_seqlens.kind() == Value::Kind::kList) return absl::OkStatus();
  return PythonError(PyErrorKind::kTypeError,
                     absl::StrCat("cu_seqlens=", cu_seqlens.Repr(), " is a ", cu_seqlens.TypeName(),
                                  ": in cuda-graph mode it must be the list ", layout));
}

absl::StatusOr<Value> ListItem(const Value& list, size_t index) {
  if (index >= list.as_list().size()) {
    return PythonError(PyErrorKind::kIndexError, "list index out of range");
  }
  return list.as_list()[index];
}

absl::StatusOr<std::vector<int64_t>> SplitSizesOf(const Tensor& cu, int reads,
                                                  absl::string_view what) {
  VARLEN_ASSIGN_OR_RETURN(const Tensor diffs, SubtractShifted(cu));
  // torch.split takes the list's elements as sizes: a nested list (a
  // multi-dimensional cu_seqlens) or floats are refused.
  const char* element = diffs.numel() == 0            ? nullptr
                        : cu.dim() > 1                ? "list"
                        : IsFloatingPoint(cu.dtype()) ? "float"
                                                      : nullptr;
  std::vector<int64_t> lens;
  for (int i = 0; i < reads; ++i) {
    if (element != nullptr || IsFloatingPoint(cu.dtype())) {
      diffs.ToHostDoubles(what);
    } else {
      lens = diffs.ToHostInts(what);
    }
  }
  if (element != nullptr) {
    return PythonError(PyErrorKind::kTypeError,
                       absl::StrCat("split_with_sizes(): argument 'split_sizes' (position 2) must "
                                    "be tuple of ints, but found element of type ",
                                    element, " at pos 0"));
  }
  return lens;
}

absl::Status CheckSplitSizes(const std::vector<int64_t>& lens, int64_t dim_size, int dim) {
  const std::string sizes = absl::StrCat("[", absl::StrJoin(lens, ", "), "]");
  // torch sums the sizes in int64 and compares; lengths past int64 wrap
  // there as they do here (unsigned, so without undefined behaviour).
  uint64_t sum = 0;
  for (int64_t length : lens) {
    if (length < 0) {
      return PythonError(PyErrorKind::kRuntimeError,
                         absl::StrCat("split_with_sizes expects split_sizes have only "
                                      "non-negative entries, but got split_sizes=",
                                      sizes));
    }
    sum += static_cast<uint64_t>(length);
  }
  if (static_cast<int64_t>(sum) != dim_size) {
    return PythonError(
        PyErrorKind::kRuntimeError,
        absl::StrCat("split_with_sizes expects split_sizes to sum exactly to ", dim_size,
                     " (input tensor's size at dimension ", dim, "), but got split_sizes=", sizes));
  }
  if (lens.empty()) {
    return PythonError(PyErrorKind::kValueError,
                       "torch.cat(): expected a non-empty list of Tensors");
  }
  return absl::OkStatus();
}

SdpaArgs ChunkedSdpa(const std::vector<int64_t>& lens, int64_t bsz, int64_t tokens_per_item,
                     double scale) {
  SdpaArgs args;
  args.bsz = bsz;
  args.tokens_per_item = tokens_per_item;
  args.scale = scale;
  if (lens.empty()) return args;  // no offsets: each item whole
  args.mask = SdpaArgs::Mask::kBlockDiagonal;
  int64_t begin = 0;
  for (int64_t length : lens) {
    args.cu_seqlens.push_back(begin);
    args.blocks.emplace_back(begin, begin + length);
    begin += length;
  }
  args.cu_seqlens.push_back(begin);
  return args;
}

}  // namespace varlen::internal
