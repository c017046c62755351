"""SGLang as an engine module: its nine vision backend classes, read from a
release's wheel and run on the CPU, as the judge of faithful mode.

    python -m varlen.engines.differential --engine=sglang [--sglang=VERSION[,VERSION...]]
        [--calls=N] [--backends=NAME,...] [--seed=S] [--save=DIR] [--json=FILE]

For each generated call (the property generators' calls: every form of
cu_seqlens, max_seqlen, metadata, keyword, entry and graph mode) and each of
SGLang's nine vision backends, the same call is made twice:

* faithful mode predicts it (the C++ contract, varlen._core.faithful_call):
  the exception and its message, or the kernel's arguments; and the host
  syncs and host-to-device copies of the call;
* SGLang's real backend class runs it, from the wheel of that version, on the
  CPU with real torch. sdpa runs torch for real. The kernels' doors are
  strict: fa3's is FA3's fwd op (registered with FA3's schema, so the
  dispatcher's type gate is torch's own) whose kernel is FA3's mha_fwd entry
  checks (kernel_entry.FlashEntry); fa4's is FA4's CuTe interface up to its
  compile (fa4_entry, on sm100); triton_attn runs the wheel's own
  context_attention_fwd up to Triton's launcher (kernel_entry.TritonJit).
  Every check is written from the kernels' sources, independently of the
  C++ model. aiter's door is aiter's own (aiter_entry, on gfx942) and the
  AMX kernel's sgl-kernel's CPU op (amx_entry; q, k and v on the CPU, where
  amx_attn runs). The XPU kernel, whose entry is not read, is a capture
  shim: faithful mode predicts its launch only for the forms its engine's
  own path makes and reports anything else as not modelled. FlashInfer's
  cuDNN prefill is a capture shim, and the NPU's
  fused kernel one with its queryT check; torch.arange on q's device runs
  torch_npu's bound check (op-plugin's wording). Tensors that stand for device
  tensors are host tensors of a subclass, and a torch function mode counts
  every host read of one (.item(), .tolist(), bool(), int(), .cpu(),
  .to("cpu")) as a host sync, every move of a host tensor to the device as a
  host-to-device copy, and reports q.device as "cuda".

The two are compared on the outcome (exception type and message), every
kernel argument, and the counts. A version name is one of the modelled
versions (0.5.23; 0026249, read from the 0.5.18 wheel, whose vision.py
matches the commit on every backend but VisionIntelXPUAttention: the commit
reads forward_metadata and the max_seqlen keyword there, 0.5.18 does not), or
any other SGLang release: its wheel is downloaded (pip download --no-deps) and
compared with the latest modelled version, and the differences are printed
grouped by rule, which is what changed in the contract.

What it does not cover: the attention layer (VisionAttention) is the C++
model's (the calls are the backend's own, as the layer hands them over), the
metadata builders are the C++ model's, the kernels' numerics are not run
(the corpus and the pytest tier run SGLang's sdpa and Triton kernel for
real), what a kernel's compile decides (Triton's and the CuTe DSL's
argument conversion) is not modelled, and a CPU tensor is never a real
device tensor, so torch's own device-mismatch errors do not occur.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import contextvars
import functools
import math
import sys
import types
from typing import Any, List, Optional, Tuple

from varlen import aiter_entry, amx_entry, fa4_entry, kernel_entry, spec
from varlen.engines import compare, device
from varlen.engines import source as engine_source
from varlen.engines.compare import Difference, Judge
from varlen.engines.device import Observation, output_like, record, torch_module

NAME = "sglang"
TITLE = "SGLang"

VISION_FILE = "sglang/srt/layers/attention/vision.py"
BACKEND_CLASSES = spec.SGLANG_BACKEND_CLASSES
VISION_MODULE = "sglang.srt.layers.attention.vision"
ROOTS = tuple(BACKEND_CLASSES.values()) + ("VisionAttentionMetadata", "SingletonCache")
REAL_MODULES = ("__future__", "dataclasses", "functools", "math", "warnings", "typing",
                "torch", "torch.nn", "torch.nn.functional", "einops")


class Release:
    """An SGLang release on PyPI, pinned where it is known."""

    def __init__(self, wheel_version: str, wheel_sha256: Optional[str] = None,
                 vision_sha256: Optional[str] = None, models: Optional[str] = None, note: str = ""):
        self.wheel_version = wheel_version
        self.wheel_sha256 = wheel_sha256
        self.vision_sha256 = vision_sha256
        self.models = models  # the faithful-mode version it is judged against
        self.note = note

    @property
    def wheel_name(self) -> str:
        return f"sglang-{self.wheel_version}-cp311-cp311-manylinux_2_34_x86_64.whl"


# The versions faithful mode models, and the wheels that hold their code.
RELEASES = {
    "0.5.23": Release("0.5.23",
                      "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
                      "cf52c360c4ad29d2214cd389d676df0329f4ab38071c6416e1de6a6a70b0d1a0",
                      models="0.5.23"),
    "0026249": Release("0.5.18",
                       "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf",
                       "795bada73958dc378d166407e10042e4653b6bcfad0bdef162fc0d94159fc652",
                       models="0026249",
                       note="0.5.18's vision.py, which matches commit 0026249 on every backend "
                            "but VisionIntelXPUAttention (the commit reads forward_metadata and "
                            "the max_seqlen keyword there)"),
    "0.5.18": Release("0.5.18",
                      "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf",
                      "795bada73958dc378d166407e10042e4653b6bcfad0bdef162fc0d94159fc652"),
    "0.5.21": Release("0.5.21",
                      "96c029f75dec99baa33a5db3d41b1bebefdd6bcfba3a2f7c807fe1cf49a87c20",
                      "02448653065b9edfe1062e6dcae9f12bab57b4abf615180f305ed166ac477aec"),
}
LATEST_MODELLED = "0.5.23"
# What the differential runs unless told: both modelled versions, 1,200 calls
# per backend.
DEFAULT_VERSIONS = ("0.5.23", "0026249")
DEFAULT_CALLS = 1200
PROFILES = tuple(BACKEND_CLASSES)
# Backends whose kernel is torch's, run for real: judged on their outcome,
# not on a kernel prediction.
RUN_FOR_REAL = ("sdpa",)


def _passes_metadata_or_max(d: dict, predicted: dict) -> bool:
    return d["forward_metadata"] is not None or d["kwargs"].get("max_seqlen") is not None


# Differences that are known and why: (version, backend, which calls, reason).
EXPLAINED = [
    ("0026249", "xpu_attn", _passes_metadata_or_max,
     "0.5.18's VisionIntelXPUAttention ignores forward_metadata and the max_seqlen keyword "
     "(resolve_max_seqlen); commit 0026249's reads both (resolve_precomputed_max_seqlen)"),
]


def fetch_wheel(release: Release) -> str:
    """The release's wheel in wheels_dir(), downloaded when missing, checked by hash."""
    return str(engine_source.fetch_wheel("sglang", release.wheel_version,
                                         "manylinux_2_34_x86_64", engine_source.wheels_dir(),
                                         release.wheel_name, release.wheel_sha256,
                                         "sglang-differential"))


# --- the kernels, as shims --------------------------------------------------------------


# SGLang's fa3 on sm90 (sglang/kernels/ops/attention/flash_attention_v3.py)
# calls flash_attn_varlen_func of the FA3 build it loads (the hub's
# sgl-flash-attn3, else sgl-kernel's), whose op is FA3's fwd and whose C++
# entry is hopper/flash_api.cpp mha_fwd (kernel_entry.FlashEntry.fa3_fwd).
# The builds' Python wrappers and op namespaces differ: where that decides the
# outcome, the shim raises NotModelled.
SGLANG_FA3_NAMESPACE = "_varlen_sglang_fa3"
_ENGINE: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_engine")


@functools.lru_cache(maxsize=None)
def _fa3_op():
    """FA3's fwd op with the schema of Dao-AILab's hopper build, defined once
    per process; its kernel runs the entry checks under the calling engine's
    device mode."""
    torch = torch_module()
    entry = kernel_entry.FlashEntry(lambda t: _ENGINE.get().device.is_device(t))

    def kernel(*args):
        with _ENGINE.get().device.Mode():
            return entry.fa3_fwd(*args)

    library = torch.library.Library(SGLANG_FA3_NAMESPACE, "DEF")
    library.define(kernel_entry.FA3_FWD_SCHEMA)
    library.impl("fwd", kernel, "CPU")
    return library, getattr(torch.ops, SGLANG_FA3_NAMESPACE).fwd.default


def _fa3_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                causal, window_size, sinks):
    torch = torch_module()
    NotModelled = kernel_entry.NotModelled
    if not isinstance(cu_seqlens_q, torch.Tensor):
        raise NotModelled("a cu_seqlens_q that is not a tensor meets the build's wrapper")
    if any(t.dim() == 0 or t.stride(-1) != 1 for t in (q, k, v)) or \
            not cu_seqlens_q.is_contiguous():
        raise NotModelled("whether the build's wrapper makes q, k, v and cu_seqlens contiguous")
    if isinstance(max_seqlen_q, torch.Tensor):
        raise NotModelled("the dispatcher's int conversion of a tensor max_seqlen_q")
    if softmax_scale is None:  # every build's wrapper
        softmax_scale = q.shape[-1] ** -0.5
    _, fwd = _fa3_op()
    try:
        out = fwd(q, k, v, None, None, None, None, cu_seqlens_q, cu_seqlens_k, None, None, None,
                  max_seqlen_q, max_seqlen_k, *([None] * 9), softmax_scale, causal,
                  window_size[0], window_size[1], 0.0, False, None, 1, None, 0, sinks, 1, 0, None)
    except RuntimeError as e:
        if "Expected a value of type" in str(e):  # its text quotes the build's op and schema
            raise NotModelled(f"the FA3 op's type gate: {str(e).splitlines()[0]}") from None
        raise
    return out[0]


def flash_attn_func(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                    softmax_scale=None, window_size=(-1, -1), sinks=None, ver=3, causal=False):
    record("flash_attn_varlen_func_fa4" if ver == 4 else "flash_attn_varlen_func", q=q, k=k, v=v,
            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
            max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale, causal=causal,
            window_size=window_size, sinks=sinks)
    if ver == 3:
        return _fa3_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale, causal, window_size, sinks)
    # FA4 on sm100, the platform SGLang picks it for.
    fa4_entry.fa4_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               softmax_scale, _ENGINE.get().device.is_device, arch=100)
    return output_like(q, v)


def flash_attn_varlen_func(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale=None, causal=False, window_size=(-1, -1), sinks=None):
    # amx_attn's kernel is sgl-kernel's CPU op (amx_entry); xpu_attn's entry
    # is not read: the C++ model predicts a launch only for the forms its
    # engine's path makes.
    record("flash_attn_varlen_func", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, causal=causal, window_size=window_size, sinks=sinks)
    engine = _ENGINE.get()
    if engine.profile == "amx_attn":
        amx_entry.amx_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, engine.device.is_device)
    return output_like(q, v)


PREFILL_FILE = "sglang/kernels/ops/attention/prefill_attention.py"
PREFILL_SHA256 = "eb158c4c03e69091eb95a1bce093c9b054ac1ca5aab12769063d2e84630ca7f3"


def load_prefill_attention(wheel: str, is_device) -> types.ModuleType:
    """The wheel's prefill_attention.py with Triton's launcher for `triton.jit`
    (kernel_entry.TritonJit): context_attention_fwd runs unchanged up to the
    launch, with an H100's tiles (CUDA_CAPABILITY (9, 0): BLOCK 128)."""
    import triton
    source = engine_source.read_member(wheel, PREFILL_FILE, PREFILL_SHA256,
                                        "the SGLang Triton kernel")
    utils = types.SimpleNamespace(is_cuda=lambda: False, is_hip=lambda: False)
    launcher = types.SimpleNamespace(jit=lambda fn: kernel_entry.TritonJit(fn, is_device),
                                     cdiv=triton.cdiv, next_power_of_2=triton.next_power_of_2,
                                     language=triton.language)

    def stubbed_import(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "sglang.srt.utils":
            return utils
        if name == "triton" or name.startswith("triton."):
            return launcher  # `import triton.language as tl` reads launcher.language
        return builtins.__import__(name, globals, locals, fromlist, level)

    module = types.ModuleType("varlen_sglang_prefill_attention")
    module.__builtins__ = dict(vars(builtins), __import__=stubbed_import)
    filename = f"{wheel}/{PREFILL_FILE}"
    engine_source.compile_into(module, source, ast.parse(source, filename), filename)
    module._is_cuda = True
    module.CUDA_CAPABILITY = (9, 0)
    return module


def context_attention_fwd(q, k, v, o, b_start_loc, b_seq_len, max_input_len, is_causal=True,
                          sm_scale=None):
    record("context_attention_fwd", q=q, k=k, v=v, o=o, cu_seqlens=b_start_loc,
            seq_lens=b_seq_len, max_seqlen=max_input_len, scale=sm_scale, causal=is_causal)
    _ENGINE.get().prefill.context_attention_fwd(q, k, v, o, b_start_loc, b_seq_len, max_input_len,
                                                is_causal=is_causal, sm_scale=sm_scale)


def cudnn_batch_prefill_with_kv_cache(q, k, v, scale, workspace_buffer, *, max_token_per_sequence,
                                      max_sequence_kv, actual_seq_lens_q, actual_seq_lens_kv,
                                      causal, return_lse, batch_offsets_q, batch_offsets_k,
                                      batch_offsets_v, batch_offsets_o,
                                      is_cuda_graph_compatible=False, **rest):
    record("cudnn_batch_prefill_with_kv_cache", q=q, scale=scale,
            max_token_per_sequence=max_token_per_sequence, max_sequence_kv=max_sequence_kv,
            actual_seq_lens_q=actual_seq_lens_q, actual_seq_lens_kv=actual_seq_lens_kv,
            causal=causal, batch_offsets_q=batch_offsets_q, batch_offsets_k=batch_offsets_k,
            batch_offsets_v=batch_offsets_v, batch_offsets_o=batch_offsets_o)
    return output_like(q, v), None


def npu_fused_infer_attention_score(*, query, key, value, actual_seq_lengths, actual_seq_lengths_kv,
                                    scale, num_heads, num_key_value_heads, sparse_mode,
                                    input_layout):
    record("npu_fused_infer_attention_score", q=query, actual_seq_lengths=actual_seq_lengths,
            actual_seq_lengths_kv=actual_seq_lengths_kv, scale=scale, num_heads=num_heads,
            num_key_value_heads=num_key_value_heads, input_layout=input_layout)
    # The kernel's own check, which SGLang's padding removal works around.
    last = actual_seq_lengths[-1]
    if query.shape[0] != last:
        # The op's int list holds a bool as the int it is.
        shown = int(last) if isinstance(last, bool) else last
        raise RuntimeError(f"queryT({query.shape[0]}) must be equal to the last element of "
                           f"actualSequenceLengthQ({shown})")
    return (output_like(query, value),)


# --- SGLang's code ---------------------------------------------------------------------


_GRAPH_MODE: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_graph",
                                                             default=False)


class _GraphModeSwitch:
    def get(self) -> bool:
        return _GRAPH_MODE.get()


def load_vision(wheel: str, release: Release) -> types.ModuleType:
    """vision.py's nine backend classes from `wheel`, on a platform where every
    one constructs, with the shims above as their kernels."""
    source = engine_source.read_member(wheel, VISION_FILE, release.vision_sha256,
                                        f"the SGLang {release.wheel_version} code")
    true = lambda: True  # noqa: E731 - every platform check passes
    stubs = {
        "envs": types.SimpleNamespace(SGLANG_VIT_ENABLE_CUDA_GRAPH=_GraphModeSwitch()),
        "is_cpu": true, "is_cuda": true, "is_hip": true, "is_musa": lambda: False,
        "is_npu": true, "is_xpu": true, "cpu_has_amx_support": true,
        "get_parallel": lambda: types.SimpleNamespace(attn_tp_size=1, attn_tp_rank=0),
        "flash_attn_func": flash_attn_func,
        "flash_attn_varlen_func": flash_attn_varlen_func,
        "context_attention_fwd": context_attention_fwd,
        "cudnn_batch_prefill_with_kv_cache": cudnn_batch_prefill_with_kv_cache,
        "torch_npu": types.SimpleNamespace(
            npu_fused_infer_attention_score=npu_fused_infer_attention_score),
    }
    aiter = types.ModuleType("aiter")
    aiter.flash_attn_varlen_func = lambda **kw: _aiter(**kw)
    name = f"varlen_sglang_{release.wheel_version.replace('.', '_')}_vision"
    return engine_source.load_module(name, source, f"{wheel}/{VISION_FILE}", ROOTS, stubs,
                                      REAL_MODULES,
                                      imports=lambda what: aiter if what == "aiter" else None)


def _aiter(*, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale):
    record("aiter.flash_attn_varlen_func", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, causal=False)
    # aiter's door on an MI300 (gfx942), where SGLang picks aiter_attn.
    aiter_entry.aiter_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, softmax_scale, _ENGINE.get().device.is_device,
                                   gfx="gfx942")
    return output_like(q, v)


# --- one call ---------------------------------------------------------------------------


def _npu_ops():
    """torch_npu's own operators where ascend_attn calls them on q's device,
    written again from op-plugin (op_api::arange: its bound check says
    "larger bound" where CPU torch's says "lower bound"; torch_npu's
    error-code line after the message is left out, as faithful mode leaves it
    out). A mode entered inside DeviceMode for ascend_attn's calls."""
    torch = torch_module()
    from torch.overrides import TorchFunctionMode

    class NpuOps(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            device = kwargs.get("device")
            if func is torch.arange and isinstance(device, torch.device) and \
                    device.type != "cpu" and len(args) >= 2:
                start, end = args[0], args[1]
                step = args[2] if len(args) > 2 else kwargs.get("step", 1)
                if step == 0:
                    raise RuntimeError("step must be nonzero")
                if not ((step > 0 and end >= start) or (step < 0 and end <= start)):
                    raise RuntimeError("upper bound and larger bound inconsistent with step sign")
            return func(*args, **kwargs)

    return NpuOps()


class Engine:
    """One release's backend classes, ready to be called."""

    def __init__(self, release: Release, wheel: str):
        self.release = release
        self.vision = load_vision(wheel, release)
        self.device = device.device_classes((SGLANG_FA3_NAMESPACE,))
        self.prefill = load_prefill_attention(wheel, self.device.is_device)
        self.profile = ""  # the backend of the call being made

    def _cache(self, data):
        cache = self.vision.SingletonCache()
        if data is not None:
            cache.set_data(data)
        return cache

    def call(self, d: dict) -> Observation:
        """What the backend class did with call `d`."""
        m = device.Materialized(self.device, self._cache)
        q, k, v = m.tensor(d["q"]), m.tensor(d["k"]), m.tensor(d["v"])
        kwargs = {key: m.value(item) for key, item in d["kwargs"].items()}
        if d["forward_metadata"] is not None:
            fields = {key: m.value(item) for key, item in d["forward_metadata"].items()}
            kwargs["forward_metadata"] = self.vision.VisionAttentionMetadata(**fields)
        cls = getattr(self.vision, BACKEND_CLASSES[d["profile"]])
        sdpa = d["sdpa"]
        raised = None
        with self.calling(d) as (ledger, capture):
            try:
                backend = cls(head_dim=int(q.shape[-1]), num_heads=int(q.shape[-2]),
                              num_kv_heads=int(k.shape[-2]), dropout=0.0,
                              flatten_batch=bool(sdpa["flatten_batch"]),
                              softmax_in_single_precision=bool(
                                  sdpa["softmax_in_single_precision"]),
                              softmax_scale=m.value(sdpa["softmax_scale"]),
                              use_data_parallel=False, workspace_buffer=None)
                backend.forward(q, k, v, bsz=d["bsz"], seq_len=d["seq_len"],
                                cu_seqlens=m.value(d["cu_seqlens"]), **kwargs)
            except Exception as e:  # the engine's exception is the observation
                raised = (type(e).__name__, str(e))
        return Observation(raised, capture, ledger, kwargs, tuple(q.shape), m.tensors)

    @contextlib.contextmanager
    def calling(self, d: dict):
        """The state the backend classes run in for call `d` (its profile,
        graph mode, the NPU's operators) and the device mode, with
        vision.py importable by its name; yields (ledger, capture)."""
        npu = _npu_ops() if d["profile"] == "ascend_attn" else contextlib.nullcontext()
        self.profile = d["profile"]
        tokens = _GRAPH_MODE.set(bool(d["graph_mode"])), _ENGINE.set(self)
        saved = sys.modules.get(VISION_MODULE)
        sys.modules[VISION_MODULE] = self.vision
        try:
            with device.observing() as (ledger, capture), self.device.Mode(), npu:
                yield ledger, capture
        finally:
            if saved is None:
                del sys.modules[VISION_MODULE]
            else:
                sys.modules[VISION_MODULE] = saved
            _ENGINE.reset(tokens[1])
            _GRAPH_MODE.reset(tokens[0])


# --- comparing ---------------------------------------------------------------------------


def _scale_pairs(resolved, scale, profile: str, head_dim: int) -> list:
    """The scale compared, when the kernel got a number or None (its default).
    Any other value reaches the kernel unconverted: the core holds it as not
    modelled, and a launch that never converts it (no rows) has no number to
    compare."""
    if scale is None:
        return [("scale", resolved["scale"], _default_scale(profile, head_dim))]
    if isinstance(scale, (bool, int, float)):
        return [("scale", resolved["scale"], scale)]
    return []


def _default_scale(profile: str, head_dim: int) -> float:
    # What each kernel computes from softmax_scale=None (varlen::DefaultSoftmaxScale).
    if profile in ("triton_attn",):
        return 1.0 / (head_dim ** 0.5)
    if profile in ("fa4", "amx_attn", "sdpa"):
        return 1.0 / math.sqrt(head_dim)
    return head_dim ** -0.5


class Comparer(compare.Comparer):
    """The kernel arguments of SGLang's backends."""

    def __init__(self, engine: Engine):
        super().__init__(engine.device)
        self.engine = engine

    def cache_json(self, x) -> Optional[dict]:
        if isinstance(x, self.engine.vision.SingletonCache):
            data = x.get_data()
            return {"singleton_cache": None if data is None else self.as_json(data)}
        return None

    def argument_differences(self, d: dict, resolved: dict,
                             seen: Observation) -> List[Difference]:
        profile = d["profile"]
        head_dim = int(seen.q_shape[-1])
        capture, kwargs = seen.capture, seen.kwargs
        a = capture.args
        pairs: List[Tuple[str, Any, Any]] = []
        if profile == "sdpa":
            return []  # torch ran for real; its mask is compared through the outcome only
        if capture.kernel is None:
            return [("kernel", "a kernel call", "no kernel call")]
        if profile in ("fa3", "fa4", "aiter_attn", "amx_attn", "xpu_attn"):
            if a["cu_seqlens_k"] is not a["cu_seqlens_q"] or a["max_seqlen_k"] is not a["max_seqlen_q"]:
                pairs.append(("q and k arguments", "the same objects", "different objects"))
            pairs += [("cu_seqlens", resolved["cu_seqlens"], self.as_json(a["cu_seqlens_q"])),
                      ("max_seqlen", resolved["max_seqlen"], self.as_json(a["max_seqlen_q"]))]
            pairs += _scale_pairs(resolved, a["softmax_scale"], profile, head_dim)
            # What the kernel computes besides full attention, where the
            # model says it gets a window or sinks.
            if "window" in resolved:
                pairs.append(("window", resolved["window"], list(a.get("window_size", ()))))
            if "sinks" in resolved:
                sinks = a.get("sinks")
                pairs.append(("sinks", resolved["sinks"],
                              None if sinks is None else sinks.float().tolist()))
        elif profile == "triton_attn":
            ws = kwargs.get("output_ws")
            pairs += [("cu_seqlens", resolved["cu_seqlens"], self.as_json(a["cu_seqlens"])),
                      ("seq_lens", resolved["seq_lens"], self.as_json(a["seq_lens"])),
                      ("max_seqlen", resolved["max_seqlen"], self.as_json(a["max_seqlen"])),
                      ("output_from_workspace", resolved["output_from_workspace"],
                       a["o"] is ws and "output_ws" in kwargs and d["graph_mode"]
                       and d["forward_metadata"] is None)]
            pairs += _scale_pairs(resolved, a["scale"], profile, head_dim)
        elif profile == "flashinfer_cudnn":
            pairs += compare.cudnn_prefill_pairs(self.as_json, resolved, a)
            pairs.append(("scale", resolved["scale"], a["scale"]))
        elif profile == "ascend_attn":
            pairs += [("actual_seq_lengths", resolved["actual_seq_lengths"],
                       a["actual_seq_lengths"]),
                      ("actual_seq_lengths_kv", resolved["actual_seq_lengths"],
                       a["actual_seq_lengths_kv"]),
                      ("scale", resolved["scale"], a["scale"]),
                      ("rows given to the kernel",
                       sum(max(e - s, 0) for s, e in
                           zip([0] + resolved["actual_seq_lengths"][:-1],
                               resolved["actual_seq_lengths"])) if resolved["padded"]
                       else int(seen.q_shape[0]),
                       int(a["q"].shape[0]))]
        return [(name, compare.text(p), compare.text(o)) for name, p, o in pairs
                if not compare.same_number(p, o)]


def judge(version: str) -> Judge:
    """SGLang `version` (a modelled one, or any release, judged against the
    latest modelled version) ready to be compared."""
    release = RELEASES.get(version) or Release(version)
    engine = Engine(release, fetch_wheel(release))
    return Judge(engine, Comparer(engine), version, release.models or LATEST_MODELLED,
                 release.wheel_name, release.note,
                 [(backend, test, reason) for v, backend, test, reason in EXPLAINED
                  if v == version])
