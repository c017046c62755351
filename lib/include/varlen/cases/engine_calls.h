// File: varlen/cases/engine_calls.h
// -----------------------------------------------------------------------------
//
// What each engine says about the calls cases describe: the rules of its
// calling convention that the case format enforces (its layouts, its entry,
// its prepared metadata), the correct call for a geometry in each of its
// profiles, and how a report prints a call. One EngineCalls per engine,
// defined in the engine's folder (lib/cases/<engine>/calls.cc); the case
// reader, the reports, the correct calls and the generators ask CallsOf()
// instead of switching on the engine. The engine's resolution is its
// EngineModel's (varlen/contract/engine.h).

#ifndef VARLEN_CASES_ENGINE_CALLS_H_
#define VARLEN_CASES_ENGINE_CALLS_H_

#include "absl/status/status.h"
#include "varlen/cases/case.h"

namespace varlen {

struct EngineCalls {
  // The engine's own rules for a call (errors name "$.call..." paths); the
  // rules every engine shares (ranges, literals, the batched product) are
  // the reader's.
  absl::Status (*validate)(const CallSpec& call, const Geometry& g);
  // Whether a correct call in `profile` can carry `g` (ProfileCanCarry).
  bool (*can_carry)(Profile profile, const Geometry& g);
  // Whether q, k and v may be views of one fused projection in a correct
  // call in `profile` (ProfileTakesFusedQkv), and the layout they then take.
  bool (*takes_fused_qkv)(Profile profile, const Geometry& g);
  QLayout fused_layout;
  // Sets c->call to the correct call for c->geometry (SetCorrectCall).
  void (*set_correct_call)(Case* c, Profile profile, bool prepared, Entry entry);
  // Whether a report spells out forward_metadata=None: the engine's entry
  // always takes the argument.
  bool takes_forward_metadata;
};

// The calls of `engine`: the one place that switches on the engine.
const EngineCalls& CallsOf(Engine engine);
// Each engine's own (defined in its folder).
const EngineCalls& SglangCalls();
const EngineCalls& VllmCalls();
const EngineCalls& TransformersCalls();

}  // namespace varlen

#endif  // VARLEN_CASES_ENGINE_CALLS_H_
