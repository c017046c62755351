// File: varlen/cases/correct_call.h
// -----------------------------------------------------------------------------
//
// The correct call for a geometry: what a well-behaved model passes to each
// profile. Generated properties and the differential fuzz target start from
// it, so that whatever they find is the backend's doing, not the caller's.

#ifndef VARLEN_CASES_CORRECT_CALL_H_
#define VARLEN_CASES_CORRECT_CALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "varlen/cases/case.h"

namespace varlen {

// The token offsets [0, l0, l0+l1, ...] of `lengths`.
std::vector<int64_t> OffsetsOf(const std::vector<int64_t>& lengths);

// The grid_thw ([images, 3]: t, h, w; int64 on the device) whose frames, one
// segment each, have the non-zero `lengths` in order: equal neighbours are
// the frames of one video, each frame as square as its length allows.
ArgLiteral FrameGridOf(const std::vector<int64_t>& lengths);

// A tower's window config under which each frame of `grid` (FrameGridOf's
// form) is one window: no merge, patches of 1, windows wider than every
// frame's side.
TowerWindows OneWindowPerFrame(const ArgLiteral& grid);

// Whether a correct call in `profile` can carry geometry `g` (each engine
// says, in engine_calls.h): for example flashinfer_cudnn offsets q, k and v
// with one per-token width (no GQA, no distinct value head dim), and
// amx_attn drops any softmax_scale but its kernel's default. No correct
// call carries padding rows.
bool ProfileCanCarry(Profile profile, const Geometry& g);

// Whether q, k and v may be views of one fused projection output in a
// correct call (the kernels that read strides, with one head dim for q, k
// and v), and the layout they then take (FusedQkvLayout).
bool ProfileTakesFusedQkv(Profile profile, const Geometry& g);
QLayout FusedQkvLayout(Profile profile);

// Sets c->call to the correct arguments for c->geometry in `profile`
// (prepared metadata or keyword arguments where the profile has both; a
// scale other than the default as a direct caller passes it) and expects
// success.
void SetCorrectCall(Case* c, Profile profile, bool prepared = false, Entry entry = Entry::kDirect);

// Sets keyword `key` of `call` to `value`, after the other keywords (an
// explicit None stays: passing None is an argument).
void SetKwarg(CallSpec* call, const std::string& key, ArgLiteral value);

}  // namespace varlen

#endif  // VARLEN_CASES_CORRECT_CALL_H_
