"""Recording live calls as cases: the failing call itself is the best
reproducer.

    import varlen

    with varlen.record("recorded/", only_errors=True):
        model.generate(...)          # or a server's request loop

Inside the block every call that reaches an engine's vision attention is
written as a case file (docs/bug-report-to-case.md, "Recording live calls"):

* SGLang: each of vision.py's backend classes (`VisionFlash3Attention`,
  `VisionSdpaAttention`, ...), at its `forward`, as a direct call with the
  arguments the backend received;
* vLLM: `MMEncoderAttention.forward`, with the backend and FlashAttention
  version the layer chose, and the platform's device capability;
* transformers: the attention interface's functions (`ALL_ATTENTION_FUNCTIONS`
  under flash_attention_2/3/4, a hub kernel's name and sdpa), as direct
  calls with the keywords the model passed, replayed as the release's band.

A case holds the call's argument forms: shapes, strides (the fused
projection's column views), dtypes, devices, the values of the metadata
tensors and scalars, the engine, its version and the platform; a call that
raised carries the exception as its `expect`, so `varlen repro` on the file
says at once whether faithful mode reproduces it. q, k and v are drawn from a
seed, which is what reproduces how arguments are resolved; with
`save_data=True` the live values are saved beside the case instead
(NAME.q.npy, NAME.k.npy, NAME.v.npy, which the case names in its "data"), for
a bug that needs them (a NaN in one image, an output that differs).

Recording never changes what the engine does: the original `forward` runs
with the same arguments and its result or exception is passed on; a call
the case format cannot say (a q of a dtype or layout it lacks, a tensor
argument too large to spell) is listed in `skipped.txt` instead. It costs a
host read of each small tensor argument (a device sync on a GPU) and the
loading of its case (to check the case makes the live q: the same shape and
strides), and with `save_data` a copy of q, k and v to the host before the
call, so it is bounded: `limit` calls and `max_bytes` of case and data files
per process, nothing after either.

For a server, set the environment instead (every process of the server
records, each into its own file names):

    python -m varlen record recorded/ [--only-errors] [--save-data] [--limit N] -- \
        python -m sglang.launch_server ...
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import math
import os
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from varlen import spec

SGLANG_MODULE = "sglang.srt.layers.attention.vision"
VLLM_MODULE = "vllm.model_executor.layers.attention.mm_encoder_attention"
TRANSFORMERS_MODULE = "transformers.modeling_utils"

_VALUE_DTYPES = spec.DTYPES + ("int16", "int32", "int64", "bool")
# The most elements a tensor argument may have to be spelled in a case.
MAX_TENSOR_ELEMENTS = 1 << 16


class Unrepresentable(Exception):
    """A call the case format cannot say; the message says what."""


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _device_name(t) -> str:
    return "cuda" if t.device.type not in ("cpu", "meta") else "cpu"


def _float_item(x: float):
    """A float as a tensor literal holds it: non-finite values by name."""
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _spell_tensor(t) -> dict:
    """A tensor argument as the case format spells it (values read on the host)."""
    dtype = _dtype_name(t)
    if dtype not in _VALUE_DTYPES:
        raise Unrepresentable(f"a {dtype} tensor argument")
    if t.numel() > MAX_TENSOR_ELEMENTS:
        raise Unrepresentable(f"a tensor argument of {t.numel()} elements "
                              f"(at most {MAX_TENSOR_ELEMENTS} are spelled)")
    spelled: Dict[str, Any] = {}
    if not t.is_contiguous():
        # base[::step] of a contiguous base: the one strided form a case spells.
        row = math.prod(t.shape[1:])
        step = t.stride(0) // row if t.dim() and row and t.stride(0) % row == 0 else 0
        if step < 2 or not t[0].is_contiguous():
            raise Unrepresentable(f"a tensor argument of shape {list(t.shape)} and strides "
                                  f"{list(t.stride())}")
        spelled["step"] = int(step)
    values = t.detach().reshape(-1).cpu().tolist()
    if t.is_floating_point():
        values = [_float_item(float(x)) for x in values]
    spelled = {"tensor": values, "dtype": dtype, "device": _device_name(t), **spelled}
    if t.dim() != 1:
        spelled["shape"] = list(t.shape)
    return spelled


def _spell_value(x, torch):
    """Any argument value as the case format spells it."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"float": _float_item(x)}
    if isinstance(x, torch.Tensor):
        return _spell_tensor(x)
    if type(x).__name__ == "SingletonCache" and hasattr(x, "get_data"):
        data = x.get_data()
        return {"singleton_cache": None if data is None else _spell_tensor(data)}
    if isinstance(x, list):
        return [_spell_value(item, torch) for item in x]
    raise Unrepresentable(f"an argument of type {type(x).__name__}")


def _spell_kwargs(kw: dict, q, torch) -> dict:
    """The keyword arguments; an output workspace of q's shape and dtype (SGLang's
    output_ws) is spelled as what it is, torch.empty_like(q)."""
    out = {}
    for key, value in kw.items():
        if key == "output_ws" and isinstance(value, torch.Tensor) and \
                tuple(value.shape) == tuple(q.shape) and value.dtype == q.dtype:
            out[key] = {"empty_like": "q"}
        else:
            out[key] = _spell_value(value, torch)
    return out


def _spell_metadata(metadata, torch) -> dict:
    """SGLang's VisionAttentionMetadata (or a dict of its fields) as a
    hand-built one."""
    def field(name):
        return metadata.get(name) if isinstance(metadata, dict) else getattr(metadata, name, None)
    if metadata is None:
        raise Unrepresentable("forward_metadata=None")
    return {"builder": "manual", **{
        name: _spell_value(field(name), torch)
        for name in ("cu_seqlens", "seq_lens", "max_seqlen", "packed_indptrs",
                     "sequence_lengths", "flashinfer_max_seqlen") if field(name) is not None}}


def _offsets(x, torch) -> Optional[List[int]]:
    """The integer offsets a cu_seqlens-like value holds, if it holds any."""
    if type(x).__name__ == "SingletonCache" and hasattr(x, "get_data"):
        x = x.get_data()
    if isinstance(x, torch.Tensor):
        if x.dtype.is_floating_point or x.dtype == torch.bool or x.dim() != 1 or \
                x.numel() > MAX_TENSOR_ELEMENTS:
            return None
        return [int(v) for v in x.detach().cpu().tolist()]
    if isinstance(x, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in x):
        return list(x)
    return None


def _sequences(offsets: Optional[List[int]], rows: int, bsz: int, seq_len: Optional[int]
               ) -> Tuple[List[int], int, str]:
    """(seq_lens, padding rows after them, a note) for the ground truth:
    the offsets' sequences when they describe q's rows, else the uniform
    split the call's bsz and seq_len make, else one sequence of every row."""
    if offsets and offsets[0] == 0 and all(b >= a for a, b in zip(offsets, offsets[1:])) \
            and offsets[-1] <= rows:
        return [b - a for a, b in zip(offsets, offsets[1:])], rows - offsets[-1], ""
    if seq_len and bsz and bsz * seq_len == rows:
        note = "" if offsets is None else (
            " Its cu_seqlens does not describe q's rows, so the ground truth is the uniform "
            "split of bsz and seq_len.")
        return [seq_len] * bsz, 0, note
    return [rows], 0, (" Its cu_seqlens does not describe q's rows, so the ground truth is "
                       "one sequence of all of them.")


def _geometry(q, k, v, seq_lens, padding, heads, kv_heads, head_dim, head_dim_v,
              scale) -> dict:
    dtype = _dtype_name(q)
    if dtype not in spec.DTYPES:
        raise Unrepresentable(f"a {dtype} q")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise Unrepresentable(f"{name} of dtype {_dtype_name(t)} with a {dtype} q")
    g: Dict[str, Any] = {"seq_lens": seq_lens, "num_heads": heads, "num_kv_heads": kv_heads,
                         "head_dim": head_dim, "head_dim_v": head_dim_v, "dtype": dtype}
    if padding:
        g["padding"] = padding
    if isinstance(scale, (int, float)) and not isinstance(scale, bool) and math.isfinite(scale) \
            and scale > 0:
        g["softmax_scale"] = float(scale)
    return g


def _fused(q, k, v, heads: int, kv_heads: int, head_dim: int, token_dim: int = -3) -> bool:
    """q, k and v have the token stride of the column views qkv.split() makes
    of one [T, (H + 2·KV)·D] projection output (the one strided q, k and v a
    case spells)."""
    width = (heads + 2 * kv_heads) * head_dim
    return all(t.stride(token_dim) == width for t in (q, k, v))


def _check_layout(case: dict, q, core) -> None:
    """The case must load, and the q it makes must be the live q, shape and
    strides (the case format has no spelling for anything else)."""
    try:
        shape, strides = (tuple(x) for x in core.case_layout(json.dumps(case))["q"])
    except Exception as error:  # an invalid case: the loader's message says why
        raise Unrepresentable(f"the case does not load: {error}") from None
    live = tuple(q.shape), tuple(q.stride())
    if shape != live[0] or any(a != b for a, b, n in zip(strides, live[1], shape) if n > 1):
        raise Unrepresentable(f"q of shape {list(live[0])} and strides {list(live[1])} "
                              f"(the case makes {list(shape)}, {list(strides)})")


@dataclass
class _Described:
    """A live call made into a case before it runs: the case, and with
    save_data the host copies of q, k and v as the call passes them."""
    case: dict
    values: Optional[Tuple[Any, Any, Any]] = None


def _host_copy(t):
    """A tensor's values on the host in a dtype numpy has (bfloat16 widened
    to float32, exactly)."""
    import torch
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.to("cpu", copy=True).contiguous().numpy()


class Recorder:
    """Writes the calls it sees as cases into `directory`; see the module's
    documentation. `attach_sglang`, `attach_vllm` and `attach_transformers`
    hook a loaded module;
    entering the recorder hooks the engines already imported and those
    imported later, leaving restores every hooked method."""

    def __init__(self, directory, *, only_errors: bool = False, limit: int = 100,
                 max_bytes: int = 16 << 20, save_data: bool = False):
        if limit < 0 or max_bytes < 0:
            raise ValueError(f"limit={limit}, max_bytes={max_bytes}: both must be >= 0")
        self.directory = Path(directory)
        self.only_errors = only_errors
        self.save_data = save_data
        self.limit = limit
        self.max_bytes = max_bytes
        self.written: List[Path] = []
        self.skipped: List[str] = []
        self.bytes_written = 0
        self.full = False
        self._lock = threading.Lock()
        self._local = threading.local()
        self._restore: List[Callable[[], None]] = []
        self._finder: Optional[_AttachOnImport] = None
        self._core = None

    # -- hooking -----------------------------------------------------------------------

    def _recording(self, original: Callable, describe: Callable, where: str) -> Callable:
        """`original` wrapped: each call is described (its case) before it
        runs, and written once it returned or raised."""
        recorder = self

        def wrapper(*args, **kwargs):
            # A backend called from inside another hooked one is one call.
            if getattr(recorder._local, "busy", False) or recorder.full:
                return original(*args, **kwargs)
            recorder._local.busy = True
            try:
                described, skipped = None, None
                try:
                    described = describe(args[0], args[1:], kwargs)
                except Unrepresentable as why:
                    skipped = f"{where}: {why}"
                except Exception as error:  # never let recording break the engine
                    skipped = f"{where}: recording failed: {error!r}"
                try:
                    result = original(*args, **kwargs)
                except Exception as error:
                    recorder._finish(described, (type(error).__name__, str(error)), skipped)
                    raise
                recorder._finish(described, None, skipped)
                return result
            finally:
                recorder._local.busy = False

        wrapper.__wrapped__ = original
        return wrapper

    def _hook_forward(self, cls, describe: Callable) -> None:
        had = "forward" in cls.__dict__
        original = cls.forward
        cls.forward = self._recording(original, describe, f"{cls.__name__}.forward")
        self._restore.append(lambda: setattr(cls, "forward", original) if had
                             else delattr(cls, "forward"))

    def attach_sglang(self, vision, version: Optional[str] = None,
                      graph_mode: Optional[Callable[[], bool]] = None,
                      platform: Optional[str] = None) -> None:
        """Hooks vision.py's backend classes in module `vision`. `version`:
        SGLang's (default: the installed package's); `graph_mode`: whether
        SGLANG_VIT_ENABLE_CUDA_GRAPH is on (default: the environment)."""
        version = version or _package_version("sglang")
        graph_mode = graph_mode or (lambda: os.environ.get(
            "SGLANG_VIT_ENABLE_CUDA_GRAPH", "").lower() in ("1", "true", "yes"))
        for profile, class_name in spec.SGLANG_BACKEND_CLASSES.items():
            cls = getattr(vision, class_name, None)
            if cls is not None:
                self._hook_forward(cls, _SglangCall(profile, version, graph_mode, platform, self))

    def attach_vllm(self, layer_module, version: Optional[str] = None,
                    platform: Optional[str] = None) -> None:
        """Hooks MMEncoderAttention in module `layer_module`. `version`:
        vLLM's (default: the installed package's); `platform`: the case's
        platform (default: the GPU's device capability when q is on CUDA)."""
        version = version or _package_version("vllm")
        self._hook_forward(layer_module.MMEncoderAttention, _VllmCall(version, platform, self))

    def attach_transformers(self, functions=None, version: Optional[str] = None,
                            platform: Optional[str] = None) -> None:
        """Hooks the attention interface's functions (transformers'
        ALL_ATTENTION_FUNCTIONS, or `functions`, an AttentionInterface or a
        dict) under every modelled implementation name but eager (a model's
        own function, not the interface's). `version`: transformers' (default:
        the installed package's), replayed as its band."""
        if functions is None:
            functions = sys.modules[TRANSFORMERS_MODULE].ALL_ATTENTION_FUNCTIONS
        mapping = getattr(functions, "_global_mapping", functions)
        version = version or getattr(sys.modules.get("transformers"), "__version__", None)
        profiles = [p for p in self.core().engine_profiles()["transformers"] if p != "eager"]
        for profile in profiles:
            original = mapping.get(profile)
            if original is None:
                continue
            mapping[profile] = self._recording(
                original, _TransformersCall(profile, version, platform, original, self),
                f"the {profile} attention function")
            self._restore.append(lambda profile=profile, original=original:
                                 mapping.__setitem__(profile, original))

    # -- writing -----------------------------------------------------------------------

    def case(self, engine: str, version: Tuple[Dict[str, str], str], platform: Optional[str],
             source: str, description: str, geometry: dict, call: dict, qkv,
             host_qkv: bool = False) -> _Described:
        """A recorded call's case; Unrepresentable unless it loads and makes
        the live q. `version`: the case's version field and a note on it;
        `qkv`: q, k and v as the case passes them; `host_qkv`: the profile's
        q lives on the host anyway."""
        q = qkv[0]
        fields, note = version
        case = {"name": "recorded", "source": f"recorded by varlen.record: {source}",
                "description": description + note, "engine": engine, **fields,
                **({"platform": platform} if platform else {}), "mode": "faithful",
                "geometry": geometry, "data": {"seed": len(self.written) + 1}, "call": call}
        if _device_name(q) == "cpu" and not host_qkv:
            call["qkv_device"] = "cpu"
        _check_layout(case, q, self.core())
        if not self.save_data:
            return _Described(case)
        if self.only_errors:  # copied only if the call raises: see _finish
            return _Described(case, qkv)
        return _Described(case, tuple(_host_copy(t) for t in qkv))

    def core(self):
        if self._core is None:
            from varlen import _core
            self._core = _core
        return self._core

    def _finish(self, described: Optional[_Described], raised, skipped: Optional[str]) -> None:
        with self._lock:
            if skipped is not None:
                self.skipped.append(skipped)
                self._append_skipped(skipped)
                return
            if described is None or (self.only_errors and raised is None) or self.full:
                return
            case = described.case
            if len(self.written) >= self.limit:
                self._stop(f"the limit of {self.limit} calls")
                return
            if raised is not None:
                case["description"] += f" It raised {raised[0]}."
                case["expect"] = {"outcome": "error", "error": raised[0], "message": raised[1]}
            else:
                case["description"] += " It returned."
            index = len(self.written) + 1
            case["name"] = f"recorded-{case['engine']}-" \
                           f"{case['call']['profile'].replace('/', '-')}-{os.getpid()}-{index:04d}"
            arrays = {}
            if described.values is not None:
                # With only_errors the values are copied now, after the call
                # raised: attention backends do not write their inputs.
                arrays = {name: t if hasattr(t, "tofile") else _host_copy(t)
                          for name, t in zip("qkv", described.values)}
                case["data"] = {"files": {name: f"{case['name']}.{name}.npy" for name in arrays}}
                case["description"] += " Its q, k and v are the live call's values."
            text = _dumps(case) + "\n"
            size = len(text) + sum(a.nbytes + 128 for a in arrays.values())
            if self.bytes_written + size > self.max_bytes:
                self._stop(f"the limit of {self.max_bytes} bytes")
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            if arrays:
                import numpy
                for name, array in arrays.items():
                    numpy.save(self.directory / case["data"]["files"][name], array)
            path = self.directory / f"{case['name']}.json"
            path.write_text(text)
            self.bytes_written += size
            self.written.append(path)

    def _append_skipped(self, line: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "skipped.txt", "a") as f:
            f.write(f"[{os.getpid()}] {line}\n")

    def _stop(self, why: str) -> None:
        self.full = True
        self._append_skipped(f"recording stopped at {why}")
        warnings.warn(f"varlen.record: stopped at {why} ({len(self.written)} cases in "
                      f"{self.directory})", stacklevel=3)

    # -- the context manager -------------------------------------------------------------

    def __enter__(self) -> "Recorder":
        self._attach_imported()
        self._finder = _AttachOnImport(self)
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder = None
        while self._restore:
            self._restore.pop()()

    def _attach_imported(self) -> None:
        if SGLANG_MODULE in sys.modules:
            self.attach_sglang(sys.modules[SGLANG_MODULE])
        if VLLM_MODULE in sys.modules:
            self.attach_vllm(sys.modules[VLLM_MODULE])
        if TRANSFORMERS_MODULE in sys.modules:
            self.attach_transformers(sys.modules[TRANSFORMERS_MODULE].ALL_ATTENTION_FUNCTIONS)


def _dumps(x, indent: str = "") -> str:
    """JSON as the corpus writes it: objects one key per line, a list of
    scalars on one line (a tensor's values)."""
    inner = indent + "  "
    if isinstance(x, dict) and x:
        items = ",\n".join(f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in x.items())
        return "{\n" + items + "\n" + indent + "}"
    if isinstance(x, list) and any(isinstance(item, (dict, list)) for item in x):
        items = ",\n".join(inner + _dumps(item, inner) for item in x)
        return "[\n" + items + "\n" + indent + "]"
    return json.dumps(x)


def _package_version(package: str) -> Optional[str]:
    try:
        from importlib import metadata
        return metadata.version(package)
    except Exception:
        return None


def _cuda_platform(q, torch) -> Optional[str]:
    if q.device.type != "cuda" or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(q.device)
    return f"cuda:{major}.{minor}"


def _version_field(core, engine: str, version: Optional[str]) -> Tuple[Dict[str, str], str]:
    """The case's version field, where `version` is modelled, and a note."""
    modelled = core.engine_versions().get(engine, [])
    release = (version or "").split("+")[0]  # a local build's "0.33.0+cu130"
    if release in modelled:
        return {engine: release}, ""
    return {}, (f" It was recorded from {engine} {version or '(version unknown)'}, which is not "
                f"a modelled version: faithful mode replays it as the latest.")


class _SglangCall:
    """The case of a call to one of SGLang's backend classes."""

    def __init__(self, profile, version, graph_mode, platform, recorder):
        self.profile, self.version, self.graph_mode = profile, version, graph_mode
        self.platform, self.recorder = platform, recorder
        self.parameters = {}

    def __call__(self, backend, args, kwargs) -> dict:
        import inspect
        import torch
        cls = type(backend)
        if cls not in self.parameters:
            self.parameters[cls] = inspect.signature(cls.forward.__wrapped__)
        bound = self.parameters[cls].bind(backend, *args, **kwargs)
        named = dict(bound.arguments)
        named.pop("self", None)
        extra = named.pop("kwargs", {})
        q, k, v = named.pop("q"), named.pop("k"), named.pop("v")
        call: Dict[str, Any] = {"profile": self.profile}
        bsz = named.pop("bsz", None)
        seq_len = named.pop("seq_len", extra.pop("seq_len", None))
        if not isinstance(bsz, int) or isinstance(bsz, bool) or \
                not isinstance(seq_len, (int, type(None))):
            raise Unrepresentable(f"bsz={bsz!r}, seq_len={seq_len!r} (the case format takes ints)")
        kw = {**named, **extra}
        cu = kw.pop("cu_seqlens", None)
        metadata = kw.pop("forward_metadata", None)
        if q.dim() == 3:
            rows, heads, head_dim = q.shape
            kv_heads, head_dim_v = k.shape[-2], v.shape[-1]
            fused = _fused(q, k, v, heads, kv_heads, head_dim) if head_dim == head_dim_v else False
            call["layout"] = "fused_qkv" if fused else "packed"
        elif q.dim() == 4:
            rows, heads, head_dim = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
            kv_heads, head_dim_v = k.shape[-2], v.shape[-1]
            call["layout"] = "batched"
        else:
            raise Unrepresentable(f"a {q.dim()}-d q")
        offsets = _offsets(cu, torch)
        if offsets is None and metadata is not None:
            offsets = _offsets(getattr(metadata, "cu_seqlens", None), torch)
        seq_lens, padding, note = _sequences(offsets, rows, bsz, seq_len)
        scale = kw.get("softmax_scale")
        if self.profile == "sdpa":
            call["sdpa"] = {"flatten_batch": bool(getattr(backend, "flatten_batch", False)),
                            "softmax_in_single_precision": bool(
                                getattr(backend, "softmax_in_single_precision", False))}
            scale = getattr(backend, "scale", None)
            head = getattr(backend, "head_size", head_dim)
            if isinstance(scale, float) and scale != 1.0 / math.sqrt(head):
                call["sdpa"]["softmax_scale"] = scale  # constructed with one
        call.update({"bsz": bsz, "graph_mode": bool(self.graph_mode())})
        if seq_len is not None:
            call["seq_len"] = seq_len
        if cu is not None:
            call["cu_seqlens"] = _spell_value(cu, torch)
        if metadata is not None:
            call["forward_metadata"] = _spell_metadata(metadata, torch)
        call["kwargs"] = _spell_kwargs(kw, q, torch)
        where = f"{type(backend).__name__}.forward"
        return self.recorder.case(
            "sglang", _version_field(self.recorder.core(), "sglang", self.version), self.platform,
            f"SGLang {self.version or '(version unknown)'}, {where}",
            f"A live call to {where}.{note}",
            _geometry(q, k, v, seq_lens, padding, heads, kv_heads, head_dim, head_dim_v, scale),
            call, (q, k, v), host_qkv=self.profile == "amx_attn")


class _VllmCall:
    """The case of a call to vLLM's MMEncoderAttention."""

    def __init__(self, version, platform, recorder):
        self.version, self.platform, self.recorder = version, platform, recorder

    def __call__(self, layer, args, kwargs) -> dict:
        import torch
        names = ("query", "key", "value")
        args = list(args)
        q, k, v = (args.pop(0) if args else kwargs.pop(name) for name in names)
        kw = dict(kwargs)
        for name in ("cu_seqlens", "max_seqlen", "sequence_lengths"):
            if args:
                kw[name] = args.pop(0)
        if args:
            raise Unrepresentable(f"{len(args) + 6} positional arguments")
        backend = getattr(layer, "attn_backend", None)
        profile = getattr(backend, "name", str(backend))
        if profile == "FLASH_ATTN":
            version = getattr(layer, "_fa_version", None)
            if version not in (2, 3):
                raise Unrepresentable(f"FLASH_ATTN through FlashAttention {version}")
            profile = f"FLASH_ATTN/fa{version}"
        if profile not in ("FLASH_ATTN/fa2", "FLASH_ATTN/fa3", "TRITON_ATTN", "TORCH_SDPA",
                           "FLASHINFER"):
            raise Unrepresentable(f"the backend {profile}")
        heads, head_size = int(layer.num_heads), int(layer.head_size)
        kv_heads = int(getattr(layer, "num_kv_heads", heads))
        call: Dict[str, Any] = {"profile": profile}
        if q.dim() == 4:
            bsz, seq_len = q.shape[0], q.shape[1]
            head_dim_v = v.shape[-1]
        elif q.dim() == 3 and q.shape[-2:] == (heads, head_size):
            bsz, seq_len, head_dim_v = 1, q.shape[0], v.shape[-1]
            fused = head_dim_v == head_size and _fused(q, k, v, heads, kv_heads, head_size, 0)
            call["layout"] = "fused_qkv" if fused else "packed"
        elif q.dim() == 3:
            bsz, seq_len = q.shape[0], q.shape[1]
            head_dim_v = v.shape[-1] // kv_heads if kv_heads else head_size
            call["merged_heads"] = True
        else:
            raise Unrepresentable(f"a {q.dim()}-d query")
        if "layout" not in call:
            fused = head_dim_v == head_size and _fused(q, k, v, heads, kv_heads, head_size, 1)
            call["layout"] = "batched_fused_qkv" if fused else "batched"
            call["bsz"], call["seq_len"] = int(bsz), int(seq_len)
        rows = int(bsz) * int(seq_len)
        cu = kw.pop("cu_seqlens", None)
        seq_lens, padding, note = _sequences(_offsets(cu, torch), rows, int(bsz), int(seq_len))
        if "forward_metadata" in kw:  # SGLang's keyword, which the layer does not take
            call["forward_metadata"] = _spell_metadata(kw.pop("forward_metadata"), torch)
        if cu is not None:
            call["cu_seqlens"] = _spell_value(cu, torch)
        call["kwargs"] = _spell_kwargs(kw, q, torch)
        platform = self.platform or _cuda_platform(q, torch)
        return self.recorder.case(
            "vllm", _version_field(self.recorder.core(), "vllm", self.version), platform,
            f"vLLM {self.version or '(version unknown)'}, MMEncoderAttention.forward ({profile})",
            f"A live call to MMEncoderAttention.forward.{note}",
            _geometry(q, k, v, seq_lens, padding, heads, kv_heads, head_size, head_dim_v,
                      getattr(layer, "scale", None)),
            call, (q, k, v))


def _transformers_band(version: Optional[str]) -> Tuple[Dict[str, str], str]:
    """The band a transformers release is replayed as (spec.transformers_band)."""
    try:
        band = spec.transformers_band(version or "")
    except ValueError as why:
        return {}, f" {why}: faithful mode replays it as the latest band."
    note = "" if band == version else \
        f" It was recorded from transformers {version}, replayed as the band {band}."
    return {"transformers": band}, note


class _TransformersCall:
    """The case of a call to one of transformers' attention interface
    functions (the direct entry: every argument a keyword)."""

    def __init__(self, profile, version, platform, original, recorder):
        import inspect
        self.profile, self.version, self.platform = profile, version, platform
        self.recorder = recorder
        self.signature = inspect.signature(original)

    def __call__(self, module, args, kwargs) -> dict:
        import torch
        # Partial: a missing argument is the live call's TypeError, and the
        # case's (its kwargs lack it too).
        bound = self.signature.bind_partial(module, *args, **kwargs)
        named = dict(bound.arguments)
        extra = named.pop("kwargs", {})
        names = list(self.signature.parameters)
        query, key, value = (named.pop(n) for n in names[1:4])
        named.pop(names[0])
        kw = {**named, **extra}
        if query.dim() != 4 or query.shape[0] != 1:
            raise Unrepresentable(f"a query of shape {list(query.shape)} (a case's is "
                                  f"[1, heads, tokens, head_dim])")
        q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))
        rows, heads, head_dim = q.shape
        offsets = _offsets(kw.get("cu_seq_lens_q"), torch)
        seq_lens, padding, note = _sequences(offsets, rows, 1, rows)
        fused = v.shape[-1] == head_dim and _fused(q, k, v, heads, k.shape[1], head_dim, 0)
        call = {"profile": self.profile, "entry": "direct",
                "layout": "fused_qkv" if fused else "packed",
                "kwargs": _spell_kwargs(kw, q, torch)}
        return self.recorder.case(
            "transformers", _transformers_band(self.version), self.platform,
            f"transformers {self.version or '(version unknown)'}, the {self.profile} attention "
            "function", f"A live call to the {self.profile} attention function.{note}",
            _geometry(q, k, v, seq_lens, padding, heads, k.shape[1], head_dim, v.shape[-1],
                      kw.get("scaling")),
            call, (q, k, v))


class _AttachOnImport(importlib.abc.MetaPathFinder):
    """Hooks an engine's module as soon as it is imported."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def find_spec(self, name, path=None, target=None):
        if name not in (SGLANG_MODULE, VLLM_MODULE, TRANSFORMERS_MODULE):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _AttachingLoader(spec.loader, self.recorder)
                return spec
        return None


class _AttachingLoader(importlib.abc.Loader):
    def __init__(self, loader, recorder: Recorder):
        self.loader, self.recorder = loader, recorder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        if module.__name__ == SGLANG_MODULE:
            self.recorder.attach_sglang(module)
        elif module.__name__ == VLLM_MODULE:
            self.recorder.attach_vllm(module)
        else:
            self.recorder.attach_transformers(module.ALL_ATTENTION_FUNCTIONS)


def record(directory, *, only_errors: bool = False, limit: int = 100,
           max_bytes: int = 16 << 20, save_data: bool = False) -> Recorder:
    """A Recorder: `with varlen.record("dir"): ...` writes each call an
    engine's vision attention sees inside the block as a case in "dir"
    (only those that raise with `only_errors`; with `save_data`, q, k and v
    as .npy files beside it), at most `limit` calls and `max_bytes` of files."""
    return Recorder(directory, only_errors=only_errors, limit=limit, max_bytes=max_bytes,
                    save_data=save_data)


# --- a server: the environment ------------------------------------------------------------

ENVIRONMENT = "VARLEN_RECORD"  # "DIR[;only_errors][;save_data][;limit=N][;max_bytes=N]"


def _from_environment() -> Optional[Recorder]:
    spec = os.environ.get(ENVIRONMENT)
    if not spec:
        return None
    directory, *options = spec.split(";")
    settings: Dict[str, Any] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key in ("only_errors", "save_data") and not value:
            settings[key] = True
        elif key in ("limit", "max_bytes"):
            settings[key] = int(value)
        else:
            raise ValueError(f"{ENVIRONMENT}: unknown option {option!r} "
                             f"(only_errors, save_data, limit=N, max_bytes=N)")
    recorder = Recorder(directory, **settings)
    recorder.__enter__()
    import atexit
    atexit.register(recorder.close)
    return recorder


_SITECUSTOMIZE = """\
# Written by `python -m varlen record`: starts recording in every Python process, then
# runs the sitecustomize this one shadows, if there is one.
import importlib.machinery, importlib.util, os, sys
import varlen.recording
varlen.recording._from_environment()
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
"""


def main(argv) -> int:
    """`python -m varlen record DIR [options] -- COMMAND...`."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog="python -m varlen record",
        usage="python -m varlen record DIR [--only-errors] [--save-data] [--limit N] "
              "[--max-bytes N] -- COMMAND [ARGS...]",
        description="Runs COMMAND with every Python process it starts writing the calls its "
                    "engines' vision attention sees as varlen cases in DIR.")
    parser.add_argument("directory")
    parser.add_argument("--only-errors", action="store_true", help="only calls that raise")
    parser.add_argument("--save-data", action="store_true",
                        help="save q, k and v beside each case (.npy files)")
    parser.add_argument("--limit", type=int, default=100, help="cases per process (100)")
    parser.add_argument("--max-bytes", type=int, default=16 << 20,
                        help="bytes of case and data files per process (16 MiB)")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        parser.error("no command to run (put it after --)")
    if args.limit < 0 or args.max_bytes < 0:
        parser.error(f"--limit={args.limit}, --max-bytes={args.max_bytes}: both must be >= 0")
    site = tempfile.mkdtemp(prefix="varlen-record-")
    Path(site, "sitecustomize.py").write_text(_SITECUSTOMIZE)
    options = [str(Path(args.directory).resolve())]
    if args.only_errors:
        options.append("only_errors")
    if args.save_data:
        options.append("save_data")
    options += [f"limit={args.limit}", f"max_bytes={args.max_bytes}"]
    env = dict(os.environ)
    env[ENVIRONMENT] = ";".join(options)
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(
        [site, package_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        os.execvpe(command[0], command, env)
    except OSError as error:
        print(f"varlen record: cannot run {command[0]}: {error}", file=sys.stderr)
        return 2
    return 0  # not reached


