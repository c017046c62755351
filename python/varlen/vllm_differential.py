"""vLLM's own code as the judge of faithful mode.

    python -m varlen.vllm_differential [--calls=N] [--backends=PROFILE,...] [--seed=S]
        [--vllm-keywords-only] [--save=DIR] [--json=FILE] [--cases=DIR] [--verbose]
        [--expect-agreement]

For each generated call (varlen._core.generate_calls for the profile and vLLM
0.33.0: every form of cu_seqlens, max_seqlen and sequence_lengths, the
builders' keywords, SGLang's keywords a caller carries over, batched and
packed q, fused projections) and each of vLLM's five encoder-attention
backends (FLASH_ATTN/fa2, FLASH_ATTN/fa3, TRITON_ATTN, TORCH_SDPA,
FLASHINFER), the same call is made twice:

* faithful mode predicts it (the C++ contract, varlen._core.faithful_call):
  the exception and its message, or the kernel's arguments; and the host
  syncs and host-to-device copies of the call. Where it resolves, the case
  is also run through the binding (varlen._core.repro on cpu_reference) for
  the kernel's own entry checks, whose refusal is then the predicted
  outcome, and the kernel responses faithful mode does not model;
* vLLM's real MMEncoderAttention runs it (varlen.vllm_engine: the layer and
  its custom ops from the 0.33.0 wheel, registered with the real
  torch.library, on the CPU with real torch), down to the kernels' doors:
  the wheel's flash_attn_varlen_func calls FlashAttention's ops, registered
  with their real schemas, whose kernels run the entry checks written again
  from flash_api.cpp (varlen.kernel_entry); the wheel's
  context_attention_fwd runs up to Triton's launcher (kernel_entry.TritonJit);
  cudnn_batch_prefill_with_kv_cache is a capture shim; TORCH_SDPA runs
  torch's scaled_dot_product_attention for real.
  Device tensors are sglang_differential's: host tensors of a subclass whose
  host reads are counted as syncs.

The two are compared on the outcome (exception type and exact message),
every kernel argument (FlashAttention: cu_seqlens_q, which must be
cu_seqlens_k, max_seqlen_q, which must be max_seqlen_k, an int or a float as
it is, the softmax scale, fa_version; Triton: b_start_loc, b_seq_len,
max_input_len, softmax_scale; FlashInfer: actual_seq_lens_q (and _kv, the
same object), batch_offsets_q (and _k, _o, the same object), batch_offsets_v,
max_token_per_sequence, max_sequence_kv, the scale; the strides of the q, k
and v the kernel receives), TORCH_SDPA's output against a float64 per-chunk
reference computed from the predicted blocks, and the counts.

Most generated calls carry SGLang's keywords (output_ws, softmax_scale,
forward_metadata), which forward_cuda refuses first; --vllm-keywords-only
drops them from each call, so that the same draws reach the ops and kernels.

What it does not cover: the metadata builders are the C++ model's (a case's
vllm_metadata becomes keyword values before either side sees the call), the
kernels' numerics and FlashInfer's cuDNN entry are not run, the doors' checks
are written from the kernels' sources rather than run from their binaries
(without the stable-ABI builds' "<function>, <file>:<line>, " prefix), and
a CPU tensor is never a real device tensor, so torch's device-mismatch
errors do not occur.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from varlen import sglang_differential as sd
from varlen import vllm_engine as ve

PROFILES = tuple(ve.PROFILES)
VERSION = ve.VLLM_VERSION

# Differences that are known and why: (profile, which calls, reason). A test
# takes the call description and faithful mode's prediction.
EXPLAINED: List[Tuple[str, Callable[[dict, dict], bool], str]] = []

# Parts of a message faithful mode cannot predict to the character, and why:
# (pattern, what both sides' text becomes).
_NORMALIZED = [
    # The dispatcher quotes repr() of the value it refuses: an object's repr
    # holds its class's module and its address (SGLang's SingletonCache,
    # here vllm_engine's stand-in).
    (re.compile(r"<(?:[\w.]+\.)?SingletonCache object(?: at 0x[0-9a-f]+)?>"),
     "<SingletonCache object>"),
]


def _normalized(message: str) -> str:
    for pattern, replacement in _NORMALIZED:
        message = pattern.sub(replacement, message)
    return message


def same_error(want, raised) -> bool:
    """sglang_differential's comparison, with the unpredictable parts taken out."""
    if raised is None:
        return False
    if sd._same_error(tuple(want), tuple(raised)):
        return True
    return want[0] == raised[0] and _normalized(want[1]) == _normalized(raised[1])


# --- the engine --------------------------------------------------------------------------


def _cuda_repr(self, *, tensor_contents=None):
    """repr() of a device tensor as torch writes a CUDA tensor's: the host
    tensor's text with device='cuda:0' as its first suffix (the dispatcher's
    type error quotes the repr of a list that holds one)."""
    torch = sd._torch()
    with torch._C.DisableTorchFunction():
        text = torch._tensor_str._str(self.as_subclass(torch.Tensor),
                                      tensor_contents=tensor_contents)
    if not (text.startswith("tensor(") and text.endswith(")")):
        return text
    body = text[len("tensor("):-1]
    end = len(body)
    if body.startswith("["):
        depth = 0
        for i, ch in enumerate(body):
            depth += {"[": 1, "]": -1}.get(ch, 0)
            if depth == 0:
                end = i + 1
                break
    elif "," in body:
        end = body.index(",")
    return f"tensor({body[:end]}, device='cuda:0'{body[end:]})"


class Engine(ve.VllmEngine):
    """vllm_engine's MMEncoderAttention, with the call's tensors materialized
    in their own strides, and device tensors written as CUDA tensors are."""

    def __init__(self, wheel: Optional[str] = None):
        super().__init__(wheel)
        self.device.DeviceTensor.__repr__ = _cuda_repr

    def _materialize(self, d: dict):
        tensors: Dict[int, Any] = {}

        def strided(t):
            key = t["id"]
            if key not in tensors:
                host = sd.host_copy(t["__tensor__"])
                tensors[key] = (host.as_subclass(self.device.DeviceTensor)
                                if t["device"] == "cuda" else host)
            return tensors[key]

        def strided_value(v):
            if isinstance(v, dict) and "__tensor__" in v:
                return strided(v)
            if isinstance(v, dict) and "__cache__" in v:
                data = v["__cache__"]
                return ve.SingletonCache(None if data is None else strided(data))
            if isinstance(v, list):
                return [strided_value(item) for item in v]
            if isinstance(v, dict):
                return {key: strided_value(item) for key, item in v.items()}
            return v

        self._tensors = tensors
        return strided, strided_value

    def call(self, d: dict) -> sd.Observation:
        seen = super().call(d)
        seen.tensors = self._tensors  # id -> the tensor as vLLM got it
        return seen


# --- comparing ---------------------------------------------------------------------------


def _same_value(p, o) -> bool:
    """Equal, and of one type where the type matters (an int is not a float)."""
    if type(p) is bool or type(o) is bool:
        return type(p) is type(o) and p == o
    if isinstance(p, float) or isinstance(o, float):
        if type(p) is not type(o):
            return False
        return p == o or (math.isnan(p) and math.isnan(o))
    return p == o


def _strides_agree(predicted, shape, observed) -> bool:
    """The same strides on every dimension of more than one element."""
    if predicted is None or len(predicted) != len(observed):
        return False
    return all(p == o for p, o, n in zip(predicted, observed, shape) if n > 1)


# The tolerance of TORCH_SDPA's output against the float64 reference, as a
# fraction of the largest |v| (torch's CPU kernels accumulate in float32).
_SDPA_TOLERANCE = {"torch.float64": 1e-10, "torch.float32": 2e-5, "torch.float16": 4e-3,
                   "torch.bfloat16": 3e-2}


class Comparer:
    """sglang_differential's comparison, with vLLM's kernels' arguments."""

    def __init__(self, engine: ve.VllmEngine):
        self.engine = engine

    def as_json(self, x):
        """A captured argument as the C++ report writes a Value."""
        torch = sd._torch()
        if isinstance(x, torch.Tensor):
            return sd.tensor_json(self.engine.device.plain(x), self.engine.device.is_device(x))
        if isinstance(x, list):
            return [self.as_json(item) for item in x]
        return x

    def differences(self, d: dict, predicted: dict, seen: sd.Observation
                    ) -> List[Tuple[str, str, str]]:
        """(field, predicted, observed) for every difference."""
        raised, ledger = seen.raised, seen.ledger
        out: List[Tuple[str, str, str]] = []
        want = predicted["raised"]
        kernel = predicted.get("kernel")  # the kernel's entry, where the call resolves
        if want is None and kernel is not None:
            want = tuple(kernel)  # the kernel refuses the call: vLLM must raise just that
        if want is not None and want[0] == "Unimplemented":
            return [("not modelled", want[1], sd._outcome_text(raised))]
        if want is None and predicted.get("after_kernel") is not None:
            # The wrapper raises once the kernel returned (einops with b=0, the
            # final reshape of an empty output).
            want = tuple(predicted["after_kernel"])
        if (want is None) != (raised is None) or (want is not None and
                                                   not same_error(want, raised)):
            out.append(("outcome", sd._outcome_text(want), sd._outcome_text(raised)))
            return out
        if want is None:
            out += self._argument_differences(d, json.loads(predicted["resolved"]), seen)
        if predicted["host_syncs"] != len(ledger.host_syncs):
            out.append(("host syncs", str(predicted["host_syncs"]),
                        f"{len(ledger.host_syncs)} ({', '.join(ledger.host_syncs)})"))
        if predicted["host_to_device_copies"] != len(ledger.host_to_device_copies):
            out.append(("host-to-device copies", str(predicted["host_to_device_copies"]),
                        f"{len(ledger.host_to_device_copies)} "
                        f"({', '.join(ledger.host_to_device_copies)})"))
        return out

    def _captured(self, capture: sd.Capture) -> dict:
        torch = sd._torch()
        return {k: (self.as_json(v) if not isinstance(v, torch.Tensor) or v.numel() < 64
                    else f"tensor of shape {list(v.shape)}") for k, v in capture.args.items()}

    def _strides(self, resolved, a) -> List[Tuple[str, Any, Any]]:
        predicted = resolved.get("qkv_strides")
        if predicted is None:
            return []
        out = []
        for name, want, t in zip("qkv", predicted, (a["q"], a["k"], a["v"])):
            if t.numel() == 0:  # no element is read: any strides will do
                continue
            seen = list(t.stride())
            if not _strides_agree(want, list(t.shape), seen):
                out.append((f"{name} strides", want, seen))
        return out

    def _argument_differences(self, d, resolved, seen: sd.Observation):
        profile = d["profile"]
        capture = seen.capture
        a = capture.args
        pairs: List[Tuple[str, Any, Any]] = []
        loose: List[Tuple[str, Any, Any]] = []  # compared as numbers (the scale)
        if profile == "TORCH_SDPA":
            if capture.kernel is not None:
                return [("kernel", "torch's SDPA", capture.kernel)]
            return self._sdpa_output(d, resolved, seen)
        want_kernel = {"TRITON_ATTN": "context_attention_fwd",
                       "FLASHINFER": "cudnn_batch_prefill_with_kv_cache"}.get(
                           profile, "flash_attn_varlen_func")
        if capture.kernel != want_kernel:
            return [("kernel", want_kernel, str(capture.kernel))]
        if profile.startswith("FLASH_ATTN"):
            if a["cu_seqlens_k"] is not a["cu_seqlens_q"] or \
                    a["max_seqlen_k"] is not a["max_seqlen_q"]:
                pairs.append(("q and k arguments", "the same objects", "different objects"))
            pairs += [("cu_seqlens", resolved["cu_seqlens"], self.as_json(a["cu_seqlens_q"])),
                      ("max_seqlen", resolved["max_seqlen"], a["max_seqlen_q"]),
                      ("fa_version", resolved.get("fa_version"), a.get("fa_version"))]
            loose.append(("scale", resolved["scale"], a["softmax_scale"]))
        elif profile == "TRITON_ATTN":
            pairs += [("b_start_loc", resolved["b_start_loc"], self.as_json(a["b_start_loc"])),
                      ("b_seq_len", resolved["b_seq_len"], self.as_json(a["b_seq_len"])),
                      ("max_input_len", resolved["max_input_len"], a["max_input_len"]),
                      ("output_from_workspace", resolved["output_from_workspace"], False)]
            loose.append(("scale", resolved["scale"], a["softmax_scale"]))
        elif profile == "FLASHINFER":
            if a["actual_seq_lens_kv"] is not a["actual_seq_lens_q"]:
                pairs.append(("actual_seq_lens_kv", "actual_seq_lens_q", "another tensor"))
            output = seen.output
            pairs += sd.cudnn_prefill_pairs(self.as_json, resolved, a)
            pairs.append(("output_4d", resolved["output_4d"],
                          output is not None and output.dim() == 4))
            loose.append(("scale", resolved["scale"], a["scale"]))
        pairs += self._strides(resolved, a)
        out = [(name, sd._text(p), sd._text(o)) for name, p, o in pairs if not _same_value(p, o)]
        out += [(name, sd._text(p), sd._text(o)) for name, p, o in loose if not sd._same(p, o)]
        return out

    def _sdpa_output(self, d, resolved, seen: sd.Observation):
        """vLLM's output against softmax(q k^T * scale) v in float64 over each
        predicted block of each item."""
        torch = sd._torch()
        output = seen.output
        layer = d["vllm_layer"]
        heads, head_size = int(layer["num_heads"]), int(layer["head_size"])
        kv_heads = int(layer["num_kv_heads"] if layer.get("num_kv_heads") is not None else heads)
        q, k, v = (self.engine.device.plain(seen.tensors[d[n]["id"]]) for n in ("q", "k", "v"))
        bsz, s = int(q.shape[0]), int(q.shape[1])
        if output is None:
            return [("output", "a tensor", "None")]
        got = self.engine.device.plain(output)
        if got.numel() != bsz * s * heads * head_size:
            return [("output shape", f"[{bsz}, {s}, {heads}, {head_size}]",
                     str(list(got.shape)))]
        q4, k4, v4 = (x.reshape(bsz, -1, h, head_size).double()
                      for x, h in ((q, heads), (k, kv_heads), (v, kv_heads)))
        want = torch.zeros(bsz, s, heads, head_size, dtype=torch.float64)
        blocks = resolved.get("blocks") if resolved.get("mask") == "block_diagonal" else [[0, s]]
        scale = float(resolved["scale"])
        group = heads // kv_heads
        for item in range(bsz):
            for start, end in blocks:
                if end <= start:
                    continue
                qb = q4[item, start:end]
                kb = k4[item, start:end].repeat_interleave(group, dim=1)
                vb = v4[item, start:end].repeat_interleave(group, dim=1)
                scores = torch.einsum("shd,thd->hst", qb, kb) * scale
                want[item, start:end] = torch.einsum("hst,thd->shd", scores.softmax(-1), vb)
        got = got.reshape(bsz, s, heads, head_size).double()
        bound = _SDPA_TOLERANCE.get(str(q.dtype), 3e-2) * max(1.0, float(v4.abs().max())
                                                               if v4.numel() else 1.0)
        finite = torch.isfinite(want)
        if not torch.equal(finite, torch.isfinite(got)):
            return [("output", "finite where the reference is", "non-finite values elsewhere")]
        error = float((got[finite] - want[finite]).abs().max()) if finite.any() else 0.0
        if error > bound:
            return [("output", f"within {bound:.3g} of the float64 reference",
                     f"max error {error:.3g}")]
        return []


# --- the run ------------------------------------------------------------------------------


def _case_name(profile: str) -> str:
    return profile.replace("/", "-")


# The keywords of SGLang's backends that MMEncoderAttention does not take: a
# generated call carries each about half the time, and forward_cuda refuses
# it before anything else is read.
SGLANG_KEYWORDS = ("output_ws", "softmax_scale")


def drop_sglang_keywords(text: str) -> str:
    """The case with SGLang's keywords and forward_metadata taken out of its
    call, so that the rest of it reaches the op."""
    c = json.loads(text)
    call = c["call"]
    call["kwargs"] = {k: v for k, v in call.get("kwargs", {}).items() if k not in SGLANG_KEYWORDS}
    call["forward_metadata"] = None
    c["name"] = c["name"] + "-vllm-keywords"
    return json.dumps(c)


def run(calls: int, backends: List[str], seed: int, save: Optional[str], core,
        replay: Optional[List[str]] = None, verbose: bool = False,
        engine: Optional[Engine] = None, vllm_keywords_only: bool = False) -> dict:
    engine = engine or Engine()
    comparer = Comparer(engine)
    table: Dict[str, Dict[str, int]] = {}
    rules: Dict[str, Dict[str, Any]] = collections.OrderedDict()
    started = time.monotonic()
    for profile in backends:
        row = {"calls": 0, "agree": 0, "not_modelled": 0, "explained": 0, "differ": 0,
               "builder_errors": 0, "succeeded": 0}
        explained = [(test, reason) for p, test, reason in EXPLAINED if p == profile]
        if replay is None:
            cases = core.generate_calls(calls, seed, profile, VERSION)
        else:  # replayed cases: each as faithful mode's vLLM call
            cases = []
            for t in replay:
                c = json.loads(t)
                if c["call"]["profile"] == profile:
                    c["mode"] = "faithful"
                    c.pop("expect", None)
                    cases.append(json.dumps(c))
        if vllm_keywords_only:
            cases = [drop_sglang_keywords(t) for t in cases]
        for text in cases:
            predicted = core.faithful_call(text)
            if "builder_error" in predicted:
                row["builder_errors"] += 1  # the C++ builders are not what is judged
                continue
            row["calls"] += 1
            if predicted["raised"] is None:
                row["succeeded"] += 1
            d = predicted["call"]
            if predicted["raised"] is None and profile != "TORCH_SDPA":
                predicted["kernel"] = sd.kernel_prediction(core, text)
            diffs = comparer.differences(d, predicted, engine.call(d))
            if verbose and diffs:
                print(f"{json.loads(text)['name']}: {json.dumps(diffs)[:2000]}", file=sys.stderr)
            reason = next((r for test, r in explained if test(d, predicted)), None)
            sd.tally(row, rules, profile, diffs, reason, text,
                     save and Path(save) / (f"differential-vllm-{VERSION}-{_case_name(profile)}-"
                                            f"{len(rules) + 1}.json"), engine="vLLM")
        table[profile] = row
        print(f"  {profile}: {row['calls']} calls, {row['differ']} differ", file=sys.stderr)
    return {"vllm": VERSION, "wheel": Path(engine.code.wheel).name, "judged_as": VERSION,
            "vllm_keywords_only": vllm_keywords_only,
            "seconds": round(time.monotonic() - started, 1), "backends": table, "rules": rules}


def print_report(result: dict, out=sys.stdout) -> None:
    print(f"vLLM {result['vllm']} ({result['wheel']}) against faithful mode "
          f"{result['judged_as']}" + (", SGLang's keywords dropped from each call"
                                      if result.get("vllm_keywords_only") else ""), file=out)
    total = sd.print_table(result, out)
    print(f"  ({total['succeeded']} calls faithful mode predicts to succeed: their kernel "
          f"arguments, or TORCH_SDPA's output, are compared)", file=out)
    if total["builder_errors"]:
        print(f"  ({total['builder_errors']} generated calls whose metadata builder raises "
              f"first are not counted)", file=out)
    sd.print_rules(result, "vLLM", out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vllm-differential", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2100, help="generated calls per backend")
    parser.add_argument("--backends", default=",".join(PROFILES))
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--save", help="write one example case per rule that differs here")
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--cases", help="replay the case files of this directory (written by "
                                        "--save) instead of generating calls")
    parser.add_argument("--vllm-keywords-only", action="store_true",
                        help="drop SGLang's keywords (output_ws, softmax_scale) and "
                             "forward_metadata from each generated call, so that it reaches "
                             "the op")
    parser.add_argument("--verbose", action="store_true", help="print every difference")
    parser.add_argument("--expect-agreement", action="store_true",
                        help="exit 1 unless every call agrees (not-modelled paths aside)")
    args = parser.parse_args(argv)
    from varlen import _core
    backends = [b for b in args.backends.split(",") if b]
    for b in backends:
        if b not in PROFILES:
            parser.error(f"--backends: {b!r} is not one of {', '.join(PROFILES)}")
    print(f"vllm-differential: vLLM {VERSION}, {args.calls} calls x {len(backends)} backends",
          file=sys.stderr)
    replay = None
    if args.cases:
        replay = [p.read_text() for p in sorted(Path(args.cases).glob("*.json"))]
    result = run(args.calls, backends, args.seed, args.save, _core, replay, args.verbose,
                 vllm_keywords_only=args.vllm_keywords_only)
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    if args.expect_agreement and any(row["differ"] for row in result["backends"].values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
