// What each engine adds to the generated calls, in a file of its own
// (conformance/engines/<engine>.cc): how a wild case's call becomes one of
// the engine's, the well-formed spellings of one geometry the ArgumentForms
// property compares, where a call carries its offsets, and the corruptions
// NoSilentCorruption draws beyond the offsets'. The generators and the
// call properties ask GeneratorsOf(engine) instead of switching on it.

#ifndef VARLEN_CONFORMANCE_ENGINE_GENERATORS_H_
#define VARLEN_CONFORMANCE_ENGINE_GENERATORS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rapidcheck.h"
#include "varlen/cases/case.h"

namespace varlen::internal {

// One way of passing a case's arguments, and what it is in words.
struct CallForm {
  std::string label;
  CallSpec call;
};

// Adds one corruption of the case's correct call (made with prepared
// metadata or not): what it is in words, and the edit that makes it.
using AddCorruption =
    std::function<void(std::string what, bool prepared, std::function<void(CallSpec*)> edit)>;

struct EngineGenerators {
  // A wild case's call (GenCase: SGLang's shape, any profile) made a call of
  // the engine's: its entries and keywords, each now and then in another
  // form.
  void (*make_wild_call)(Case* c);
  // Every well-formed spelling of c's arguments in c's calling convention
  // that resolves to the same kernel arguments, the default one first.
  std::vector<CallForm> (*well_formed_forms)(const Case& c);
  // `offsets` put where a correct call of the engine carries them.
  void (*set_offsets)(CallSpec* call, const std::vector<int64_t>& offsets);
  // The engine's corruptions of c's correct call beyond the offsets' (its
  // max, its metadata).
  void (*add_corruptions)(const Case& c, const AddCorruption& add);
};

// The one switch on the engine; each engine's table in its own file.
const EngineGenerators& GeneratorsOf(Engine engine);
const EngineGenerators& SglangGenerators();
const EngineGenerators& VllmGenerators();
const EngineGenerators& TransformersGenerators();

// Shared by the engines' tables.
// Any Python value a caller might pass, biased toward plausible ones.
rc::Gen<ArgLiteral> GenArg(const std::vector<int64_t>& offsets, int depth);
// A transformers implementation whose name takes the flash path.
bool IsTransformersFlash(Profile profile);

}  // namespace varlen::internal

#endif  // VARLEN_CONFORMANCE_ENGINE_GENERATORS_H_
