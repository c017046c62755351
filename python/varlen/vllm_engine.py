"""vLLM's own multimodal-encoder attention, run on the CPU: the vLLM side of a
differential against the C++ model.

    python -m varlen.vllm_engine --probe      the exact torch and vLLM messages, as JSON

The wheel is $VARLEN_VLLM_WHEEL, else the one in sglang_differential's
wheels_dir() (build/python-env/wheels), downloaded there when missing.

vLLM 0.33.0's `MMEncoderAttention` (vllm/model_executor/layers/attention/
mm_encoder_attention.py) and its custom ops (vllm/v1/attention/ops/
vit_attn_wrappers.py) are read from the wheel (downloaded with
`pip download --no-deps` when missing, never installed; the wheel and every
file read from it are checked by SHA-256) and executed whole, unchanged,
with real torch, NumPy and einops. Their `vllm.*` imports resolve to a small
stand-in tree holding only what the two files use, on a CUDA platform:

* the ops are registered with the real torch.library by the wheel's own
  `direct_register_custom_op` (read from vllm/utils/torch_utils.py), so the
  dispatcher's type gate (`Tensor?` for max_seqlen, ...) and its multi-line
  messages are torch's. The one change: the kernel is registered for the CPU
  dispatch key (the stand-in device tensors are host tensors) and re-enters
  the device mode the dispatcher leaves (below);
* `get_vit_attn_backend` and `get_flash_attn_version` answer the call's
  profile ("FLASH_ATTN/fa2", "FLASH_ATTN/fa3", "TRITON_ATTN", "TORCH_SDPA",
  "FLASHINFER"); `AttentionBackendEnum` is built from the members of the
  wheel's registry.py; the multimodal config is None (fp8 off);
* the kernels' doors: the wheel's vllm_flash_attn interface runs unchanged
  and calls FlashAttention's ops, registered with the schemas of the wheel's
  libraries, whose kernels are `kernel_entry.FlashEntry`'s entry checks; the
  wheel's `context_attention_fwd` runs unchanged up to Triton's launcher
  (`kernel_entry.TritonJit` stands in for `triton.jit`). Both record their
  arguments by name first (sglang_differential's `Capture`), as does
  FlashInfer's `cudnn_batch_prefill_with_kv_cache`, a capture shim that
  returns an output of the right shape. TORCH_SDPA runs torch's
  scaled_dot_product_attention for real. FlashInfer's
  128 MiB workspace is a zero-stride stand-in of that size, never allocated.

Device tensors are sglang_differential's: host tensors of a subclass, under a
torch function mode that counts host reads (`.item()`, `.tolist()`, ...) as
host syncs and reports `q.device` as "cuda". A custom op is a torch function
of its own: the mode passes it through with the tensors as they are, and the
op's kernel runs under the mode again, so `max_seqlen.item()` inside the op
is counted and `torch.arange(..., device=q.device)` (cu_seqlens None) makes a
device tensor.

What it does not cover: the metadata builders (compute_max_seqlen,
maybe_compute_seq_lens, maybe_recompute_cu_seqlens), backend selection and
the platform's own checks are not run (the profile names the backend); fp8
(the AITER and FlashInfer fp8 paths) is off; the kernels' numerics are not
run (only TORCH_SDPA computes) and their entry checks are kernel_entry's; the ROCm, XPU and CPU
dispatch paths are not taken; and a host tensor is never a real device
tensor, so torch's device-mismatch errors do not occur. The messages come
from the torch this runs on, which need not be the torch vLLM pins.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import contextvars
import functools
import inspect
import json
import logging
import os
import sys
import types
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from varlen import _engine_source
from varlen import kernel_entry
from varlen import sglang_differential as sd

VLLM_VERSION = "0.33.0"
WHEEL_NAME = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"
LAYER_FILE = "vllm/model_executor/layers/attention/mm_encoder_attention.py"
OPS_FILE = "vllm/v1/attention/ops/vit_attn_wrappers.py"
TORCH_UTILS_FILE = "vllm/utils/torch_utils.py"
REGISTRY_FILE = "vllm/v1/attention/backends/registry.py"
TRITON_PREFILL_FILE = "vllm/v1/attention/ops/triton_prefill_attention.py"
FLASH_INTERFACE_FILE = "vllm/vllm_flash_attn/flash_attn_interface.py"
# Every file read from the wheel, pinned: the stand-ins below are written for these.
SOURCE_SHA256 = {
    LAYER_FILE: "336e665cd84574d72185338018e0860850032d0ee39f584acaa64181243e0aba",
    OPS_FILE: "367aa96a4316915a8dd9fc725c3bef28c0e8185f9d9a6f8ecbe04b48df1b4b29",
    TORCH_UTILS_FILE: "6af248aa54c1c880a6cd46abba69207fd2d69992a7669648673fe99b18a8e911",
    REGISTRY_FILE: "c954908a4aa12b0d59b7edd29a0752e911027bdbfdf3659e53fa5e16020e03d2",
    TRITON_PREFILL_FILE: "82f3ba37c24feed5ce8eaddc398f81a36fb3bdf7446c812570eb5eab88765be7",
    FLASH_INTERFACE_FILE: "234b33a0816e5ddc91ae5a9ac7238dd33803bd086c92f97ab904720ce261bfc3",
}
OPS = ("flash_attn_maxseqlen_wrapper", "triton_attn_wrapper", "torch_sdpa_wrapper",
       "flashinfer_wrapper")
# profile -> (AttentionBackendEnum member, flash-attention version)
PROFILES: Dict[str, Tuple[str, Optional[int]]] = {
    "FLASH_ATTN/fa2": ("FLASH_ATTN", 2),
    "FLASH_ATTN/fa3": ("FLASH_ATTN", 3),
    "TRITON_ATTN": ("TRITON_ATTN", None),
    "TORCH_SDPA": ("TORCH_SDPA", None),
    "FLASHINFER": ("FLASHINFER", None),
}
FLASHINFER_WORKSPACE_BYTES = 128 * 1024 * 1024


def wheel_path(download: bool = True) -> str:
    """The pinned wheel: $VARLEN_VLLM_WHEEL, else in sglang_differential's
    wheels_dir(), downloaded there (pip download --no-deps, about 340 MB) when
    missing and `download`; checked by hash either way."""
    if os.environ.get("VARLEN_VLLM_WHEEL"):
        path = Path(os.environ["VARLEN_VLLM_WHEEL"])
        if not path.is_file():
            raise _engine_source.Unavailable(f"no vLLM wheel at {path}")
        return str(_engine_source.fetch_wheel("vllm", VLLM_VERSION, "manylinux_2_28_x86_64",
                                              path.parent, path.name, WHEEL_SHA256))
    path = sd.wheels_dir() / WHEEL_NAME
    if not path.is_file() and not download:
        raise _engine_source.Unavailable(f"no vLLM wheel at {path}")
    return str(_engine_source.fetch_wheel("vllm", VLLM_VERSION, "manylinux_2_28_x86_64",
                                          path.parent, WHEEL_NAME, WHEEL_SHA256, "vllm-engine"))


# --- device tensors ---------------------------------------------------------------------


# The ops' namespaces: vLLM's own and its FlashAttention libraries'.
_OP_NAMESPACES = ("vllm", "_vllm_fa2_C", "_vllm_fa3_C")


class _Device(types.SimpleNamespace):
    """sglang_differential's device stand-in, with vLLM's custom ops passed through."""


@functools.lru_cache(maxsize=None)
def device() -> _Device:
    """One set of device classes per process: the registered ops re-enter its mode."""
    DeviceTensor, DeviceMode, is_device, plain = sd._device_classes(_OP_NAMESPACES)
    return _Device(DeviceTensor=DeviceTensor, Mode=DeviceMode, is_device=is_device, plain=plain)


def _under_device_mode(op_func: Callable) -> Callable:
    """The op's kernel as registered: the wheel's function, run under the device
    mode when a call is being counted (a torch function mode is off while it
    handles the op call that reaches the dispatcher)."""

    @functools.wraps(op_func)
    def kernel(*args, **kwargs):
        try:
            sd._LEDGER.get()
        except LookupError:  # not inside a counted call
            return op_func(*args, **kwargs)
        with device().Mode():
            return op_func(*args, **kwargs)

    return kernel


# --- the kernels, as capture shims -------------------------------------------------------


def _output(q, v, out=None):
    torch = sd._torch()
    if out is not None:
        return out
    return torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)


def _recorded(name: str, kernel: Callable) -> Callable:
    """`kernel`, with the arguments of each call recorded by name first."""
    signature = inspect.signature(kernel)

    @functools.wraps(kernel)
    def recorded(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        sd._record(name, **bound.arguments)
        return kernel(*args, **kwargs)

    return recorded


def cudnn_batch_prefill_with_kv_cache(q, k_cache, v_cache, scale, workspace_buffer, **kwargs):
    sd._record("cudnn_batch_prefill_with_kv_cache", q=q, k=k_cache, v=v_cache, scale=scale,
               workspace_buffer=workspace_buffer, **kwargs)
    return _output(q, v_cache, kwargs.get("out")), None


# --- the stand-in vllm tree --------------------------------------------------------------

_SETTINGS: contextvars.ContextVar = contextvars.ContextVar("varlen_vllm_settings")
_CAPTURING: contextvars.ContextVar = contextvars.ContextVar("varlen_vllm_capturing",
                                                            default=False)


class _Platform:
    """current_platform: CUDA, as the ops and the layer ask about it."""

    # The stand-in device tensors are host tensors: the ops' kernels are
    # registered for the CPU key (vLLM registers them for CUDA).
    dispatch_key = "CPU"

    def is_cuda(self) -> bool:
        return True

    def is_rocm(self) -> bool:
        return False

    def is_zen_cpu(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return False

    def is_xpu(self) -> bool:
        return False

    def is_tpu(self) -> bool:
        return False

    def is_out_of_tree(self) -> bool:
        return False

    def is_cuda_alike(self) -> bool:
        return True

    def has_device_capability(self, capability: int) -> bool:
        return capability <= 90  # a Hopper GPU


class _Logger(logging.LoggerAdapter):
    def info_once(self, msg, *args, **kwargs):
        pass

    def warning_once(self, msg, *args, **kwargs):
        pass

    def debug_once(self, msg, *args, **kwargs):
        pass


def _custom_op_class(torch):
    class CustomOp(torch.nn.Module):
        """vLLM's CustomOp as it dispatches on CUDA: forward is forward_cuda."""

        @classmethod
        def register(cls, name: str):
            def decorator(op_cls):
                op_cls.name = name
                return op_cls
            return decorator

        def __init__(self, *, enforce_enable: bool = False, compile_native: bool = False):
            super().__init__()
            self._forward_method = self.forward_cuda if (enforce_enable or self.enabled()) \
                else self.forward_native

        def forward(self, *args, **kwargs):
            return self._forward_method(*args, **kwargs)

        @classmethod
        def enabled(cls) -> bool:
            return True

    return CustomOp


def _unused(name: str) -> Callable:
    def stub(*args, **kwargs):
        raise NotImplementedError(f"{name} is not stubbed (fp8 and the builders are off)")
    return stub


def _backend_enum(registry_source: str):
    """AttentionBackendEnum with the wheel's members and values (a plain Enum:
    str() renders AttentionBackendEnum.FLASH_ATTN as vLLM's does)."""
    tree = ast.parse(registry_source, REGISTRY_FILE)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "AttentionBackendEnum":
            members = [(stmt.targets[0].id, ast.literal_eval(stmt.value)) for stmt in node.body
                       if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                       and isinstance(stmt.targets[0], ast.Name)]
            return Enum("AttentionBackendEnum", members)
    raise _engine_source.Unavailable(f"{REGISTRY_FILE} defines no AttentionBackendEnum")


class _TorchView(types.ModuleType):
    """torch as the ops see it: torch itself, but for the stream-capture query
    (a CUDA call; here the call's `capturing` field)."""

    def __init__(self, torch):
        super().__init__("torch")
        self._torch = torch
        self.cuda = types.SimpleNamespace(is_current_stream_capturing=_CAPTURING.get)

    def __getattr__(self, name):
        return getattr(self._torch, name)


class VllmCode:
    """The two files' modules, loaded once per process (the ops are registered
    in torch's process-wide "vllm" library)."""

    def __init__(self, wheel: str):
        torch = sd._torch()
        self.wheel = wheel
        sources = {member: _engine_source.read_member(wheel, member, sha,
                                                      f"the vLLM {VLLM_VERSION} code")
                   for member, sha in SOURCE_SHA256.items()}
        self.AttentionBackendEnum = _backend_enum(sources[REGISTRY_FILE])
        platform = _Platform()
        modules: Dict[str, types.ModuleType] = {}

        def module(name: str, **attrs) -> types.ModuleType:
            m = types.ModuleType(name)
            m.__dict__.update(attrs)
            modules[name] = m
            return m

        module("vllm.platforms", current_platform=platform)
        # The wheel's own direct_register_custom_op and vllm_lib, extracted.
        utils = _engine_source.load_module(
            "varlen_vllm_torch_utils", sources[TORCH_UTILS_FILE],
            f"{wheel}/{TORCH_UTILS_FILE}", ("direct_register_custom_op", "vllm_lib"), {},
            ("collections.abc", "typing", "torch", "torch.library"),
            imports=lambda what: modules.get(what))
        self._vllm_lib = utils.vllm_lib  # the ops live as long as the library object
        infer_schema = torch.library.infer_schema

        def direct_register_custom_op(op_name, op_func, mutates_args=None, fake_impl=None,
                                      target_lib=None, dispatch_key=None, tags=()):
            kernel = _under_device_mode(op_func)
            if infer_schema(kernel, mutates_args=mutates_args or []) != \
                    infer_schema(op_func, mutates_args=mutates_args or []):
                raise RuntimeError(f"the wrapped {op_name} changes its inferred schema")
            utils.direct_register_custom_op(op_name, kernel, mutates_args=mutates_args,
                                            fake_impl=fake_impl, target_lib=target_lib,
                                            dispatch_key=dispatch_key, tags=tags)

        def get_vit_attn_backend(head_size, dtype):
            return self.AttentionBackendEnum[_SETTINGS.get()[0]]

        def get_flash_attn_version(*args, **kwargs):
            version = _SETTINGS.get()[1]
            if version is None:
                raise RuntimeError("the profile names no flash-attention version")
            return version

        module("vllm._aiter_ops", rocm_aiter_ops=types.SimpleNamespace(
            fp8_attn_wrapper=_unused("rocm_aiter_ops.fp8_attn_wrapper")))
        module("vllm.utils.gpu_sync_debug", gpu_sync_allowed=lambda first_only=False:
               contextlib.nullcontext())
        module("vllm.utils.torch_utils", direct_register_custom_op=direct_register_custom_op,
               async_tensor_h2d=_unused("async_tensor_h2d"))
        module("vllm.utils.math_utils", round_up=lambda x, y: ((x + y - 1) // y) * y,
               RCP_LN2=1.4426950216)  # vllm/utils/math_utils.py:9
        module("vllm.utils.flashinfer",
               is_flashinfer_cudnn_fp8_prefill_attn_supported=lambda: False)
        # FlashAttention's ops, registered with the wheel's schemas; their
        # kernels are the entry checks (kernel_entry.FlashEntry).
        self._flash_libraries = kernel_entry.register_vllm_flash_ops(device().is_device,
                                                                     _under_device_mode)
        module("vllm.v1.attention.backends.registry",
               AttentionBackendEnum=self.AttentionBackendEnum)
        import triton  # its cdiv, next_power_of_2 and language; jit is the launcher's stand-in
        module("vllm.triton_utils", tl=triton.language, triton=types.SimpleNamespace(
            cdiv=triton.cdiv, next_power_of_2=triton.next_power_of_2,
            jit=lambda fn: kernel_entry.TritonJit(fn, device().is_device)))
        module("flashinfer.prefill", cudnn_batch_prefill_with_kv_cache=cudnn_batch_prefill_with_kv_cache)
        module("aiter", flash_attn_varlen_func=_unused("aiter.flash_attn_varlen_func"))
        module("vllm.config", MultiModalConfig=types.SimpleNamespace(
            mm_encoder_fp8_scale_save_margin=1.0))  # read at import; fp8 is off
        module("vllm.kernels.triton.qkv_padded_fp8_quant",
               quantize_fp8_maybe_pad_head_dim=_unused("quantize_fp8_maybe_pad_head_dim"))
        module("vllm.logger", init_logger=lambda name: _Logger(logging.getLogger(name), {}))
        module("vllm.model_executor.custom_op", CustomOp=_custom_op_class(torch),
               maybe_get_oot_by_class=lambda cls: cls)
        module("vllm.model_executor.layers.quantization.input_quant_fp8",
               QuantFP8=_unused("QuantFP8"))
        module("vllm.model_executor.layers.quantization.utils.quant_utils",
               GroupShape=_unused("GroupShape"),
               get_fp8_min_max=lambda: (-448.0, 448.0))  # float8_e4m3fn's range; fp8 is off
        module("vllm.model_executor.models.vision", get_multimodal_config=lambda: None,
               get_vit_attn_backend=get_vit_attn_backend)
        torch_view = _TorchView(torch)

        def load(name: str, member: str, view_torch: bool) -> types.ModuleType:
            def stubbed_import(what, globals=None, locals=None, fromlist=(), level=0):
                if level > 0:  # vllm_flash_attn's `from . import _vllm_fa2_C`: the ops above
                    return types.SimpleNamespace(**{n: types.ModuleType(n) for n in fromlist})
                if what in modules:
                    return modules[what]
                if what.split(".")[0] in ("vllm", "flashinfer", "aiter"):
                    raise ImportError(f"varlen does not stub {what} (imported by {member})")
                if what == "torch" and view_torch and not fromlist:
                    return torch_view
                return builtins.__import__(what, globals, locals, fromlist, level)

            m = types.ModuleType(name)
            m.__file__ = f"{wheel}/{member}"
            m.__builtins__ = dict(vars(builtins), __import__=stubbed_import)
            sys.modules[name] = m
            try:
                _engine_source.compile_into(m, sources[member], ast.parse(sources[member], m.__file__),
                                            m.__file__)
            except BaseException:
                del sys.modules[name]
                raise
            return m

        # The wheel's own flash_attn_varlen_func, down to the ops.
        interface = load("varlen_vllm_flash_attn_interface", FLASH_INTERFACE_FILE,
                         view_torch=False)
        module("vllm.v1.attention.backends.fa_utils", get_flash_attn_version=get_flash_attn_version,
               flash_attn_varlen_func=_recorded("flash_attn_varlen_func",
                                                interface.flash_attn_varlen_func))
        # The wheel's own context_attention_fwd, up to Triton's launcher.
        prefill = load("varlen_vllm_triton_prefill_attention", TRITON_PREFILL_FILE,
                       view_torch=False)
        module("vllm.v1.attention.ops.triton_prefill_attention",
               context_attention_fwd=_recorded("context_attention_fwd",
                                               prefill.context_attention_fwd))
        self.ops = load("varlen_vllm_vit_attn_wrappers", OPS_FILE, view_torch=True)
        modules["vllm.v1.attention.ops.vit_attn_wrappers"] = self.ops
        self.layer = load("varlen_vllm_mm_encoder_attention", LAYER_FILE, view_torch=False)
        # FlashInfer's workspace, never allocated: 128 MiB of one byte.
        self.layer._flashinfer_workspace_buffer = torch.zeros(1, dtype=torch.uint8).expand(
            FLASHINFER_WORKSPACE_BYTES).as_subclass(device().DeviceTensor)

    def construct(self, profile: str, num_heads: int, head_size: int,
                  scale: Optional[float] = None, num_kv_heads: Optional[int] = None):
        """MMEncoderAttention(num_heads, head_size, scale=, num_kv_heads=) for `profile`."""
        if profile not in PROFILES:
            raise ValueError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
        token = _SETTINGS.set(PROFILES[profile])
        try:
            return self.layer.MMEncoderAttention(num_heads, head_size, scale=scale,
                                                 num_kv_heads=num_kv_heads)
        finally:
            _SETTINGS.reset(token)


_LOADED: Dict[str, VllmCode] = {}


def load(wheel: Optional[str] = None) -> VllmCode:
    """The loaded code (the first wheel loaded serves the whole process: the
    ops can be registered once)."""
    if _LOADED:
        return next(iter(_LOADED.values()))
    code = VllmCode(wheel or wheel_path())
    _LOADED[code.wheel] = code
    return code


# --- one call ---------------------------------------------------------------------------


class SingletonCache:
    """SGLang's cache object as a value a caller may hand vLLM (vLLM has none)."""

    def __init__(self, data=None):
        self.data = data


class VllmEngine:
    """MMEncoderAttention from the wheel, called as a vision tower calls it."""

    def __init__(self, wheel: Optional[str] = None):
        self.code = load(wheel)
        self.device = device()

    def _materialize(self, d: dict):
        torch = sd._torch()
        tensors: Dict[int, Any] = {}

        def tensor(t):
            key = t["id"]
            if key not in tensors:
                host = sd.host_copy(t["__tensor__"])
                tensors[key] = (host.as_subclass(self.device.DeviceTensor)
                                if t["device"] == "cuda" else host)
            return tensors[key]

        def value(v):
            if isinstance(v, dict) and "__tensor__" in v:
                return tensor(v)
            if isinstance(v, dict) and "__cache__" in v:
                return SingletonCache(None if v["__cache__"] is None else tensor(v["__cache__"]))
            if isinstance(v, list):
                return [value(item) for item in v]
            if isinstance(v, dict):
                return {key: value(item) for key, item in v.items()}
            return v

        return tensor, value

    def call(self, d: dict) -> sd.Observation:
        """What MMEncoderAttention did with call `d`: layer(q, k, v,
        cu_seqlens=..., **kwargs), constructed from d["vllm_layer"] for
        d["profile"]."""
        tensor, value = self._materialize(d)
        q, k, v = tensor(d["q"]), tensor(d["k"]), tensor(d["v"])
        kwargs = {key: value(item) for key, item in d["kwargs"].items()}
        # cu_seqlens=None is the default: leaving it out is the same call.
        named = {} if d.get("cu_seqlens") is None else {"cu_seqlens": value(d["cu_seqlens"])}
        if d.get("forward_metadata") is not None:
            kwargs["forward_metadata"] = value(d["forward_metadata"])
        spec = d["vllm_layer"]
        ledger, capture = sd.Ledger(), sd.Capture()
        tokens = (sd._LEDGER.set(ledger), sd._CAPTURE.set(capture),
                  _CAPTURING.set(bool(d.get("capturing", False))))
        raised = output = None
        try:
            with self.device.Mode():
                layer = self.code.construct(d["profile"], int(spec["num_heads"]),
                                            int(spec["head_size"]), scale=spec.get("scale"),
                                            num_kv_heads=spec.get("num_kv_heads"))
                output = layer(q, k, v, **named, **kwargs)
        except Exception as e:  # the engine's exception is the observation
            raised = (type(e).__name__, str(e))
        finally:
            _CAPTURING.reset(tokens[2])
            sd._CAPTURE.reset(tokens[1])
            sd._LEDGER.reset(tokens[0])
        seen = sd.Observation(raised, capture, ledger, {**named, **kwargs}, tuple(q.shape))
        seen.output = output  # the layer's result (a device tensor where q is one), or None
        return seen


# --- the messages the model must reproduce ---------------------------------------------


def _tensor(values, dtype="int32", device_name="cuda", shape=None, ident=None):
    import numpy as np
    array = np.array(values, dtype=dtype)
    if shape is not None:
        array = array.reshape(shape)
    return {"__tensor__": array, "device": device_name, "id": ident}


class _Calls:
    """Hand-built call dicts: q, k, v [1, S, H, D] float32 (ids 0-2)."""

    def __init__(self, seq: int = 10, heads: int = 2, head_dim: int = 8):
        import numpy as np
        self.seq, self.heads, self.head_dim = seq, heads, head_dim
        rng = np.random.default_rng(0)
        self.qkv = [rng.standard_normal((1, seq, heads, head_dim)).astype("float32")
                    for _ in range(3)]

    def __call__(self, profile, cu=None, qkv=None, layer=None, **kwargs) -> dict:
        q, k, v = qkv if qkv is not None else self.qkv
        return {"profile": profile,
                "q": {"__tensor__": q, "device": "cuda", "id": 0},
                "k": {"__tensor__": k, "device": "cuda", "id": 1},
                "v": {"__tensor__": v, "device": "cuda", "id": 2},
                "cu_seqlens": cu, "kwargs": kwargs, "forward_metadata": None,
                "vllm_layer": layer or {"num_heads": self.heads, "head_size": self.head_dim,
                                        "num_kv_heads": self.heads, "scale": None}}


_BAD_VALUES = {"int": 6, "float": 5.9, "bool": True, "str": "4096", "list": [0, 4, 10],
               "nested_list": [[0, 4], [10]], "dict": {"max": 6}}


def probe_messages(engine: Optional[VllmEngine] = None) -> Dict[str, Any]:
    """The exact messages of the situations the C++ model reproduces, each
    raised by the loaded code (through MMEncoderAttention unless the name says
    otherwise): {name: [exception type, message]}."""
    import numpy as np
    engine = engine or VllmEngine()
    calls = _Calls()
    out: Dict[str, Any] = {}
    n = calls.seq

    def cu(values, dtype="int32", **kw):
        return _tensor(values, dtype, ident=kw.pop("ident", 3), **kw)

    def outcome(d):
        seen = engine.call(d)
        return list(seen.raised) if seen.raised else ["no error", seen.capture.kernel]

    good_cu, good_max = cu([0, 4, n]), _tensor(6, device_name="cpu", ident=4)
    good_seq = _tensor([4, 6], ident=5)
    fi_cu = cu([0, 4, n, 0, 4, n])
    # The dispatcher's gate, per op and argument.
    for name, bad in _BAD_VALUES.items():
        for profile in ("FLASH_ATTN/fa2", "TRITON_ATTN"):
            op = "flash_attn_maxseqlen_wrapper" if profile.startswith("FLASH") \
                else "triton_attn_wrapper"
            out[f"gate/{op}/max_seqlen/{name}"] = outcome(calls(profile, good_cu,
                                                                max_seqlen=bad))
            out[f"gate/{op}/cu_seqlens/{name}"] = outcome(calls(profile, bad,
                                                                max_seqlen=good_max))
        out[f"gate/torch_sdpa_wrapper/cu_seqlens/{name}"] = outcome(calls("TORCH_SDPA", bad))
        out[f"gate/flashinfer_wrapper/max_seqlen/{name}"] = outcome(
            calls("FLASHINFER", fi_cu, max_seqlen=bad, sequence_lengths=good_seq))
        out[f"gate/flashinfer_wrapper/cu_seqlens/{name}"] = outcome(
            calls("FLASHINFER", bad, max_seqlen=good_max, sequence_lengths=good_seq))
        out[f"gate/flashinfer_wrapper/sequence_lengths/{name}"] = outcome(
            calls("FLASHINFER", fi_cu, max_seqlen=good_max, sequence_lengths=bad))
    # .item() of max_seqlen.
    out["item/2_elements"] = outcome(calls("FLASH_ATTN/fa2", good_cu,
                                           max_seqlen=_tensor([6, 4], ident=4)))
    out["item/0_elements"] = outcome(calls("FLASH_ATTN/fa2", good_cu,
                                           max_seqlen=_tensor([], ident=4)))
    # cu_seqlens None and q_len 0: torch.arange(0, 0, step=0).
    empty = [np.zeros((1, 0, calls.heads, calls.head_dim), "float32") for _ in range(3)]
    out["arange/step_0"] = outcome(calls("FLASH_ATTN/fa2", qkv=empty))
    # torch.split in TORCH_SDPA.
    out["split/sum_mismatch"] = outcome(calls("TORCH_SDPA", cu([0, 4, 12])))
    out["split/negative"] = outcome(calls("TORCH_SDPA", cu([0, 6, 4, 10])))
    out["split/float_sizes"] = outcome(calls("TORCH_SDPA", cu([0.0, 4.0, 10.0], "float32")))
    out["split/empty_then_cat"] = outcome(calls("TORCH_SDPA", cu([0]), qkv=empty))
    # The view to 4-D.
    t, h, dim = 6, 2, 8
    misread = [np.zeros((t, h, dim), "float32") for _ in range(3)]
    out["view/3d_thd_misread"] = outcome(calls("FLASH_ATTN/fa2", qkv=misread,
                                               layer={"num_heads": h, "head_size": dim}))
    strided = [np.zeros((1, n, dim, h), "float32").transpose(0, 1, 3, 2) for _ in range(3)]
    out["view/not_viewable"] = outcome(calls("FLASH_ATTN/fa2", qkv=strided,
                                             layer={"num_heads": 4, "head_size": 4}))
    # len() of a 0-d cu_seqlens (FlashInfer's even-length check).
    out["len/0d"] = outcome(calls("FLASHINFER", cu(10, shape=()), max_seqlen=good_max,
                                  sequence_lengths=good_seq))
    # Keywords MMEncoderAttention does not take.
    for keyword in ("forward_metadata", "output_ws", "softmax_scale"):
        out[f"keyword/{keyword}"] = outcome(calls("FLASH_ATTN/fa2", good_cu, max_seqlen=good_max,
                                                  **{keyword: None if keyword != "softmax_scale"
                                                     else 0.5}))
    # The assertions.
    out["assert/both_or_neither/cu_only"] = outcome(calls("FLASH_ATTN/fa2", good_cu))
    out["assert/both_or_neither/max_only"] = outcome(calls("TRITON_ATTN", max_seqlen=good_max))
    out["assert/flashinfer/cu_none"] = outcome(calls("FLASHINFER", max_seqlen=good_max,
                                                     sequence_lengths=good_seq))
    out["assert/flashinfer/max_none"] = outcome(calls("FLASHINFER", fi_cu,
                                                      sequence_lengths=good_seq))
    out["assert/flashinfer/sequence_lengths_none"] = outcome(calls("FLASHINFER", fi_cu,
                                                                   max_seqlen=good_max))
    out["assert/flashinfer/odd_length"] = outcome(calls("FLASHINFER", good_cu,
                                                        max_seqlen=good_max,
                                                        sequence_lengths=good_seq))
    out["assert/num_kv_heads"] = outcome(calls("TORCH_SDPA", layer={
        "num_heads": 3, "head_size": 8, "num_kv_heads": 2}))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vllm-engine", description=__doc__.split("\n")[0])
    parser.add_argument("--probe", action="store_true",
                        help="print the exact messages of probe_messages() as JSON")
    args = parser.parse_args(argv)
    if not args.probe:
        parser.error("nothing to do: pass --probe")
    print(json.dumps(probe_messages(), indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
