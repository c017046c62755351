#include "varlen/contract/resolve.h"

#include "absl/strings/str_cat.h"
#include "resolve_internal.h"
#include "varlen/core/status.h"

namespace varlen {
namespace {

// The keyword arguments the backend's **kwargs receive. VisionAttention
// always passes sequence_lengths, max_seqlen and output_ws (None when the
// caller did not), the softmax_scale it was built with (a case spells it as
// the softmax_scale kwarg), window_size and s_aux.
Kwargs BackendKwargs(const AttentionCall& call) {
  if (call.entry == Entry::kDirect) return call.kwargs;
  Kwargs kwargs;
  kwargs.set("sequence_lengths", call.kwargs.get("sequence_lengths"));
  kwargs.set("max_seqlen", call.kwargs.get("max_seqlen"));
  kwargs.set("output_ws", call.kwargs.get("output_ws"));
  kwargs.set("softmax_scale", call.kwargs.get("softmax_scale"));
  kwargs.set("window_size", Value::List({Value::Int(-1), Value::Int(-1)}));
  kwargs.set("s_aux", Value::None());
  return kwargs;
}

template <typename T>
absl::StatusOr<ResolvedArgs> Wrap(absl::StatusOr<T> args) {
  if (!args.ok()) return args.status();
  return ResolvedArgs{*std::move(args)};
}

absl::StatusOr<ResolvedArgs> Dispatch(const internal::ResolveContext& ctx, Profile profile) {
  switch (profile) {
    case Profile::kFlashinferCudnn:
      return Wrap(internal::ResolveFlashinferCudnn(ctx));
    case Profile::kFa3:
      return Wrap(internal::ResolveFa3(ctx));
    case Profile::kTritonAttn:
      return Wrap(internal::ResolveTriton(ctx));
    case Profile::kSdpa:
      return Wrap(internal::ResolveSdpa(ctx));
  }
  return absl::InternalError("unknown profile");
}

// What VisionAttention does with the backend's result: `output.dim()`. In
// cuda-graph mode through the layer, triton_attn gets output_ws=None and
// returns it.
absl::Status LayerEpilogue(const ResolvedArgs& resolved) {
  if (const auto* triton = std::get_if<TritonArgs>(&resolved.args)) {
    if (triton->output_from_workspace && triton->output_ws.is_none()) {
      return PythonError(PyErrorKind::kAttributeError, "'NoneType' object has no attribute 'dim'");
    }
  }
  return absl::OkStatus();
}

// VisionAttention hands every backend [b*s, h, d]: a 4-D q, k or v is
// flattened before the backend is called.
AttentionCall AsLayerSeesIt(const AttentionCall& call) {
  AttentionCall flat = call;
  for (Tensor* t : {&flat.q, &flat.k, &flat.v}) *t = FlattenBatch(*t);
  return flat;
}

}  // namespace

DeviceEventCounts Resolution::counts() const { return CountDeviceEvents(events); }

Resolution Resolve(const AttentionCall& call, Profile profile, Mode mode) {
  if (call.entry == Entry::kLayer &&
      (call.q.dim() == 4 || call.k.dim() == 4 || call.v.dim() == 4)) {
    return Resolve(AsLayerSeesIt(call), profile, mode);
  }
  Resolution resolution;
  ScopedDeviceLedger ledger;
  const internal::ResolveContext ctx{call, BackendKwargs(call), mode, &resolution.notes};
  absl::StatusOr<ResolvedArgs> args = Dispatch(ctx, profile);
  if (args.ok() && call.entry == Entry::kLayer) {
    absl::Status epilogue = LayerEpilogue(*args);
    if (!epilogue.ok()) args = epilogue;
  }
  resolution.status = args.status();
  if (args.ok()) resolution.args = *std::move(args);
  resolution.events = ledger.events();
  return resolution;
}

}  // namespace varlen
