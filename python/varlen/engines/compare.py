"""What every engine differential shares for judging: faithful mode's kernel
prediction, the report's forms of tensors and values, the comparison of one
call (outcome, arguments, counts) and the tally of a run, grouped by rule.

An engine module (varlen.engines.sglang, varlen.engines.vllm) subclasses
Comparer with the kernel arguments its backends hand over, and answers
judge(version) with a Judge: its engine, its comparer and what it is judged
against. varlen.engines.differential runs the calls.
"""

from __future__ import annotations

import collections
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from varlen.engines.device import Device, Observation, torch_module

Difference = Tuple[str, str, str]  # (field, faithful mode's value, the engine's)


class Judge:
    """One engine version ready to be compared with faithful mode.

    `engine.call(d)` runs a call description and returns an Observation;
    `comparer.differences(d, predicted, seen)` lists what differs; `modelled`
    is the faithful-mode version judged against (the same version, or the
    latest modelled one for a release that is not modelled); `explained`
    holds the known differences: (profile, test(d, predicted), reason).
    """

    def __init__(self, engine, comparer: "Comparer", version: str, modelled: str, wheel: str,
                 note: str = "",
                 explained: Optional[List[Tuple[str, Callable[[dict, dict], bool], str]]] = None):
        self.engine = engine
        self.comparer = comparer
        self.version = version
        self.modelled = modelled
        self.wheel = wheel
        self.note = note
        self.explained = explained or []


def kernel_prediction(core, text: str) -> Optional[Tuple[str, str]]:
    """What faithful mode says the kernel's own entry does with a call it
    resolves (varlen._core.faithful_call stops at the resolution; the case
    run binds the kernel too): (kind, message) for an entry check's
    exception, ("Unimplemented", why) where the kernel's response is not
    modelled, None where the kernel takes the call."""
    outcome = json.loads(core.repro(text, ["cpu_reference"], "", {})[0]["json"])
    if outcome["observed"] == "error" and outcome["error"]["stage"] == "kernel entry":
        kind, _, message = outcome["error"]["text"].partition(": ")
        return kind, message
    if outcome["observed"] == "unsupported" and outcome.get("resolved") is not None and \
            "not modelled" in outcome["unsupported"]:
        return "Unimplemented", outcome["unsupported"]
    return None


def tensor_json(t, on_device: bool) -> dict:
    """A tensor as the C++ report writes one (varlen::TensorToJson): its
    values, dtype ("torch.int16" -> "int16"), device, shape unless 1-d, and
    the step of a view that takes every step-th row of a dense base."""
    values = t.reshape(-1).tolist()
    if t.is_floating_point():
        values = ["nan" if v != v else ("inf" if v == math.inf else
                                        "-inf" if v == -math.inf else v) for v in values]
    j = {"tensor": values, "dtype": str(t.dtype).removeprefix("torch."),
         "device": "cuda" if on_device else "cpu"}
    if t.dim() != 1:
        j["shape"] = list(t.shape)
    if t.dim() >= 1 and not t.is_contiguous():
        dense = [math.prod(t.shape[d + 1:]) for d in range(t.dim())]
        row, stride = dense[0], t.stride(0)
        if row > 0 and stride % row == 0 and list(t.stride()[1:]) == dense[1:]:
            j["step"] = stride // row
    return j


def cudnn_prefill_pairs(as_json, resolved: dict, a: dict) -> List[Tuple[str, Any, Any]]:
    """cudnn_batch_prefill_with_kv_cache's varlen arguments as captured
    against the resolved ones (both engines call it): k shares q's offsets,
    then the lengths, the three offset arrays and the two maxima."""
    pairs: List[Tuple[str, Any, Any]] = []
    if a["batch_offsets_k"] is not a["batch_offsets_q"]:
        pairs.append(("batch_offsets_k", "batch_offsets_q", "another tensor"))
    pairs += [("actual_seq_lens", resolved["actual_seq_lens"], as_json(a["actual_seq_lens_q"])),
              ("batch_offsets_qk", resolved["batch_offsets_qk"], as_json(a["batch_offsets_q"])),
              ("batch_offsets_v", resolved["batch_offsets_v"], as_json(a["batch_offsets_v"])),
              ("batch_offsets_o", resolved["batch_offsets_o"], as_json(a["batch_offsets_o"])),
              ("max_token_per_sequence", resolved["max_token_per_sequence"],
               a["max_token_per_sequence"]),
              ("max_sequence_kv", resolved["max_sequence_kv"], a["max_sequence_kv"])]
    return pairs


# Parts of a message faithful mode cannot predict to the character, and why:
# (pattern, what both sides' text becomes).
_NORMALIZED = [
    # The dispatcher quotes repr() of the value it refuses: an object's repr
    # holds its class's module and its address (a SingletonCache).
    (re.compile(r"<(?:[\w.]+\.)?SingletonCache object(?: at 0x[0-9a-f]+)?>"),
     "<SingletonCache object>"),
]


def _normalized(message: str) -> str:
    for pattern, replacement in _NORMALIZED:
        message = pattern.sub(replacement, message)
    return message


def same_error(want, raised) -> bool:
    """The same exception type and message, the unpredictable parts aside."""
    if raised is None:
        return False
    if tuple(want) == tuple(raised):
        return True
    return want[0] == raised[0] and _normalized(want[1]) == _normalized(raised[1])


def same_number(p, o) -> bool:
    """Equal as numbers where either is a float (a scale: bool and int are
    numbers); a bool equals only a bool."""
    if isinstance(p, float) or isinstance(o, float):
        try:
            return float(p) == float(o)
        except (TypeError, ValueError):
            return False
    if type(p) is bool or type(o) is bool:
        return type(p) is type(o) and p == o
    return p == o


def same_value(p, o) -> bool:
    """Equal, and of one type where the type matters (an int is not a float)."""
    if type(p) is bool or type(o) is bool:
        return type(p) is type(o) and p == o
    if isinstance(p, float) or isinstance(o, float):
        if type(p) is not type(o):
            return False
        return p == o or (math.isnan(p) and math.isnan(o))
    return p == o


def text(x) -> str:
    return json.dumps(x, default=repr) if not isinstance(x, str) else x


def outcome_text(raised) -> str:
    return "success" if raised is None else f"{raised[0]}: {raised[1]}"


class Comparer:
    """One call, faithful mode's prediction against the engine's observation:
    the outcome first, then (where both succeed) every kernel argument
    (argument_differences, per engine), then the host syncs and
    host-to-device copies."""

    def __init__(self, device: Device):
        self.device = device

    def cache_json(self, x) -> Optional[dict]:
        """The report's form of the engine's SingletonCache, None for anything else."""
        return None

    def as_json(self, x):
        """A captured argument as the C++ report writes a Value."""
        if isinstance(x, torch_module().Tensor):
            return tensor_json(self.device.plain(x), self.device.is_device(x))
        if isinstance(x, list):
            return [self.as_json(item) for item in x]
        cache = self.cache_json(x)
        return x if cache is None else cache

    def argument_differences(self, d: dict, resolved: dict,
                             seen: Observation) -> List[Difference]:
        raise NotImplementedError

    def differences(self, d: dict, predicted: dict, seen: Observation) -> List[Difference]:
        """(field, predicted, observed) for every difference; a call whose
        outcome faithful mode does not model is one ("not modelled", ...)."""
        raised, ledger = seen.raised, seen.ledger
        want = predicted["raised"]
        kernel = predicted.get("kernel")  # the kernel's entry, where the call resolves
        if want is None and kernel is not None:
            want = tuple(kernel)  # the kernel refuses the call: the engine must raise just that
        if want is not None and want[0] == "Unimplemented":
            return [("not modelled", want[1], outcome_text(raised))]
        if want is None and predicted.get("after_kernel") is not None:
            # The engine raises once the kernel returned (vLLM's einops with
            # b=0, the final reshape of an empty output).
            want = tuple(predicted["after_kernel"])
        if (want is None) != (raised is None) or (want is not None and
                                                   not same_error(want, raised)):
            return [("outcome", outcome_text(want), outcome_text(raised))]
        out: List[Difference] = []
        if want is None:
            out += self.argument_differences(d, json.loads(predicted["resolved"]), seen)
        if predicted["host_syncs"] != len(ledger.host_syncs):
            out.append(("host syncs", str(predicted["host_syncs"]),
                        f"{len(ledger.host_syncs)} ({', '.join(ledger.host_syncs)})"))
        if predicted["host_to_device_copies"] != len(ledger.host_to_device_copies):
            out.append(("host-to-device copies", str(predicted["host_to_device_copies"]),
                        f"{len(ledger.host_to_device_copies)} "
                        f"({', '.join(ledger.host_to_device_copies)})"))
        return out


# --- the tally of a run ------------------------------------------------------------------


def rule_of(profile: str, field: str, predicted: str, observed: str, engine: str) -> str:
    """A difference with its values taken out: one line per rule that differs."""
    def kind(text):
        try:
            value = json.loads(text)
        except ValueError:  # an outcome: the error and its message, values out
            text = re.sub(r"tensor\(\[.*?\](, shape=\[[^]]*\])?, dtype=(\w+), device=(\w+)\)",
                          r"tensor(\2 on \3)", text)
            text = re.sub(r"(?<=[=(\s])'[^']*'", "'...'", text)
            return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", text)[:160]
        if isinstance(value, dict) and "tensor" in value:
            return f"an {value['dtype']} tensor on {value['device']}"
        return type(value).__name__
    a, b = kind(predicted), kind(observed)
    if a == b:
        return f"{profile}: {field}: the values differ ({a})"
    return f"{profile}: {field}: faithful {a} / {engine} {b}"


def new_row() -> Dict[str, int]:
    return {"calls": 0, "agree": 0, "not_modelled": 0, "explained": 0, "differ": 0,
            "builder_errors": 0, "succeeded": 0}


def tally(row: dict, rules: Dict[str, Dict[str, Any]], profile: str,
          diffs: List[Difference], reason: Optional[str], case_text: str,
          save_as: Optional[Path], engine: str) -> None:
    """Counts one call into its backend's `row` (agree, not modelled,
    explained by `reason`, differ) and each of its differences into
    `rules`, keeping the first example of each (written to `save_as`)."""
    if not diffs:
        row["agree"] += 1
        return
    if diffs[0][0] == "not modelled":
        row["not_modelled"] += 1
    elif reason is not None:
        row["explained"] += 1
    else:
        row["differ"] += 1
    for field, p, o in diffs:
        rule = rule_of(profile, field, p, o, engine)
        if reason is not None:
            rule = f"{rule}  [explained: {reason}]"
        entry = rules.setdefault(rule, {"count": 0, "example": None, "field": field,
                                        "predicted": p, "observed": o})
        entry["count"] += 1
        if entry["example"] is None:
            entry["example"] = json.loads(case_text)
            if save_as:
                save_as.parent.mkdir(parents=True, exist_ok=True)
                save_as.write_text(case_text)


def print_table(result: dict, out) -> collections.Counter:
    """The backend x outcome table of a run; returns the column totals."""
    columns = ("calls", "agree", "not_modelled", "explained", "differ")
    print("  " + f"{'backend':17s}" + "".join(f"{c:>14s}" for c in columns), file=out)
    total: collections.Counter = collections.Counter()
    for profile, row in result["backends"].items():
        total.update(row)
        print("  " + f"{profile:17s}" + "".join(f"{row[c]:14d}" for c in columns), file=out)
    print("  " + f"{'all':17s}" + "".join(f"{total[c]:14d}" for c in columns) +
          f"   ({result['seconds']} s)", file=out)
    return total


def print_rules(result: dict, engine_name: str, out) -> None:
    """The differences of a run, grouped by rule, most frequent first."""
    if not result["rules"]:
        print("  no differences", file=out)
        return
    print("  differences, by rule (count: one example's values):", file=out)
    for rule, entry in sorted(result["rules"].items(), key=lambda kv: -kv[1]["count"]):
        print(f"    {entry['count']:5d}  {rule}", file=out)
        print(f"           e.g. faithful: {entry['predicted'][:200]}", file=out)
        print(f"                {engine_name + ':':9s} {entry['observed'][:200]}", file=out)
