// A function a user registers in transformers' AttentionInterface
// (docs/python.md, "transformers' convention"), as transformers calls it:
// through VisionAttention.forward of the band (the flash gate by the
// function's name, then one call over the pack with the varlen keywords, or
// one call per sequence on the split path), or directly with a caller's
// keywords. What each call asks of a correct function is read from its
// keywords as such a function reads them: all four varlen keywords
// delimit the sequences, none leaves the call one sequence.

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transformers/attention_internal.h"
#include "varlen/contract/seqlens.h"
#include "varlen/core/status.h"

namespace varlen::internal {
namespace {

constexpr absl::string_view kVarlenKeywords[] = {"cu_seq_lens_q", "cu_seq_lens_k", "max_length_q",
                                                 "max_length_k"};

bool IsFalse(const Value& v) { return v.kind() == Value::Kind::kBool && !v.as_bool(); }

// Why `call`'s keywords ask no single attention of a correct function, or
// "" with `fn`'s sequences and scale filled in.
std::string ReadKeywords(FunctionCall* fn) {
  const AttentionCall& call = fn->call;
  const Kwargs& kw = call.kwargs;
  const int64_t tokens = call.q.size(0);
  if (!kw.get("attention_mask").is_none()) return "an attention_mask";
  if (const Value causal = kw.get("is_causal"); !causal.is_none() && !IsFalse(causal)) {
    return absl::StrCat("is_causal=", causal.Repr());
  }
  if (const Value dropout = kw.get("dropout");
      !dropout.is_none() && !(dropout.kind() == Value::Kind::kFloat && dropout.as_float() == 0.0) &&
      !(dropout.kind() == Value::Kind::kInt && dropout.as_int() == 0)) {
    return absl::StrCat("dropout=", dropout.Repr());
  }
  const Value scaling = kw.get("scaling");
  if (scaling.is_none()) {
    fn->scale = ModuleScaling(call.q.size(-1));
  } else if (scaling.kind() == Value::Kind::kFloat) {
    fn->scale = scaling.as_float();
  } else {
    return absl::StrCat("scaling=", scaling.Repr(), " (a ", scaling.TypeName(), ")");
  }
  int given = 0;
  for (absl::string_view key : kVarlenKeywords) given += !kw.get(key).is_none();
  if (given == 0) {
    fn->sequences = {tokens};
    return "";
  }
  if (given < 4) return "some of cu_seq_lens_q/k and max_length_q/k, not all four";
  std::vector<int64_t> offsets[2];
  for (int i = 0; i < 2; ++i) {
    const std::string name(kVarlenKeywords[i]);
    const Value cu = kw.get(name);
    if (!cu.is_tensor()) return absl::StrCat(name, "=", cu.Repr());
    absl::StatusOr<std::vector<int64_t>> read = CheckTokenOffsets(cu.as_tensor(), name, tokens);
    if (!read.ok()) return std::string(read.status().message());
    offsets[i] = *std::move(read);
  }
  if (offsets[0] != offsets[1]) return "cu_seq_lens_k differs from cu_seq_lens_q";
  fn->sequences = OffsetsToLengths(offsets[0]);
  const Longest longest = LongestOfOffsets(offsets[0], "cu_seq_lens_q");
  for (int i = 2; i < 4; ++i) {
    const std::string name(kVarlenKeywords[i]);
    absl::Status max = CheckMaxSeqlen(kw.get(name), longest.value, longest.source, name).status();
    if (!max.ok()) return std::string(max.message());
  }
  return "";
}

// Tokens [begin, end) of a [T, H, D] tensor: torch.split's view.
Tensor Tokens(const Tensor& t, int64_t begin, int64_t end) {
  return t.AsStrided({end - begin, t.size(1), t.size(2)}, t.strides(), begin * t.strides()[0]);
}

// A call of the function with VisionAttention's keywords, then the
// caller's **kwargs (5.15.0 on takes max_seqlen by name).
FunctionCall LayerCall(const ResolveContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       double scaling) {
  FunctionCall fn;
  fn.call = ctx.call;
  fn.call.entry = Entry::kDirect;
  fn.call.q = q;
  fn.call.k = k;
  fn.call.v = v;
  fn.call.kwargs = Kwargs();
  fn.call.kwargs.set("attention_mask", Value::None());
  fn.call.kwargs.set("scaling", Value::Float(scaling));
  fn.call.kwargs.set("dropout", Value::Float(0.0));
  return fn;
}

void PassCallerKeywords(const ResolveContext& ctx, FunctionCall* fn) {
  for (const auto& [key, value] : ctx.call.kwargs.items()) {
    if (key == "max_seqlen" && TransformersBehaviorOf(ctx).caller_max_wins) continue;
    fn->call.kwargs.set(key, value);
  }
}

absl::StatusOr<FunctionCalls> LayerCalls(const ResolveContext& ctx, Profile profile) {
  VARLEN_RETURN_IF_ERROR(CheckLayerKeywords(ctx));
  const AttentionCall& call = ctx.call;
  const Value& cu = call.cu_seqlens;
  const double scaling = ModuleScaling(call.q.size(-1));
  FunctionCalls calls;
  if (TakesFlashPath(ctx, profile)) {
    VARLEN_ASSIGN_OR_RETURN(const Value max, LayerMaxSeqlen(ctx, cu));
    FunctionCall fn = LayerCall(ctx, call.q, call.k, call.v, scaling);
    fn.call.kwargs.set("cu_seq_lens_q", cu);
    fn.call.kwargs.set("cu_seq_lens_k", cu);
    fn.call.kwargs.set("max_length_q", max);
    fn.call.kwargs.set("max_length_k", max);
    fn.call.kwargs.set("is_causal", Value::Bool(false));
    PassCallerKeywords(ctx, &fn);
    calls.calls.push_back(std::move(fn));
    return calls;
  }
  VARLEN_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, SplitLengths(ctx, cu));
  int64_t start = 0;
  for (const int64_t length : lens) {
    const int64_t end = start + length;
    FunctionCall fn = LayerCall(ctx, Tokens(call.q, start, end), Tokens(call.k, start, end),
                                Tokens(call.v, start, end), scaling);
    fn.call.kwargs.set("is_causal", Value::Bool(false));
    PassCallerKeywords(ctx, &fn);
    fn.unpacks_result = false;  // attention_interface(...)[0]
    calls.calls.push_back(std::move(fn));
    start = end;
  }
  return calls;
}

}  // namespace

absl::StatusOr<FunctionCalls> TransformersFunctionCalls(const AttentionCall& call,
                                                        Profile profile) {
  if (call.entry == Entry::kTower) {
    std::vector<std::string> notes;
    VARLEN_ASSIGN_OR_RETURN(const AttentionCall layer,
                            TowerLayerCall(call, profile, Mode::kFaithful, &notes));
    return TransformersFunctionCalls(layer, profile);
  }
  if (call.entry == Entry::kLayer && call.rotary) {
    // The rotary embedding makes q and k new dense tensors.
    AttentionCall rotated = call;
    rotated.q = call.q.Contiguous();
    rotated.k = call.k.Contiguous();
    rotated.rotary = false;
    return TransformersFunctionCalls(rotated, profile);
  }
  std::vector<std::string> notes;
  const ResolveContext ctx{call, LookedUpKwargs(call.kwargs), Mode::kFaithful,
                           BehaviorOf(kLatestSglangVersion), &notes};
  FunctionCalls calls;
  if (call.entry == Entry::kLayer) {
    VARLEN_ASSIGN_OR_RETURN(calls, LayerCalls(ctx, profile));
  } else {
    FunctionCall fn;
    fn.call = call;
    calls.calls.push_back(std::move(fn));
  }
  // Qwen2_5_VLVisionAttention's attributes (the module a direct caller
  // passes is a layer of its own; the vision one stands for it).
  const int64_t head_dim = call.q.size(-1);
  calls.module.set("num_heads", Value::Int(call.q.size(1)));
  calls.module.set("head_dim", Value::Int(head_dim));
  calls.module.set("scaling", Value::Float(ModuleScaling(head_dim)));
  calls.module.set("attention_dropout", Value::Float(0.0));
  calls.module.set("is_causal", Value::Bool(false));
  calls.module.set("training", Value::Bool(false));
  if (TransformersBehaviorOf(ctx).module_has_kv_groups) {
    calls.module.set("num_key_value_groups", Value::Int(1));
  }
  for (size_t i = 0; i < calls.calls.size() && calls.ambiguous.empty(); ++i) {
    if (std::string why = ReadKeywords(&calls.calls[i]); !why.empty()) {
      calls.ambiguous = calls.calls.size() == 1 ? why : absl::StrCat("call ", i, ": ", why);
    }
  }
  return calls;
}

}  // namespace varlen::internal
