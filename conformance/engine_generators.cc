#include "engine_generators.h"

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

}  // namespace varlen::internal
