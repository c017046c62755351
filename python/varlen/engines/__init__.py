"""The engines whose own code judges faithful mode, one module each.

An engine module (sglang, vllm, transformers) reads the engine's code from its wheel and
runs it on the CPU under the shared machinery (device: device-tensor
stand-ins, the host-sync ledger, the kernels' capture; source: the wheel
fetcher and the code extraction; compare: the comparison and the tally), and
offers differential.py what it needs:

    NAME, TITLE            "sglang", "SGLang"
    PROFILES               its backends, by the case format's profile names
    DEFAULT_VERSIONS       the versions a run judges unless told
    DEFAULT_CALLS          generated calls per backend unless told
    RUN_FOR_REAL           backends whose kernel is torch's, run for real
    judge(version)         a compare.Judge: the engine, its comparer, what it is judged against
    add_arguments(parser)  optional: the engine's own flags
    case_filter(args)      optional: a change made to each case before it runs
"""

from __future__ import annotations

import importlib
import types

ENGINES = ("sglang", "vllm", "transformers")


def engine_module(name: str) -> types.ModuleType:
    """The engine module called `name` (one of ENGINES)."""
    if name not in ENGINES:
        raise ValueError(f"engine {name!r} is not one of {', '.join(ENGINES)}")
    return importlib.import_module(f"varlen.engines.{name}")
