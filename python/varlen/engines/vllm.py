"""vLLM as an engine module: its multimodal-encoder attention, run on the
CPU, as the judge of faithful mode.

    python -m varlen.engines.differential --engine=vllm [--calls=N] [--backends=PROFILE,...]
        [--seed=S] [--vllm-keywords-only] [--save=DIR] [--json=FILE] [--cases=DIR]
    python -m varlen.engines.vllm --probe      the exact torch and vLLM messages, as JSON

The wheel is $VARLEN_VLLM_WHEEL, else the one in source.wheels_dir()
(build/python-env/wheels), downloaded there when missing.

For each generated call (varlen._core.generate_calls for the profile and vLLM
0.33.0: every form of cu_seqlens, max_seqlen and sequence_lengths, the
builders' keywords, SGLang's keywords a caller carries over, batched and
packed q, fused projections) and each of vLLM's five encoder-attention
backends (FLASH_ATTN/fa2, FLASH_ATTN/fa3, TRITON_ATTN, TORCH_SDPA,
FLASHINFER), faithful mode's prediction (and, where it resolves, the kernel
entry's response through the binding) is compared with what the code below
does on the outcome (exception type and exact message), every kernel
argument (FlashAttention: cu_seqlens_q, which must be cu_seqlens_k,
max_seqlen_q, which must be max_seqlen_k, an int or a float as it is, the
softmax scale, fa_version; Triton: b_start_loc, b_seq_len, max_input_len,
softmax_scale; FlashInfer: actual_seq_lens_q (and _kv, the same object),
batch_offsets_q (and _k, _o, the same object), batch_offsets_v,
max_token_per_sequence, max_sequence_kv, the scale; the strides of the q, k
and v the kernel receives), TORCH_SDPA's output against a float64 per-chunk
reference computed from the predicted blocks, and the counts.

Most generated calls carry SGLang's keywords (output_ws, softmax_scale,
forward_metadata), which forward_cuda refuses first; --vllm-keywords-only
drops them from each call, so that the same draws reach the ops and kernels.

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
  arguments by name first (`device.record`), as does
  FlashInfer's `cudnn_batch_prefill_with_kv_cache`, a capture shim that
  returns an output of the right shape. TORCH_SDPA runs torch's
  scaled_dot_product_attention for real. FlashInfer's
  128 MiB workspace is a zero-stride stand-in of that size, never allocated.

Device tensors are varlen.engines.device's: host tensors of a subclass, under a
torch function mode that counts host reads (`.item()`, `.tolist()`, ...) as
host syncs and reports `q.device` as "cuda". A custom op is a torch function
of its own: the mode passes it through with the tensors as they are, and the
op's kernel runs under the mode again, so `max_seqlen.item()` inside the op
is counted and `torch.arange(..., device=q.device)` (cu_seqlens None) makes a
device tensor.

What it does not cover: the metadata builders (compute_max_seqlen,
maybe_compute_seq_lens, maybe_recompute_cu_seqlens), backend selection and
the platform's own checks are not run here (the profile names the backend;
varlen.engines.vllm_platform runs them, against faithful mode's platform
rules in python/tests/test_vllm_platform.py); fp8
(the AITER and FlashInfer fp8 paths) is off; the kernels' numerics are not
run (only TORCH_SDPA computes) and their entry checks are kernel_entry's; the ROCm, XPU and CPU
dispatch paths are not taken; and a host tensor is never a real device
tensor, so torch's device-mismatch errors do not occur. The messages come
from the torch this runs on, which need not be the torch vLLM pins; the
metadata builders are the C++ model's (a case's vllm_metadata becomes keyword
values before either side sees the call), and the doors' checks are written
from the kernels' sources rather than run from their binaries (without the
stable-ABI builds' "<function>, <file>:<line>, " prefix).
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
from typing import Any, Callable, Dict, List, Optional, Tuple

from varlen import kernel_entry
from varlen.engines import compare, device as stand_ins
from varlen.engines import source as engine_source
from varlen.engines.compare import Difference, Judge
from varlen.engines.device import Observation, output_like, record, torch_module

NAME = "vllm"
TITLE = "vLLM"
VLLM_VERSION = "0.33.0"
DEFAULT_VERSIONS = (VLLM_VERSION,)
DEFAULT_CALLS = 2100
WHEEL_NAME = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"
LAYER_FILE = "vllm/model_executor/layers/attention/mm_encoder_attention.py"
# The modules' names, for code that imports them (an emitted script).
LAYER_MODULE = "vllm.model_executor.layers.attention.mm_encoder_attention"
REGISTRY_MODULE = "vllm.v1.attention.backends.registry"
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
BACKEND_SETTINGS: Dict[str, Tuple[str, Optional[int]]] = {
    "FLASH_ATTN/fa2": ("FLASH_ATTN", 2),
    "FLASH_ATTN/fa3": ("FLASH_ATTN", 3),
    "TRITON_ATTN": ("TRITON_ATTN", None),
    "TORCH_SDPA": ("TORCH_SDPA", None),
    "FLASHINFER": ("FLASHINFER", None),
}
PROFILES = tuple(BACKEND_SETTINGS)
FLASHINFER_WORKSPACE_BYTES = 128 * 1024 * 1024
# Backends whose kernel is torch's, run for real: judged on their output.
RUN_FOR_REAL = ("TORCH_SDPA",)


def wheel_path(download: bool = True) -> str:
    """The pinned wheel: $VARLEN_VLLM_WHEEL, else in wheels_dir(), downloaded
    there (pip download --no-deps, about 340 MB) when missing and `download`;
    checked by hash either way."""
    if os.environ.get("VARLEN_VLLM_WHEEL"):
        path = Path(os.environ["VARLEN_VLLM_WHEEL"])
        if not path.is_file():
            raise engine_source.Unavailable(f"no vLLM wheel at {path}")
        return str(engine_source.fetch_wheel("vllm", VLLM_VERSION, "manylinux_2_28_x86_64",
                                             path.parent, path.name, WHEEL_SHA256))
    path = engine_source.wheels_dir() / WHEEL_NAME
    if not path.is_file() and not download:
        raise engine_source.Unavailable(f"no vLLM wheel at {path}")
    return str(engine_source.fetch_wheel("vllm", VLLM_VERSION, "manylinux_2_28_x86_64",
                                         path.parent, WHEEL_NAME, WHEEL_SHA256, "vllm-engine"))


# --- device tensors ---------------------------------------------------------------------


# The ops' namespaces: vLLM's own and its FlashAttention libraries'.
_OP_NAMESPACES = ("vllm", "_vllm_fa2_C", "_vllm_fa3_C")


@functools.lru_cache(maxsize=None)
def device() -> stand_ins.Device:
    """One set of device stand-ins per process, with vLLM's custom ops passed
    through (the registered ops re-enter its mode) and device tensors written
    as CUDA tensors are (the dispatcher's messages quote them)."""
    d = stand_ins.device_classes(_OP_NAMESPACES)
    d.DeviceTensor.__repr__ = stand_ins.cuda_repr
    return d


def _under_device_mode(op_func: Callable) -> Callable:
    """The op's kernel as registered: the wheel's function, run under the device
    mode when a call is being counted (a torch function mode is off while it
    handles the op call that reaches the dispatcher)."""

    @functools.wraps(op_func)
    def kernel(*args, **kwargs):
        try:
            stand_ins.LEDGER.get()
        except LookupError:  # not inside a counted call
            return op_func(*args, **kwargs)
        with device().Mode():
            return op_func(*args, **kwargs)

    return kernel


# --- the kernels, as capture shims -------------------------------------------------------


def _recorded(name: str, kernel: Callable) -> Callable:
    """`kernel`, with the arguments of each call recorded by name first."""
    signature = inspect.signature(kernel)

    @functools.wraps(kernel)
    def recorded(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        record(name, **bound.arguments)
        return kernel(*args, **kwargs)

    return recorded


def cudnn_batch_prefill_with_kv_cache(q, k_cache, v_cache, scale, workspace_buffer, **kwargs):
    record("cudnn_batch_prefill_with_kv_cache", q=q, k=k_cache, v=v_cache, scale=scale,
               workspace_buffer=workspace_buffer, **kwargs)
    return output_like(q, v_cache, kwargs.get("out")), None


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
    raise engine_source.Unavailable(f"{REGISTRY_FILE} defines no AttentionBackendEnum")


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
        torch = torch_module()
        self.wheel = wheel
        sources = {member: engine_source.read_member(wheel, member, sha,
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
        utils = engine_source.load_module(
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
                engine_source.compile_into(m, sources[member],
                                           ast.parse(sources[member], m.__file__), m.__file__)
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
        token = _SETTINGS.set(BACKEND_SETTINGS[profile])
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


class VllmEngine:
    """MMEncoderAttention from the wheel, called as a vision tower calls it."""

    def __init__(self, wheel: Optional[str] = None):
        self.code = load(wheel)
        self.device = device()

    def call(self, d: dict) -> Observation:
        """What MMEncoderAttention did with call `d`: layer(q, k, v,
        cu_seqlens=..., **kwargs), constructed from d["vllm_layer"] for
        d["profile"]. The observation holds the layer's output (a device
        tensor where q is one, or None) and the call's tensors by id."""
        m = stand_ins.Materialized(self.device, stand_ins.SingletonCache)
        q, k, v = m.tensor(d["q"]), m.tensor(d["k"]), m.tensor(d["v"])
        kwargs = {key: m.value(item) for key, item in d["kwargs"].items()}
        # cu_seqlens=None is the default: leaving it out is the same call.
        named = {} if d.get("cu_seqlens") is None else {"cu_seqlens": m.value(d["cu_seqlens"])}
        if d.get("forward_metadata") is not None:
            kwargs["forward_metadata"] = m.value(d["forward_metadata"])
        spec = d["vllm_layer"]
        raised = output = None
        with self.calling(d) as (ledger, capture):
            try:
                layer = self.code.construct(d["profile"], int(spec["num_heads"]),
                                            int(spec["head_size"]), scale=spec.get("scale"),
                                            num_kv_heads=spec.get("num_kv_heads"))
                output = layer(q, k, v, **named, **kwargs)
            except Exception as e:  # the engine's exception is the observation
                raised = (type(e).__name__, str(e))
        return Observation(raised, capture, ledger, {**named, **kwargs}, tuple(q.shape),
                           m.tensors, output)


    @contextlib.contextmanager
    def calling(self, d: dict):
        """The state MMEncoderAttention runs in for call `d` (stream capture,
        and its profile's backend for a layer constructed here) and the device
        mode, with the layer's module and the backend registry importable by
        their names; yields (ledger, capture)."""
        modules = {LAYER_MODULE: self.code.layer,
                   REGISTRY_MODULE: types.SimpleNamespace(
                       AttentionBackendEnum=self.code.AttentionBackendEnum)}
        saved = {name: sys.modules.get(name) for name in modules}
        tokens = (_CAPTURING.set(bool(d.get("capturing", False))),
                  _SETTINGS.set(BACKEND_SETTINGS[d["profile"]]))
        sys.modules.update(modules)
        try:
            with stand_ins.observing() as (ledger, capture), self.device.Mode():
                yield ledger, capture
        finally:
            for name, module in saved.items():
                if module is None:
                    del sys.modules[name]
                else:
                    sys.modules[name] = module
            _SETTINGS.reset(tokens[1])
            _CAPTURING.reset(tokens[0])


# --- comparing ---------------------------------------------------------------------------


def _strides_agree(predicted, shape, observed) -> bool:
    """The same strides on every dimension of more than one element."""
    if predicted is None or len(predicted) != len(observed):
        return False
    return all(p == o for p, o, n in zip(predicted, observed, shape) if n > 1)


# The tolerance of TORCH_SDPA's output against the float64 reference, as a
# fraction of the largest |v| (torch's CPU kernels accumulate in float32).
_SDPA_TOLERANCE = {"torch.float64": 1e-10, "torch.float32": 2e-5, "torch.float16": 4e-3,
                   "torch.bfloat16": 3e-2}


class Comparer(compare.Comparer):
    """The kernel arguments of vLLM's backends, and TORCH_SDPA's output."""

    def __init__(self, engine: VllmEngine):
        super().__init__(engine.device)

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

    def argument_differences(self, d: dict, resolved: dict,
                             seen: Observation) -> List[Difference]:
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
            pairs += compare.cudnn_prefill_pairs(self.as_json, resolved, a)
            pairs.append(("output_4d", resolved["output_4d"],
                          output is not None and output.dim() == 4))
            loose.append(("scale", resolved["scale"], a["scale"]))
        pairs += self._strides(resolved, a)
        out = [(name, compare.text(p), compare.text(o)) for name, p, o in pairs
               if not compare.same_value(p, o)]
        out += [(name, compare.text(p), compare.text(o)) for name, p, o in loose
                if not compare.same_number(p, o)]
        return out

    def _sdpa_output(self, d, resolved, seen: Observation):
        """vLLM's output against softmax(q k^T * scale) v in float64 over each
        predicted block of each item."""
        torch = torch_module()
        output = seen.output
        layer = d["vllm_layer"]
        heads, head_size = int(layer["num_heads"]), int(layer["head_size"])
        kv_heads = int(layer["num_kv_heads"] if layer.get("num_kv_heads") is not None else heads)
        q, k, v = (self.device.plain(seen.tensors[d[n]["id"]]) for n in ("q", "k", "v"))
        bsz, s = int(q.shape[0]), int(q.shape[1])
        if output is None:
            return [("output", "a tensor", "None")]
        got = self.device.plain(output)
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


def judge(version: str = VLLM_VERSION) -> Judge:
    """vLLM `version` (the modelled one) ready to be compared."""
    if version != VLLM_VERSION:
        raise ValueError(f"vLLM {version} is not modelled (modelled: {VLLM_VERSION})")
    engine = VllmEngine()
    return Judge(engine, Comparer(engine), version, VLLM_VERSION, Path(engine.code.wheel).name)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vllm-keywords-only", action="store_true",
                        help="drop SGLang's keywords (output_ws, softmax_scale) and "
                             "forward_metadata from each generated call, so that it reaches "
                             "the op")


def case_filter(args: argparse.Namespace) -> Optional[Callable[[str], str]]:
    """What --vllm-keywords-only does to each case, and how the report says so."""
    return drop_sglang_keywords if args.vllm_keywords_only else None


CASE_FILTER_NOTE = "SGLang's keywords dropped from each call"


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
