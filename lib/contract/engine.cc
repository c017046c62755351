#include "varlen/contract/engine.h"

#include <array>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varlen/contract/call.h"

namespace varlen {

absl::Span<const Engine> AllEngines() {
  static constexpr std::array<Engine, 3> kAll = {Engine::kSglang, Engine::kVllm,
                                                 Engine::kTransformers};
  return kAll;
}

const EngineModel& ModelOf(Engine engine) {
  switch (engine) {
    case Engine::kSglang:
      return SglangModel();
    case Engine::kVllm:
      return VllmModel();
    case Engine::kTransformers:
      return TransformersModel();
  }
  return SglangModel();
}

absl::string_view EngineName(Engine engine) { return ModelOf(engine).name; }

Device NativeQkvDevice(Profile profile) {
  return absl::c_linear_search(ModelOf(EngineOf(profile)).host_profiles, profile) ? Device::kCpu
                                                                                  : Device::kCuda;
}

absl::StatusOr<Engine> ParseEngine(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (Engine engine : AllEngines()) {
    if (ModelOf(engine).name == name) return engine;
    names.push_back(ModelOf(engine).name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("engine \"", name, "\" is not one of ", absl::StrJoin(names, ", ")));
}

EngineVersion EngineVersion::Latest(Engine engine) {
  return EngineVersion(engine, static_cast<int>(ModelOf(engine).versions.size()) - 1);
}

absl::StatusOr<EngineVersion> EngineVersion::Parse(Engine engine, absl::string_view name) {
  const EngineModel& model = ModelOf(engine);
  for (size_t i = 0; i < model.versions.size(); ++i) {
    if (model.versions[i] == name) return EngineVersion(engine, static_cast<int>(i));
  }
  for (const auto& [alias, index] : model.aliases) {
    if (alias == name) return EngineVersion(engine, index);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(model.title, " version \"", name,
                   "\" is not modelled (modelled: ", absl::StrJoin(model.versions, ", "), ")"));
}

std::vector<EngineVersion> EngineVersion::Modelled(Engine engine) {
  std::vector<EngineVersion> versions;
  for (size_t i = 0; i < ModelOf(engine).versions.size(); ++i) {
    versions.push_back(EngineVersion(engine, static_cast<int>(i)));
  }
  return versions;
}

absl::string_view EngineVersion::name() const { return ModelOf(engine_).versions[index_]; }

std::string EngineVersion::DisplayName() const {
  return absl::StrCat(ModelOf(engine_).title, " ", name());
}

SglangVersion EngineVersion::sglang() const {
  return engine_ == Engine::kSglang ? static_cast<SglangVersion>(index_) : kLatestSglangVersion;
}

VllmVersion EngineVersion::vllm() const {
  return engine_ == Engine::kVllm ? static_cast<VllmVersion>(index_) : kLatestVllmVersion;
}

TransformersVersion EngineVersion::transformers() const {
  return engine_ == Engine::kTransformers ? static_cast<TransformersVersion>(index_)
                                          : kLatestTransformersVersion;
}

}  // namespace varlen
