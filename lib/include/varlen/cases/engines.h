// File: varlen/cases/engines.h
// -----------------------------------------------------------------------------
//
// Triage between engines: a model that works under one engine and fails
// under another usually passes the same arguments to both, and the engines
// resolve them under different rules (an int max_seqlen is coerced by one
// and refused by another; a packed [T, H, D] q is read as a batch of T by
// vLLM; transformers' layer picks its path by the implementation's name).
// CounterpartCase makes the call a caller moving the model makes: the same
// geometry, data and argument values, in the target engine's profile for
// the same backend family. `varlen repro --engine=all` runs the case in
// every engine and prints what differs.

#ifndef VARLEN_CASES_ENGINES_H_
#define VARLEN_CASES_ENGINES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varlen/cases/case.h"

namespace varlen {

// `target`'s profile for the backend family of `profile`: fa3,
// FLASH_ATTN/fa3 and flash_attention_3; FLASH_ATTN/fa2, flash_attention_2
// and the hub's flash name (fa3 in SGLang, which has no FlashAttention 2
// vision backend); fa4 and flash_attention_4; triton_attn and TRITON_ATTN;
// sdpa, TORCH_SDPA and transformers' sdpa (and eager); flashinfer_cudnn and
// FLASHINFER. Unset when `target` has none modelled.
std::optional<Profile> CounterpartProfile(Profile profile, Engine target);

struct CounterpartCall {
  Case counterpart;
  // What could not be carried over, in words: switches the other engine
  // does not have, and how q's layout changed where it had to.
  std::vector<std::string> notes;
};

// `c` under `target`'s counterpart profile, with the argument values as
// they are (vLLM's builder keywords spelled out as the tensors they make;
// transformers' interface keywords as cu_seqlens and max_seqlen; into
// transformers, the layer's call). An error names the profile without a
// counterpart, or why the call has none.
absl::StatusOr<CounterpartCall> CounterpartCase(const Case& c, Engine target);

}  // namespace varlen

#endif  // VARLEN_CASES_ENGINES_H_
