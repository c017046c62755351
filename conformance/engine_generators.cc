#include "engine_generators.h"

#include <utility>

namespace varlen::internal {

const EngineGenerators& GeneratorsOf(Engine engine) {
  switch (engine) {
    case Engine::kSglang:
      return SglangGenerators();
    case Engine::kVllm:
      return VllmGenerators();
    case Engine::kTransformers:
      return TransformersGenerators();
  }
  return SglangGenerators();
}

void SetKwarg(CallSpec* call, const std::string& key, ArgLiteral value) {
  std::erase_if(call->kwargs, [&](const auto& item) { return item.first == key; });
  call->kwargs.emplace_back(key, std::move(value));
}

}  // namespace varlen::internal
