"""varlen for Python: the conformance suite and the regression corpus on
attention backends written in Python.

One line registers a backend; the C++ harness then runs on it exactly what it
runs on its own backends (generated properties, the corpus, shrinking, the
float64 oracle, the reports):

    import varlen

    @varlen.kernel_backend(name="my_kernel", dtypes=("float16", "bfloat16"))
    def my_kernel(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale):
        ...  # fill o [T, H, Dv] from q [T, H, D], k and v [T, H_kv, D]

    result = varlen.check("my_kernel", report_dir="varlen-report")
    assert result.passed, result.text

A call-level backend is an engine's own backend object (SGLang's vision
backends first): varlen.register(varlen.CallBackend(name=..., make=...,
profile="sdpa")). The harness builds each call from a case, with every
argument in the exact form the case names, and judges what forward raises or
returns against what faithful mode predicts (docs/python.md).

`varlen.record("dir")` is a context manager that writes every call an
engine's vision attention sees (SGLang's backend classes, vLLM's
MMEncoderAttention) as a case file, to replay with `varlen repro`
(varlen.recording).

The same entry points as the varlen command: check, repro, load_case,
reference, backends; `python -m varlen` is that command for Python backends,
and the pytest plugin (varlen.pytest_plugin) turns the suite into pytest
items.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import threading
from typing import Dict, List, Optional, Sequence, Union

from varlen.spec import CallBackend, CallContext, Capabilities, KernelBackend
from varlen import _bridge

try:
    from varlen import _core
except ImportError as _error:  # a source checkout without the compiled module
    raise ImportError(
        "varlen's compiled module (varlen._core) is missing: install the package with "
        "`pip install ./python`, or build the project with VARLEN_BUILD_PYTHON=ON and put "
        f"<build>/python on PYTHONPATH ({_error})") from _error

from varlen.recording import Recorder, record  # noqa: E402  (varlen.record(...))

__all__ = [
    "CallBackend", "CallContext", "Capabilities", "KernelBackend", "CheckResult", "Outcome",
    "Case", "backends", "check", "kernel_backend", "load_backend", "load_case", "reference",
    "register", "repro", "record", "Recorder",
]

# name -> (backend, where it was loaded from: "module:attr" or None)
_registered: Dict[str, tuple] = {}


def register(backend: Union[KernelBackend, CallBackend], origin: Optional[str] = None):
    """Registers a Python backend with the harness; returns it.

    Registering the same object again does nothing; another object under a
    name already taken is an error.
    """
    if not isinstance(backend, (KernelBackend, CallBackend)):
        raise TypeError(f"register(): {backend!r} is neither a varlen.KernelBackend nor a "
                        "varlen.CallBackend")
    if backend.name in _registered:
        if _registered[backend.name][0] is backend:
            return backend
        raise ValueError(f"register(): a backend named {backend.name!r} is already registered")
    call_level = isinstance(backend, CallBackend)
    # A call-level backend is an engine's own code, of one version.
    engine, version = (backend.engine, backend.modelled_version) if call_level else ("", "")
    caps = _bridge.capabilities_dict(backend.capabilities)
    if call_level:
        caps["profiles"] = [backend.modelled_profile]
    _core.register_backend(backend.name, backend.description or backend.name, caps,
                           _bridge.adapter_for(backend), call_level, engine, version)
    _registered[backend.name] = (backend, origin)
    return backend


def kernel_backend(name: Optional[str] = None, description: str = "", **capabilities):
    """Decorator: registers fn as a kernel-level backend with these capabilities."""

    def wrap(fn):
        register(KernelBackend(name=name or fn.__name__, fn=fn,
                               capabilities=Capabilities(**capabilities),
                               description=description))
        return fn

    return wrap


def load_backend(target: str) -> List[str]:
    """Imports "module:attr" (or "module", its BACKENDS) and registers what it
    names: a backend, a list of them, or a module with BACKENDS. Returns the
    names. A name the harness already has (cpu_flash, ...) is returned as is."""
    if ":" not in target and target in {b["name"] for b in _core.backends()}:
        return [target]
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--backend={target}: cannot import {module_name!r} ({e})") from e
    obj = getattr(module, attr or "BACKENDS", None)
    if obj is None:
        raise ValueError(f"--backend={target}: {module_name} has no {attr or 'BACKENDS'!r}")
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    names = []
    for item in items:
        if isinstance(item, str):
            names.append(item)
            continue
        origin = target if attr else f"{module_name}:BACKENDS"
        register(item, origin=origin)
        names.append(item.name)
    if not names:
        reason = getattr(module, "UNAVAILABLE_REASON", None)
        raise ValueError(f"--backend={target} names no backend" + (f": {reason}" if reason else ""))
    return names


def backends() -> List[dict]:
    """Every backend the harness has: name, description, unavailable (why not
    here, or ""), call_level."""
    return list(_core.backends())


def _names(backend) -> List[str]:
    if backend is None:
        return []
    if isinstance(backend, (str, KernelBackend, CallBackend)):
        backend = [backend]
    names = []
    for b in backend:
        if isinstance(b, str):
            names.extend(load_backend(b) if ":" in b else [b])
        else:
            register(b)
            names.append(b.name)
    return names


def _repro_command(name: str) -> Optional[str]:
    origin = _registered.get(name, (None, None))[1]
    if origin is None:
        return None
    return f"{sys.executable} -m varlen repro {{file}} --load={origin} --backend={name}"


def _workers(names: List[str], in_process: bool) -> Dict[str, tuple]:
    """How each backend's worker process starts (varlen's supervised runs):
    `python -m varlen worker`, loading the module the backend came from, with
    this interpreter's module path. A backend registered as an object, with
    no "module:attr" to load it from, runs in this process, as every backend
    does with in_process or VARLEN_IN_PROCESS=1 (for a debugger)."""
    if in_process or os.environ.get("VARLEN_IN_PROCESS", "") in ("1", "true"):
        return {}
    # This varlen first: the source tree (without the compiled module) may be
    # on the path before it.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [package_parent] + [p for p in sys.path if p and p != package_parent]
    environment = [f"PYTHONPATH={os.pathsep.join(path)}"]
    workers = {}
    for name in names or [b["name"] for b in _core.backends()]:
        backend, origin = _registered.get(name, (None, None))
        if backend is not None and origin is None:
            continue
        command = [sys.executable, "-m", "varlen", "worker"]
        if origin is not None:
            command.append(f"--load={origin}")
        workers[name] = (command, environment)
    return workers


def _serve_if_worker() -> bool:
    """In a worker process, started by a supervisor: serve its calls on the
    backends registered so far, then exit. Elsewhere: False."""
    if not _core.is_worker():
        return False
    threading.excepthook = _end_worker_on_thread_exception
    sys.stdout.flush()
    os._exit(_core.serve_as_worker())


def _end_worker_on_thread_exception(args) -> None:
    """An exception that escapes a backend's own thread ends its worker, as
    std::terminate ends a C++ program: the case it happened in fails as a
    CRASH with this traceback, instead of the thread dying unnoticed while
    the call returns whatever it left in the output."""
    import traceback
    name = args.thread.name if args.thread is not None else "?"
    sys.stderr.write(f"varlen: an exception escaped the backend's thread {name!r}; "
                     "the worker ends\n")
    traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback, file=sys.stderr)
    sys.stderr.flush()
    os.abort()


def default_corpus_dir() -> str:
    """The regression corpus: the one shipped in the package, else the source tree's."""
    shipped = os.path.join(os.path.dirname(__file__), "corpus", "regressions")
    return shipped if os.path.isdir(shipped) else _core.source_corpus_dir()


@dataclasses.dataclass
class CheckResult:
    passed: bool
    text: str    # what `varlen check` prints: the matrix, each failure, the summary
    matrix: str  # the markdown matrix
    items: List[dict]  # backend, kind ("corpus" or "property"), name, status, message, shrunk, ...

    def failures(self) -> List[dict]:
        return [i for i in self.items if i["status"] == "FAIL"]


def check(backend=None, *, tier: str = "smoke", report_dir: Optional[str] = None,
          corpus_dir: Optional[str] = None, expectations: Union[None, str, Sequence[str]] = None,
          progress: bool = True, budget_scale: float = 1.0,
          in_process: bool = False, counts_only: bool = False) -> CheckResult:
    """`varlen check` on the given backends (names, "module:attr" strings or
    backend objects; None: every available one): the corpus and the generated
    properties of `tier`, with junit.xml, matrix.md, pictures and shrunk cases
    in report_dir. `expectations`: manifests of known gaps (a path, a list, or
    comma-separated; default $VARLEN_EXPECTATIONS). `budget_scale` multiplies
    the tier's case counts and time budgets (below 1 for a slow backend, such
    as a kernel under Triton's interpreter). Each backend loaded from a
    "module:attr" runs in worker processes: a crash, a hang or a write
    outside its buffers fails the case that caused it (CRASH, TIMEOUT, OOM,
    VANISHED, WRITE_OUTSIDE, INPUT_CHANGED) and the run goes on;
    `in_process` runs it here instead. `counts_only`: case counts alone bound
    each property, not time, so that every machine checks the same cases (the
    shards of one run, GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX)."""
    names = _names(backend)
    commands = {n: c for n in names if (c := _repro_command(n)) is not None}
    if expectations is None:
        expectations = os.environ.get("VARLEN_EXPECTATIONS", "")
    if isinstance(expectations, str):
        expectations = [e for e in expectations.split(",") if e]
    r = _core.check(names, tier, report_dir or "", default_corpus_dir() if corpus_dir is None
                    else corpus_dir, [os.fspath(e) for e in expectations], progress, commands,
                    float(budget_scale), _workers(names, in_process), counts_only)
    return CheckResult(passed=r["passed"], text=r["text"], matrix=r["matrix"], items=r["items"])


@dataclasses.dataclass
class Outcome:
    case: str
    backend: str
    verdict: str  # "PASS", "FAIL", "UNSUPPORTED"
    text: str     # the full report `varlen repro` prints
    json: str     # the same as one JSON document

    @property
    def passed(self) -> bool:
        return self.verdict != "FAIL"


def repro(path: str, backend=None, *, sglang: Optional[str] = None,
          in_process: bool = False) -> List[Outcome]:
    """Replays a case file (or every case of a folder) on the backends, as
    `varlen repro` does, each backend in a worker process (see check)."""
    names = _names(backend) or [b["name"] for b in _core.backends() if not b["unavailable"]]
    return [Outcome(**o) for o in _core.repro(os.fspath(path), names, sglang or "",
                                              _workers(names, in_process))]


@dataclasses.dataclass
class Case:
    name: str
    json: str  # the case file, canonical
    q: object = None  # torch tensors (shared with the harness) when it runs forward
    k: object = None
    v: object = None


def load_case(path: str) -> Case:
    """A case file with the q, k and v every backend receives for it."""
    d = _core.load_case(os.fspath(path))
    tensors = {key: _bridge._as_torch(d[key]) for key in ("q", "k", "v") if key in d}
    return Case(name=d["name"], json=d["json"], **tensors)


def reference(case: Union[str, Case]):
    """The float64 oracle's output [T, H, Dv] of a case (a path or a Case),
    computed from its ground-truth geometry."""
    source = case.json if isinstance(case, Case) else os.fspath(case)
    return _bridge._as_torch(_core.reference(source))


def properties() -> List[str]:
    return list(_core.properties())


def run_property(property: str, backend: str, *, tier: str = "smoke",
                 failures_dir: str = "varlen-failures", in_process: bool = False) -> dict:
    """One generated property on one backend (in a worker process, see
    check): passed, summary, and on failure the shrunk case file and the line
    that replays it."""
    result = dict(_core.run_property(property, backend, tier, failures_dir,
                                     _workers([backend], in_process)))
    if result["shrunk"]:
        command = _repro_command(backend) or f"varlen repro {{file}} --backend={backend}"
        result["reproduce"] = command.replace("{file}", result["shrunk"])
    return result


def time_run(backend: str, case: Union[str, Case], repeats: int = 5) -> List[float]:
    """Seconds per run of `backend` alone on a case's ground-truth launch
    (no resolution, oracle or judgement): for benchmarks beside other backends."""
    source = case.json if isinstance(case, Case) else os.fspath(case)
    return list(_core.time_run(backend, source, repeats))


def case_files(directory: Optional[str] = None) -> List[str]:
    return list(_core.case_files(directory or default_corpus_dir()))
