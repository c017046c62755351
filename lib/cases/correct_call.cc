#include "varlen/cases/correct_call.h"

#include <algorithm>
#include <utility>

#include "varlen/cases/engine_calls.h"

namespace varlen {

std::vector<int64_t> OffsetsOf(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> offsets = {0};
  for (int64_t length : lengths) offsets.push_back(offsets.back() + length);
  return offsets;
}

bool ProfileCanCarry(Profile profile, const Geometry& g) {
  // Padding rows are not a model's usual call: whether a profile accepts
  // them, and what it makes of them, is what a case file with padding asks.
  return g.padding.empty() && CallsOf(EngineOf(profile)).can_carry(profile, g);
}

bool ProfileTakesFusedQkv(Profile profile, const Geometry& g) {
  return CallsOf(EngineOf(profile)).takes_fused_qkv(profile, g);
}

QLayout FusedQkvLayout(Profile profile) { return CallsOf(EngineOf(profile)).fused_layout; }

void SetCorrectCall(Case* c, Profile profile, bool prepared, Entry entry) {
  c->call = CallSpec();
  c->call.profile = profile;
  c->call.entry = entry;
  CallsOf(EngineOf(profile)).set_correct_call(c, profile, prepared, entry);
  Expectation e;
  e.outcome = Expectation::Outcome::kSuccess;
  c->expect = e;
}

void SetKwarg(CallSpec* call, const std::string& key, ArgLiteral value) {
  std::erase_if(call->kwargs, [&](const auto& item) { return item.first == key; });
  call->kwargs.emplace_back(key, std::move(value));
}

}  // namespace varlen
