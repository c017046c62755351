#include "varlen/cases/engine_calls.h"

namespace varlen {

const EngineCalls& CallsOf(Engine engine) {
  switch (engine) {
    case Engine::kSglang:
      return SglangCalls();
    case Engine::kVllm:
      return VllmCalls();
    case Engine::kTransformers:
      return TransformersCalls();
  }
  return SglangCalls();
}

}  // namespace varlen
