// File: varlen/cases/engines.h
// -----------------------------------------------------------------------------
//
// Triage between engines: a model that works under SGLang and fails under
// vLLM (or the reverse) usually passes the same arguments to both, and the
// engines resolve them under different rules (an int max_seqlen is coerced
// by one and refused by the other; a packed [T, H, D] q is read as a batch
// of T by vLLM). CounterpartCase makes the call a caller moving the model
// makes: the same geometry, data and argument values, in the other engine's
// counterpart profile. `varlen repro --engine=all` runs both and prints what
// differs.

#ifndef VARLEN_CASES_ENGINES_H_
#define VARLEN_CASES_ENGINES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varlen/cases/case.h"

namespace varlen {

// The other engine's profile for the same backend family: fa3 and
// FLASH_ATTN/fa3, triton_attn and TRITON_ATTN, sdpa and TORCH_SDPA,
// flashinfer_cudnn and FLASHINFER; FLASH_ATTN/fa2 maps to fa3 (SGLang has no
// FlashAttention 2 vision backend). Unset when the other engine has none
// modelled.
std::optional<Profile> CounterpartProfile(Profile profile);

struct CounterpartCall {
  Case counterpart;
  // What could not be carried over, in words: switches the other engine
  // does not have, and how q's layout changed where it had to.
  std::vector<std::string> notes;
};

// `c` under the counterpart profile, with the argument values as they are
// (vLLM's builder keywords spelled out as the tensors they make). An error
// names the profile without a counterpart.
absl::StatusOr<CounterpartCall> CounterpartCase(const Case& c);

}  // namespace varlen

#endif  // VARLEN_CASES_ENGINES_H_
