"""What every engine differential shares: tensors that stand for device
tensors, the ledger of what a call made the device do, the capture of a
kernel's arguments, and the call description's tensors materialized.

A device tensor is a host tensor of a subclass. Under the device mode (a
torch function mode) every host read of one (.item(), .tolist(), bool(),
int(), .cpu(), .to("cpu")) is a host sync in the current Ledger, every move
of a host tensor to the device a host-to-device copy, and `x.device` says
"cuda". A kernel shim records its arguments by name in the current Capture
(record()); an engine's call runs inside observing(), which installs both.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple


def torch_module():
    """torch, imported on first use (the package loads without it)."""
    import torch
    return torch


class Ledger:
    """What one call made the device do."""

    def __init__(self):
        self.host_syncs: List[str] = []
        self.host_to_device_copies: List[str] = []


LEDGER: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_ledger")


def host_copy(array):
    """A host copy of a tensor the core hands over, strides kept: a strided
    view (a column of a fused projection, `cu_seqlens[::2]`) stays a view, of
    a zero-filled base as the case's own tensor is (clone() would make it
    dense, and a kernel that ignores strides would read other elements)."""
    torch = torch_module()
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



def device_classes(op_namespaces=()) -> "Device":
    """The device stand-ins (see Device). Ops of
    `op_namespaces` pass DeviceMode untouched: the dispatcher parses their
    arguments as given (its type gate) and their kernels enter the mode
    again."""
    torch = torch_module()
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
            ledger = LEDGER.get()
            prop = property_of(func)
            if prop is tensor.device:
                return torch.device("cuda", 0) if is_device(args[0]) else func(*args)
            if prop is tensor.is_cuda:
                return is_device(args[0])
            if func is torch.repeat_interleave and len(args) > 1 and is_device(args[1]) and \
                    kwargs.get("output_size") is None:
                # Without an output_size, ATen's repeat_interleave_common
                # reads the repeats on the host twice (cumsum[-1].item(),
                # then (repeats >= 0).all().item()) unless there are none.
                repeats = plain(args[1])
                try:
                    out = func(*_pytree.tree_map(plain, args), **kwargs)
                except RuntimeError as e:
                    if "repeats can not be negative" in str(e):
                        ledger.host_syncs += ["repeat_interleave: cumsum[-1].item()",
                                              "repeat_interleave: (repeats >= 0).all().item()"]
                    raise
                if repeats.numel() > 0:
                    ledger.host_syncs += ["repeat_interleave: cumsum[-1].item()",
                                          "repeat_interleave: (repeats >= 0).all().item()"]
                return on_device(out)
            if func in (torch.unique_consecutive, tensor.unique_consecutive) and args and \
                    is_device(args[0]):
                # ATen's CUDA unique_consecutive reads its output's length on
                # the host (compute_unique: length.item()), for a non-empty
                # input.
                out = func(*_pytree.tree_map(plain, args), **kwargs)
                if plain(args[0]).numel() > 0:
                    ledger.host_syncs.append("unique_consecutive: the output's length .item()")
                return _pytree.tree_map(on_device, out)
            if func in (torch.nonzero, tensor.nonzero) and args and is_device(args[0]):
                # ATen's CUDA nonzero copies the count of its output to the host.
                out = func(*_pytree.tree_map(plain, args), **kwargs)
                ledger.host_syncs.append("nonzero: the output's size")
                return on_device(out)
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
            if wanted and func in (torch.tensor, torch.as_tensor) and not any_device:
                ledger.host_to_device_copies.append(f"{func.__name__}(device=cuda)")
            out = func(*_pytree.tree_map(plain, args), **_pytree.tree_map(plain, kwargs))
            if wanted or (any_device and wanted is not False):
                out = _pytree.tree_map(on_device, out)
            return out

    return Device(DeviceTensor=DeviceTensor, Mode=DeviceMode, is_device=is_device, plain=plain)


class Device(types.SimpleNamespace):
    """One set of device stand-ins: DeviceTensor (the subclass), Mode (the
    torch function mode), is_device(x) and plain(x) (x as a host tensor)."""


def cuda_repr(self, *, tensor_contents=None):
    """repr() of a device tensor as torch writes a CUDA tensor's: the host
    tensor's text with device='cuda:0' as its first suffix (the dispatcher's
    type error quotes the repr of a list that holds one)."""
    torch = torch_module()
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


# --- the kernels' arguments --------------------------------------------------------------


class Capture:
    """The arguments the backend handed its kernel, for one call."""

    def __init__(self):
        self.kernel: Optional[str] = None
        self.args: Dict[str, Any] = {}


CAPTURE: contextvars.ContextVar = contextvars.ContextVar("varlen_differential_capture")


def record(kernel: str, **args) -> None:
    """A kernel shim's first act: its name and arguments, once per call."""
    capture = CAPTURE.get()
    if capture.kernel is not None:
        raise RuntimeError(f"{kernel} called after {capture.kernel} in one forward")
    capture.kernel = kernel
    capture.args = args


def output_like(q, v, out=None):
    """What a shim returns: `out` when the caller gave one, else zeros of q's
    rows and heads and v's head size, on q's device."""
    if out is not None:
        return out
    torch = torch_module()
    return torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)


@contextlib.contextmanager
def observing() -> Iterator[Tuple[Ledger, Capture]]:
    """A fresh Ledger and Capture for the calls made inside."""
    ledger, capture = Ledger(), Capture()
    tokens = LEDGER.set(ledger), CAPTURE.set(capture)
    try:
        yield ledger, capture
    finally:
        CAPTURE.reset(tokens[1])
        LEDGER.reset(tokens[0])


class Observation:
    """What an engine did with one call."""

    def __init__(self, raised, capture: Capture, ledger: Ledger, kwargs: dict, q_shape: tuple,
                 tensors: Optional[Dict[int, Any]] = None, output=None):
        self.raised = raised  # (type name, message), or None
        self.capture = capture
        self.ledger = ledger
        self.kwargs = kwargs  # as the backend got them (materialized)
        self.q_shape = q_shape
        self.tensors = tensors or {}  # id -> the tensor as the engine got it
        self.output = output  # the engine's result, where the call returns one


# --- the call description's values ---------------------------------------------------------


class SingletonCache:
    """SGLang's SingletonCache as a value a caller may hand an engine that
    has none (vLLM, transformers): an object of a type the engine does not
    know, as faithful mode sees it."""

    def __init__(self, data=None):
        self.data = data



class Materialized:
    """The tensors and values of one call description (varlen._core.faithful_call's
    "call"), each tensor made once per id, strides kept (host_copy), on the
    device when its description says "cuda". `make_cache(data)` builds the
    engine's SingletonCache from its data (None or a tensor)."""

    def __init__(self, device: Device, make_cache: Callable[[Any], Any]):
        self.device = device
        self.make_cache = make_cache
        self.tensors: Dict[int, Any] = {}

    def tensor(self, t: dict):
        key = t["id"]
        if key not in self.tensors:
            host = host_copy(t["__tensor__"])
            self.tensors[key] = (host.as_subclass(self.device.DeviceTensor)
                                 if t["device"] == "cuda" else host)
        return self.tensors[key]

    def value(self, v):
        if isinstance(v, dict) and "__tensor__" in v:
            return self.tensor(v)
        if isinstance(v, dict) and "__cache__" in v:
            data = v["__cache__"]
            return self.make_cache(None if data is None else self.tensor(data))
        if isinstance(v, list):
            return [self.value(item) for item in v]
        if isinstance(v, dict):
            return {key: self.value(item) for key, item in v.items()}
        return v
