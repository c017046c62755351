"""SGLang's own code as the judge of faithful mode.

    python -m varlen.sglang_differential [--sglang=VERSION[,VERSION...]] [--calls=N]
        [--backends=NAME,...] [--seed=S] [--save=DIR] [--json=FILE]

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
  C++ model. aiter's door is aiter's own (aiter_entry, on gfx942), which
  faithful mode does not model yet; the AMX and XPU kernels, whose entries
  are not read, are capture shims. For all three faithful mode predicts a
  launch only for the forms their engine's own path makes and reports
  anything else as not modelled. FlashInfer's cuDNN prefill is a capture shim, and the NPU's
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

import argparse
import ast
import builtins
import collections
import contextlib
import contextvars
import functools
import json
import math
import os
import re
import sys
import time
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from varlen import _engine_source, aiter_entry, fa4_entry, kernel_entry

VISION_FILE = "sglang/srt/layers/attention/vision.py"
BACKEND_CLASSES = {
    "triton_attn": "VisionTritonAttention",
    "sdpa": "VisionSdpaAttention",
    "fa3": "VisionFlash3Attention",
    "fa4": "VisionFlash4Attention",
    "flashinfer_cudnn": "VisionFlashInferAttention",
    "ascend_attn": "VisionAscendAttention",
    "aiter_attn": "VisionAiterAttention",
    "amx_attn": "VisionAMXAttention",
    "xpu_attn": "VisionIntelXPUAttention",
}
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


def _passes_metadata_or_max(d: dict) -> bool:
    return d["forward_metadata"] is not None or d["kwargs"].get("max_seqlen") is not None


# Differences that are known and why: (version, backend, which calls, reason).
EXPLAINED = [
    ("0026249", "xpu_attn", _passes_metadata_or_max,
     "0.5.18's VisionIntelXPUAttention ignores forward_metadata and the max_seqlen keyword "
     "(resolve_max_seqlen); commit 0026249's reads both (resolve_precomputed_max_seqlen)"),
]


def wheels_dir() -> Path:
    """$VARLEN_WHEELS, else build/python-env/wheels of the source tree this
    module lies in (also when it runs from a build tree inside it)."""
    if os.environ.get("VARLEN_WHEELS"):
        return Path(os.environ["VARLEN_WHEELS"])
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "CMakeLists.txt").is_file() and (parent / "python" / "pyproject.toml").is_file():
            return parent / "build" / "python-env" / "wheels"
    return here.parents[2] / "build" / "python-env" / "wheels"


def fetch_wheel(release: Release) -> str:
    """The release's wheel in wheels_dir(), downloaded when missing, checked by hash."""
    return str(_engine_source.fetch_wheel("sglang", release.wheel_version,
                                          "manylinux_2_34_x86_64", wheels_dir(),
                                          release.wheel_name, release.wheel_sha256,
                                          "sglang-differential"))


# --- tensors that stand for device tensors -----------------------------------------------


class Ledger:
    """What one call made the device do."""

    def __init__(self):
        self.host_syncs: List[str] = []
        self.host_to_device_copies: List[str] = []


_LEDGER: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_ledger")


def _torch():
    import torch
    return torch


def host_copy(array):
    """A host copy of a tensor the core hands over, strides kept: a strided
    view (a column of a fused projection, `cu_seqlens[::2]`) stays a view, of
    a zero-filled base as the case's own tensor is (clone() would make it
    dense, and a kernel that ignores strides would read other elements)."""
    torch = _torch()
    x = torch.from_dlpack(array)
    if x.is_contiguous():
        return x.clone()
    extent = 1 + sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
    out = torch.zeros(extent, dtype=x.dtype).as_strided(tuple(x.shape), tuple(x.stride()))
    try:
        out.copy_(x)
    except RuntimeError:  # overlapping strides: their values, densely
        return x.clone()
    return out


def _device_classes(op_namespaces=()):
    """The device stand-ins: DeviceTensor, DeviceMode, is_device, plain. Ops of
    `op_namespaces` pass DeviceMode untouched: the dispatcher parses their
    arguments as given (its type gate) and their kernels enter the mode
    again."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    from torch.utils import _pytree

    class DeviceTensor(torch.Tensor):
        """A host tensor standing for a device tensor (see DeviceMode)."""

        __torch_function__ = torch._C._disabled_torch_function_impl

    # torch's messages name a tensor's class ("must be float, not Tensor"):
    # the stand-in must not show through.
    DeviceTensor.__name__ = DeviceTensor.__qualname__ = "Tensor"

    def is_device(x) -> bool:
        return isinstance(x, DeviceTensor)

    def plain(x):
        return x.as_subclass(torch.Tensor) if is_device(x) else x

    def on_device(x):
        if isinstance(x, torch.Tensor) and not is_device(x):
            return x.as_subclass(DeviceTensor)
        return x

    def wants_device(d) -> Optional[bool]:
        """True for the device, False for the host, None when `d` names no device."""
        if isinstance(d, torch.Tensor):
            return is_device(d)
        if isinstance(d, (str, torch.device)):
            try:
                return torch.device(d).type != "cpu"
            except (RuntimeError, TypeError):
                return None
        return None

    tensor = torch.Tensor
    reads = {tensor.item, tensor.tolist, tensor.__bool__, tensor.__int__, tensor.__float__,
             tensor.__index__, tensor.numpy}
    moves = {tensor.to, tensor.cpu, tensor.cuda}
    def property_of(func):
        # A property's getter arrives as a fresh method-wrapper each time.
        return getattr(func, "__self__", None) if getattr(func, "__name__", "") == "__get__" else None

    class DeviceMode(TorchFunctionMode):
        """Runs torch on host tensors as if the DeviceTensor ones lived on a GPU."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if (isinstance(func, torch._ops.OpOverloadPacket) and
                    func._qualified_op_name.split("::")[0] in op_namespaces) or \
                    (isinstance(func, torch._ops.OpOverload) and func.namespace in op_namespaces):
                return func(*args, **(kwargs or {}))
            kwargs = dict(kwargs or {})
            ledger = _LEDGER.get()
            prop = property_of(func)
            if prop is tensor.device:
                return torch.device("cuda", 0) if is_device(args[0]) else func(*args)
            if prop is tensor.is_cuda:
                return is_device(args[0])
            if func in reads and is_device(args[0]):
                out = func(plain(args[0]), *args[1:], **kwargs)  # a read that fails reads nothing
                ledger.host_syncs.append(getattr(func, "__name__", str(func)))
                return out
            if func in moves:
                source = args[0]
                if func is tensor.cpu:
                    target = False
                elif func is tensor.cuda:
                    target = True
                else:
                    target = None
                    rest = []
                    for a in args[1:]:
                        w = wants_device(a)
                        if w is None:
                            rest.append(a)
                        else:
                            target = w
                            if isinstance(a, torch.Tensor):  # .to(other): its dtype too
                                rest.append(a.dtype)
                    if "device" in kwargs:
                        target = wants_device(kwargs.pop("device"))
                    args = (source, *rest)
                if target is None:
                    target = is_device(source)
                if is_device(source) and not target:
                    ledger.host_syncs.append(f"{getattr(func, '__name__', 'to')}(cpu)")
                elif not is_device(source) and target:
                    ledger.host_to_device_copies.append(getattr(func, "__name__", "to"))
                call_args = [plain(a) for a in args]
                if func is tensor.cuda or func is tensor.cpu:
                    out = call_args[0]
                else:
                    out = func(*call_args, **kwargs)
                if target != is_device(source) or (func is tensor.cuda and kwargs.get("copy")):
                    # A move is a copy into new memory, laid out as
                    # preserve_format lays it: a dense tensor keeps its
                    # strides, `cu[::2]` arrives contiguous.
                    out = out.clone()
                return on_device(out) if target else plain(out)
            device = kwargs.get("device")
            wanted = wants_device(device) if device is not None else None
            if wanted:
                kwargs["device"] = "cpu"
            flat = _pytree.tree_leaves((args, kwargs))
            any_device = any(is_device(x) for x in flat)
            out = func(*_pytree.tree_map(plain, args), **_pytree.tree_map(plain, kwargs))
            if wanted or (any_device and wanted is not False):
                out = _pytree.tree_map(on_device, out)
            return out

    return DeviceTensor, DeviceMode, is_device, plain


# --- the kernels, as capture shims -------------------------------------------------------


class Capture:
    """The arguments the backend handed its kernel, for one call."""

    def __init__(self):
        self.kernel: Optional[str] = None
        self.args: Dict[str, Any] = {}


_CAPTURE: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_capture")


def _record(kernel: str, **args):
    capture = _CAPTURE.get()
    if capture.kernel is not None:
        raise RuntimeError(f"{kernel} called after {capture.kernel} in one forward")
    capture.kernel = kernel
    capture.args = args


def _output_like(q, v):
    torch = _torch()
    return torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)


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
    torch = _torch()
    entry = kernel_entry.FlashEntry(lambda t: _ENGINE.get().is_device(t))

    def kernel(*args):
        with _ENGINE.get().DeviceMode():
            return entry.fa3_fwd(*args)

    library = torch.library.Library(SGLANG_FA3_NAMESPACE, "DEF")
    library.define(kernel_entry.FA3_FWD_SCHEMA)
    library.impl("fwd", kernel, "CPU")
    return library, getattr(torch.ops, SGLANG_FA3_NAMESPACE).fwd.default


def _fa3_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                causal, window_size, sinks):
    torch = _torch()
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
    _record("flash_attn_varlen_func_fa4" if ver == 4 else "flash_attn_varlen_func", q=q, k=k, v=v,
            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
            max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale, causal=causal)
    if ver == 3:
        return _fa3_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale, causal, window_size, sinks)
    # FA4 on sm100, the platform SGLang picks it for.
    fa4_entry.fa4_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               softmax_scale, _ENGINE.get().is_device, arch=100)
    return _output_like(q, v)


def flash_attn_varlen_func(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale=None, causal=False, window_size=(-1, -1), sinks=None):
    # amx_attn's and xpu_attn's kernels, whose entries are not read: the C++
    # model predicts a launch only for the forms their engine's path makes.
    _record("flash_attn_varlen_func", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, causal=causal)
    return _output_like(q, v)


PREFILL_FILE = "sglang/kernels/ops/attention/prefill_attention.py"
PREFILL_SHA256 = "eb158c4c03e69091eb95a1bce093c9b054ac1ca5aab12769063d2e84630ca7f3"


def load_prefill_attention(wheel: str, is_device) -> types.ModuleType:
    """The wheel's prefill_attention.py with Triton's launcher for `triton.jit`
    (kernel_entry.TritonJit): context_attention_fwd runs unchanged up to the
    launch, with an H100's tiles (CUDA_CAPABILITY (9, 0): BLOCK 128)."""
    import triton
    source = _engine_source.read_member(wheel, PREFILL_FILE, PREFILL_SHA256,
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
    _engine_source.compile_into(module, source, ast.parse(source, filename), filename)
    module._is_cuda = True
    module.CUDA_CAPABILITY = (9, 0)
    return module


def context_attention_fwd(q, k, v, o, b_start_loc, b_seq_len, max_input_len, is_causal=True,
                          sm_scale=None):
    _record("context_attention_fwd", q=q, k=k, v=v, o=o, cu_seqlens=b_start_loc,
            seq_lens=b_seq_len, max_seqlen=max_input_len, scale=sm_scale, causal=is_causal)
    _ENGINE.get().prefill.context_attention_fwd(q, k, v, o, b_start_loc, b_seq_len, max_input_len,
                                                is_causal=is_causal, sm_scale=sm_scale)


def cudnn_batch_prefill_with_kv_cache(q, k, v, scale, workspace_buffer, *, max_token_per_sequence,
                                      max_sequence_kv, actual_seq_lens_q, actual_seq_lens_kv,
                                      causal, return_lse, batch_offsets_q, batch_offsets_k,
                                      batch_offsets_v, batch_offsets_o,
                                      is_cuda_graph_compatible=False, **rest):
    _record("cudnn_batch_prefill_with_kv_cache", q=q, scale=scale,
            max_token_per_sequence=max_token_per_sequence, max_sequence_kv=max_sequence_kv,
            actual_seq_lens_q=actual_seq_lens_q, actual_seq_lens_kv=actual_seq_lens_kv,
            causal=causal, batch_offsets_q=batch_offsets_q, batch_offsets_k=batch_offsets_k,
            batch_offsets_v=batch_offsets_v, batch_offsets_o=batch_offsets_o)
    return _output_like(q, v), None


def npu_fused_infer_attention_score(*, query, key, value, actual_seq_lengths, actual_seq_lengths_kv,
                                    scale, num_heads, num_key_value_heads, sparse_mode,
                                    input_layout):
    _record("npu_fused_infer_attention_score", q=query, actual_seq_lengths=actual_seq_lengths,
            actual_seq_lengths_kv=actual_seq_lengths_kv, scale=scale, num_heads=num_heads,
            num_key_value_heads=num_key_value_heads, input_layout=input_layout)
    # The kernel's own check, which SGLang's padding removal works around.
    last = actual_seq_lengths[-1]
    if query.shape[0] != last:
        # The op's int list holds a bool as the int it is.
        shown = int(last) if isinstance(last, bool) else last
        raise RuntimeError(f"queryT({query.shape[0]}) must be equal to the last element of "
                           f"actualSequenceLengthQ({shown})")
    return (_output_like(query, value),)


# --- SGLang's code ---------------------------------------------------------------------


_GRAPH_MODE: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_graph",
                                                             default=False)


class _GraphModeSwitch:
    def get(self) -> bool:
        return _GRAPH_MODE.get()


def load_vision(wheel: str, release: Release) -> types.ModuleType:
    """vision.py's nine backend classes from `wheel`, on a platform where every
    one constructs, with the shims above as their kernels."""
    source = _engine_source.read_member(wheel, VISION_FILE, release.vision_sha256,
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
    return _engine_source.load_module(name, source, f"{wheel}/{VISION_FILE}", ROOTS, stubs,
                                      REAL_MODULES,
                                      imports=lambda what: aiter if what == "aiter" else None)


def _aiter(*, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale):
    _record("aiter.flash_attn_varlen_func", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            softmax_scale=softmax_scale, causal=False)
    # aiter's door on an MI300 (gfx942), where SGLang picks aiter_attn.
    aiter_entry.aiter_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, softmax_scale, _ENGINE.get().is_device,
                                   gfx="gfx942")
    return _output_like(q, v)


# --- one call ---------------------------------------------------------------------------


def _npu_ops():
    """torch_npu's own operators where ascend_attn calls them on q's device,
    written again from op-plugin (op_api::arange: its bound check says
    "larger bound" where CPU torch's says "lower bound"; torch_npu's
    error-code line after the message is left out, as faithful mode leaves it
    out). A mode entered inside DeviceMode for ascend_attn's calls."""
    torch = _torch()
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
        self.DeviceTensor, self.DeviceMode, self.is_device, self.plain = _device_classes(
            (SGLANG_FA3_NAMESPACE,))
        self.prefill = load_prefill_attention(wheel, self.is_device)

    def _materialize(self, d: dict):
        torch = _torch()
        tensors: Dict[int, Any] = {}

        def tensor(t):
            key = t["id"]
            if key not in tensors:
                host = host_copy(t["__tensor__"])
                tensors[key] = host.as_subclass(self.DeviceTensor) if t["device"] == "cuda" else host
            return tensors[key]

        def value(v):
            if isinstance(v, dict) and "__tensor__" in v:
                return tensor(v)
            if isinstance(v, dict) and "__cache__" in v:
                cache = self.vision.SingletonCache()
                if v["__cache__"] is not None:
                    cache.set_data(tensor(v["__cache__"]))
                return cache
            if isinstance(v, list):
                return [value(item) for item in v]
            return v

        return tensor, value

    def call(self, d: dict) -> "Observation":
        """What the backend class did with call `d`."""
        tensor, value = self._materialize(d)
        q, k, v = tensor(d["q"]), tensor(d["k"]), tensor(d["v"])
        kwargs = {key: value(item) for key, item in d["kwargs"].items()}
        if d["forward_metadata"] is not None:
            fields = {key: value(item) for key, item in d["forward_metadata"].items()}
            kwargs["forward_metadata"] = self.vision.VisionAttentionMetadata(**fields)
        cls = getattr(self.vision, BACKEND_CLASSES[d["profile"]])
        sdpa = d["sdpa"]
        ledger, capture = Ledger(), Capture()
        tokens = [_LEDGER.set(ledger), _CAPTURE.set(capture),
                  _GRAPH_MODE.set(bool(d["graph_mode"])), _ENGINE.set(self)]
        raised = None
        npu = _npu_ops() if d["profile"] == "ascend_attn" else contextlib.nullcontext()
        try:
            with self.DeviceMode(), npu:
                backend = cls(head_dim=int(q.shape[-1]), num_heads=int(q.shape[-2]),
                              num_kv_heads=int(k.shape[-2]), dropout=0.0,
                              flatten_batch=bool(sdpa["flatten_batch"]),
                              softmax_in_single_precision=bool(sdpa["softmax_in_single_precision"]),
                              softmax_scale=value(sdpa["softmax_scale"]), use_data_parallel=False,
                              workspace_buffer=None)
                backend.forward(q, k, v, bsz=d["bsz"], seq_len=d["seq_len"],
                                cu_seqlens=value(d["cu_seqlens"]), **kwargs)
        except Exception as e:  # the engine's exception is the observation
            raised = (type(e).__name__, str(e))
        finally:
            _ENGINE.reset(tokens[3])
            _GRAPH_MODE.reset(tokens[2])
            _CAPTURE.reset(tokens[1])
            _LEDGER.reset(tokens[0])
        return Observation(raised, capture, ledger, kwargs, tuple(q.shape))


class Observation:
    def __init__(self, raised, capture, ledger, kwargs, q_shape):
        self.raised = raised  # (type name, message), or None
        self.capture = capture
        self.ledger = ledger
        self.kwargs = kwargs  # as the backend got them (materialized)
        self.q_shape = q_shape


# --- comparing ---------------------------------------------------------------------------


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


class Comparer:
    def __init__(self, engine: Engine):
        self.engine = engine

    def as_json(self, x):
        """A captured argument as the C++ report writes a Value."""
        torch = _torch()
        if isinstance(x, torch.Tensor):
            return tensor_json(self.engine.plain(x), self.engine.is_device(x))
        if isinstance(x, list):
            return [self.as_json(item) for item in x]
        if isinstance(x, self.engine.vision.SingletonCache):
            data = x.get_data()
            return {"singleton_cache": None if data is None else self.as_json(data)}
        return x

    def differences(self, d: dict, predicted: dict, seen: Observation) -> List[Tuple[str, str, str]]:
        """(field, predicted, observed) for every difference."""
        raised, ledger = seen.raised, seen.ledger
        out: List[Tuple[str, str, str]] = []
        want = predicted["raised"]
        if want is None and predicted.get("kernel") is not None:
            want = tuple(predicted["kernel"])  # the kernel refuses the call: SGLang must raise that
        if want is not None and want[0] == "Unimplemented":
            return [("not modelled", want[1], _outcome_text(raised))]
        if (want is None) != (raised is None) or (want is not None and
                                                   not _same_error(tuple(want), raised)):
            out.append(("outcome", _outcome_text(want), _outcome_text(raised)))
            return out
        if want is None:
            resolved = json.loads(predicted["resolved"])
            out += self._argument_differences(d, resolved, seen)
        if predicted["host_syncs"] != len(ledger.host_syncs):
            out.append(("host syncs", str(predicted["host_syncs"]),
                        f"{len(ledger.host_syncs)} ({', '.join(ledger.host_syncs)})"))
        if predicted["host_to_device_copies"] != len(ledger.host_to_device_copies):
            out.append(("host-to-device copies", str(predicted["host_to_device_copies"]),
                        str(len(ledger.host_to_device_copies))))
        return out

    def _argument_differences(self, d, resolved, seen: Observation):
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
            pairs += cudnn_prefill_pairs(self.as_json, resolved, a)
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
        return [(name, _text(p), _text(o)) for name, p, o in pairs if not _same(p, o)]


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


def _same_error(want, raised) -> bool:
    return tuple(want) == tuple(raised)


def _same(p, o) -> bool:
    if isinstance(p, float) or isinstance(o, float):  # a scale: bool and int are numbers
        try:
            return float(p) == float(o)
        except (TypeError, ValueError):
            return False
    if type(p) is bool or type(o) is bool:
        return type(p) is type(o) and p == o
    return p == o


def _text(x) -> str:
    return json.dumps(x, default=repr) if not isinstance(x, str) else x


def _outcome_text(raised) -> str:
    return "success" if raised is None else f"{raised[0]}: {raised[1]}"


def rule_of(profile: str, field: str, predicted: str, observed: str,
            engine: str = "SGLang") -> str:
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


# --- the run ------------------------------------------------------------------------------


def tally(row: dict, rules: Dict[str, Dict[str, Any]], profile: str,
          diffs: List[Tuple[str, str, str]], reason: Optional[str], text: str,
          save_as: Optional[Path], engine: str = "SGLang") -> None:
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
            entry["example"] = json.loads(text)
            if save_as:
                save_as.parent.mkdir(parents=True, exist_ok=True)
                save_as.write_text(text)


def print_table(result: dict, out) -> collections.Counter:
    """The backend x outcome table of a run; returns the column totals."""
    columns = [c for c in ("calls", "agree", "not_modelled", "explained", "differ")
               if any(c in row for row in result["backends"].values())]
    print("  " + f"{'backend':17s}" + "".join(f"{c:>14s}" for c in columns), file=out)
    total = collections.Counter()
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


def run(version: str, calls: int, backends: List[str], seed: int, save: Optional[str],
        core, replay: Optional[List[str]] = None, verbose: bool = False) -> dict:
    release = RELEASES.get(version) or Release(version)
    modelled = release.models or LATEST_MODELLED
    engine = Engine(release, fetch_wheel(release))
    comparer = Comparer(engine)
    table: Dict[str, Dict[str, int]] = {}
    rules: Dict[str, Dict[str, Any]] = collections.OrderedDict()
    started = time.monotonic()
    for profile in backends:
        row = {"calls": 0, "agree": 0, "not_modelled": 0, "explained": 0, "differ": 0,
               "builder_errors": 0}
        explained = [(test, reason) for v, b, test, reason in EXPLAINED
                     if v == version and b == profile]
        if replay is None:
            cases = core.generate_calls(calls, seed, profile, modelled)
        else:  # replayed cases: each as this version's faithful call
            cases = []
            for t in replay:
                c = json.loads(t)
                if c["call"]["profile"] == profile:
                    c.update(mode="faithful", sglang=modelled)
                    c.pop("expect", None)
                    cases.append(json.dumps(c))
        for text in cases:
            predicted = core.faithful_call(text)
            if "builder_error" in predicted:
                row["builder_errors"] += 1  # the C++ builders are not what is judged
                continue
            row["calls"] += 1
            if predicted["raised"] is None and profile != "sdpa":
                predicted["kernel"] = kernel_prediction(core, text)
            diffs = comparer.differences(predicted["call"], predicted,
                                         engine.call(predicted["call"]))
            if verbose and diffs:
                print(f"{json.loads(text)['name']}: {json.dumps(diffs)[:2000]}", file=sys.stderr)
            reason = next((r for test, r in explained if test(predicted["call"])), None)
            tally(row, rules, profile, diffs, reason, text,
                  save and Path(save) / f"differential-{version}-{profile}-{len(rules) + 1}.json")
        table[profile] = row
        print(f"  {profile}: {row['calls']} calls, {row['differ']} differ", file=sys.stderr)
    return {"sglang": version, "wheel": release.wheel_name, "judged_as": modelled,
            "note": release.note, "seconds": round(time.monotonic() - started, 1),
            "backends": table, "rules": rules}


def print_report(result: dict, out=sys.stdout) -> None:
    head = (f"SGLang {result['sglang']} ({result['wheel']}) against faithful mode "
            f"{result['judged_as']}")
    print(head, file=out)
    if result["note"]:
        print(f"  {result['note']}", file=out)
    print_table(result, out)
    print_rules(result, "SGLang", out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sglang-differential", description=__doc__.split("\n")[0])
    parser.add_argument("--sglang", default="0.5.23,0026249",
                        help="versions, comma-separated: modelled ones (0.5.23, 0026249) or any "
                             "SGLang release (judged against the latest modelled version)")
    parser.add_argument("--calls", type=int, default=1200, help="generated calls per backend")
    parser.add_argument("--backends", default=",".join(BACKEND_CLASSES))
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--save", help="write one example case per rule that differs here")
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--cases", help="replay the case files of this directory (written by "
                                        "--save) instead of generating calls")
    parser.add_argument("--verbose", action="store_true", help="print every difference")
    parser.add_argument("--expect-agreement", action="store_true",
                        help="exit 1 unless every call agrees (not-modelled paths aside)")
    args = parser.parse_args(argv)
    from varlen import _core
    backends = [b for b in args.backends.split(",") if b]
    for b in backends:
        if b not in BACKEND_CLASSES:
            parser.error(f"--backends: {b!r} is not one of {', '.join(BACKEND_CLASSES)}")
    results = []
    for version in [v for v in args.sglang.split(",") if v]:
        print(f"sglang-differential: SGLang {version}, {args.calls} calls x {len(backends)} "
              f"backends", file=sys.stderr)
        replay = None
        if args.cases:
            replay = [p.read_text() for p in sorted(Path(args.cases).glob("*.json"))]
        result = run(version, args.calls, backends, args.seed, args.save, _core, replay,
                     args.verbose)
        print_report(result)
        results.append(result)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if args.expect_agreement and any(row["differ"] for r in results
                                     for row in r["backends"].values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
