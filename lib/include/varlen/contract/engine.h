// File: varlen/contract/engine.h
// -----------------------------------------------------------------------------
//
// The engines whose calling conventions the contract models, each a module
// of its own. An engine (SGLang, vLLM, transformers) describes itself once, in its folder
// (lib/contract/<engine>/version.cc), as an EngineModel: its names, its
// modelled versions, and how its entry resolves a call (its profiles:
// ProfilesOf in call.h). Resolve(), the case format, the reports, the CLI
// and the generators ask the engine's model instead of switching on the
// engine, and a case or a call carries one EngineVersion, whichever engine
// it belongs to. What an engine's resolvers read of its version stays typed
// (SglangVersion and its SglangBehavior, VllmVersion, TransformersVersion
// and its TransformersBehavior).

#ifndef VARLEN_CONTRACT_ENGINE_H_
#define VARLEN_CONTRACT_ENGINE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "varlen/contract/sglang/version.h"
#include "varlen/contract/transformers/version.h"
#include "varlen/contract/vllm/version.h"
#include "varlen/core/dtype.h"

namespace varlen {

enum class Profile;
enum class Mode;
struct AttentionCall;
struct ResolvedArgs;
struct Resolution;
struct FunctionCalls;

// The inference engine whose calling convention a profile models.
enum class Engine {
  kSglang,        // SGLang's vision backends (VisionAttention and its nine classes)
  kVllm,          // vLLM's MMEncoderAttention
  kTransformers,  // transformers' vision towers and its AttentionInterface
};

// Every modelled engine, in the order above.
absl::Span<const Engine> AllEngines();
absl::string_view EngineName(Engine engine);  // "sglang", "vllm", "transformers"
absl::StatusOr<Engine> ParseEngine(absl::string_view name);

// One modelled version of one engine. The typed versions convert to it.
class EngineVersion {
 public:
  EngineVersion(SglangVersion version)  // NOLINT: a typed version names its engine
      : engine_(Engine::kSglang), index_(static_cast<int>(version)) {}
  EngineVersion(VllmVersion version)  // NOLINT
      : engine_(Engine::kVllm), index_(static_cast<int>(version)) {}
  EngineVersion(TransformersVersion version)  // NOLINT
      : engine_(Engine::kTransformers), index_(static_cast<int>(version)) {}

  // The latest modelled version of `engine`, which faithful mode reproduces
  // unless a case names another.
  static EngineVersion Latest(Engine engine);
  // A modelled version of `engine` by name (or alias); the error names the
  // engine and lists its versions.
  static absl::StatusOr<EngineVersion> Parse(Engine engine, absl::string_view name);
  // Every modelled version of `engine`, oldest first.
  static std::vector<EngineVersion> Modelled(Engine engine);

  Engine engine() const { return engine_; }
  absl::string_view name() const;   // "0.5.23"
  std::string DisplayName() const;  // "SGLang 0.5.23"

  // The version as its engine's resolvers read it. A version of another
  // engine reads as that engine's latest: only the engine's own profiles
  // consult it.
  SglangVersion sglang() const;
  VllmVersion vllm() const;
  TransformersVersion transformers() const;

  bool operator==(const EngineVersion&) const = default;

 private:
  EngineVersion(Engine engine, int index) : engine_(engine), index_(index) {}

  Engine engine_;
  int index_;  // into the engine's EngineModel::versions
};

// What an engine says about itself.
struct EngineModel {
  Engine engine;
  // The case format's "engine" and the key of its version ("sglang": "0.5.23").
  absl::string_view name;
  absl::string_view title;  // "SGLang": how reports and errors name it
  // The modelled versions, oldest first; a typed version's value is its
  // index here.
  absl::Span<const absl::string_view> versions;
  // Other names of a version (a commit's full hash): (alias, index).
  absl::Span<const std::pair<absl::string_view, int>> aliases;

  // The engine's entry and resolvers, for one of its profiles (resolve.h):
  // what the kernel receives, with the path taken, the keywords nothing
  // read and whatever the entry added recorded in `record` (its events are
  // the caller's to collect).
  absl::StatusOr<ResolvedArgs> (*resolve)(const AttentionCall& call, Profile profile, Mode mode,
                                          Resolution* record);
  // The call a backend's forward() receives from the engine's entry, as a
  // direct call (BackendCallOf).
  AttentionCall (*backend_call)(const AttentionCall& call, Profile profile);
  // The scale `profile`'s code computes when handed None (DefaultSoftmaxScale).
  double (*default_softmax_scale)(Profile profile, int64_t head_dim);
  // An engine that calls a user's backend as a function: the calls its
  // entry makes of it (FunctionCallsOf). Null where backends are objects.
  absl::StatusOr<FunctionCalls> (*function_calls)(const AttentionCall& call,
                                                  Profile profile) = nullptr;
  // The engine's rules for a call's platform (AttentionCall::platform): its
  // backend selection and constructors, then whether the kernel's model was
  // read for that platform. Null: the engine's platform rules are not
  // modelled.
  absl::Status (*check_platform)(const AttentionCall& call, Profile profile, Mode mode) = nullptr;
  // The profiles whose platform is the CPU: the engine hands them q, k and v
  // in host memory (every other profile's live on the device).
  absl::Span<const Profile> host_profiles = {};
};

// The model of `engine`: the one place that switches on the engine.
const EngineModel& ModelOf(Engine engine);
// Where `profile`'s engine keeps q, k and v: the host for a CPU backend,
// else the device.
Device NativeQkvDevice(Profile profile);
// Each engine's own (defined in its folder).
const EngineModel& SglangModel();
const EngineModel& VllmModel();
const EngineModel& TransformersModel();

}  // namespace varlen

#endif  // VARLEN_CONTRACT_ENGINE_H_
