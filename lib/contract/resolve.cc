#include "varlen/contract/resolve.h"

#include "absl/strings/str_cat.h"
#include "varlen/core/device_ledger.h"

namespace varlen {

DeviceEventCounts Resolution::counts() const { return CountDeviceEvents(events); }

double DefaultSoftmaxScale(Profile profile, int64_t head_dim) {
  return ModelOf(EngineOf(profile)).default_softmax_scale(profile, head_dim);
}

AttentionCall BackendCallOf(const AttentionCall& call, Profile profile) {
  return ModelOf(EngineOf(profile)).backend_call(call, profile);
}

bool CallsFunctions(Profile profile) {
  return ModelOf(EngineOf(profile)).function_calls != nullptr;
}

absl::StatusOr<FunctionCalls> FunctionCallsOf(const AttentionCall& call, Profile profile) {
  const EngineModel& model = ModelOf(EngineOf(profile));
  if (model.function_calls == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(model.title, " calls its backends as objects, not as functions"));
  }
  return model.function_calls(call, profile);
}

Resolution Resolve(const AttentionCall& call, Profile profile, Mode mode) {
  Resolution resolution;
  ScopedDeviceLedger ledger;
  const EngineModel& model = ModelOf(EngineOf(profile));
  if (call.platform.has_value()) {
    resolution.status = model.check_platform != nullptr
                            ? model.check_platform(call, profile, mode)
                            : absl::UnimplementedError(absl::StrCat(
                                  "platform ", PlatformName(*call.platform), ": ",
                                  "the platform rules of ", model.title, " are not modelled"));
    if (!resolution.status.ok()) {
      resolution.events = ledger.events();
      return resolution;
    }
  }
  absl::StatusOr<ResolvedArgs> args = model.resolve(call, profile, mode, &resolution);
  resolution.status = args.status();
  if (args.ok()) {
    args->profile = profile;
    resolution.args = *std::move(args);
  }
  resolution.events = ledger.events();
  return resolution;
}

}  // namespace varlen
