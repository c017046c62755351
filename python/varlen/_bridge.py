"""The Python half of a Python backend.

The compiled harness (varlen._core) calls an adapter from this module with a
launch (kernel level: tensors that view the harness's own buffers, cu_seqlens,
the max lengths, the scale) or with a description of a whole call (call
level: each argument in the exact form the case names). The adapter turns
that into torch tensors and objects, calls the backend, and hands back what
it did. Nothing here decides anything about attention: resolution, the oracle
and the judgement are the harness's.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Dict, Optional

from varlen import spec


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - exercised without torch only
        raise RuntimeError(f"varlen's Python backends need torch ({e})") from e
    return torch


def _cuda_available() -> bool:
    try:
        return _torch().cuda.is_available()
    except RuntimeError:
        return False


def _device_problem(device: str) -> str:
    """"" when tensors for `device` can be made here, else why not."""
    try:
        _torch()
    except RuntimeError as e:
        return str(e)
    if device == "cuda" and not _cuda_available():
        return "torch sees no CUDA device on this machine"
    return ""


def _as_torch(array):
    """A torch view of an array the harness handed over (DLPack, no copy)."""
    return _torch().from_dlpack(array)


class VisionAttentionMetadata:
    """Stand-in for an engine's prepared metadata, when the backend names none."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return f"VisionAttentionMetadata({', '.join(sorted(self.__dict__))})"


class SingletonCache:
    """Stand-in for SGLang's SingletonCache, when the backend names none."""

    def __init__(self):
        self.data = None

    def set_data(self, data):
        self.data = data

    def get_data(self):
        return self.data

    def empty(self):
        return self.data is None


def _make(cls, fields: Dict[str, Any]):
    try:
        return cls(**fields)
    except TypeError:
        obj = cls.__new__(cls)
        for key, value in fields.items():
            setattr(obj, key, value)
        return obj


class _Materializer:
    """Turns a call description into the objects the caller passes.

    A tensor described once is one object wherever it appears (the harness
    numbers them by storage): a model hands one cu_seqlens to the metadata
    builder and to every layer. Tensors on "cuda" go to the GPU where torch
    has one, and stay on the host where it has none (the harness's tags then
    stand for the device).
    """

    def __init__(self, backend: spec.CallBackend, on_gpu: bool):
        self.backend = backend
        self.on_gpu = on_gpu
        self.tensors: Dict[int, Any] = {}

    def tensor(self, d):
        key = d["id"]
        if key not in self.tensors:
            t = _as_torch(d["__tensor__"])
            if d["device"] == "cuda" and self.on_gpu:
                t = t.to("cuda")
            self.tensors[key] = t
        return self.tensors[key]

    def value(self, v):
        if isinstance(v, dict) and "__tensor__" in v:
            return self.tensor(v)
        if isinstance(v, dict) and "__cache__" in v:
            cache = (self.backend.singleton_cache_class or SingletonCache)()
            if v["__cache__"] is not None:
                cache.set_data(self.tensor(v["__cache__"]))
            return cache
        if isinstance(v, list):
            return [self.value(item) for item in v]
        return v


class _SyncCounter:
    """Host syncs of a call on a real GPU, from torch's CUDA sync debug mode.

    Without a GPU they cannot be observed: counts() is None.
    """

    def __init__(self, active: bool):
        self.active = active
        self.syncs = 0

    def __enter__(self):
        if self.active:
            torch = _torch()
            torch.cuda.synchronize()
            self._mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")
            self._catcher = warnings.catch_warnings(record=True)
            self._records = self._catcher.__enter__()
            warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        if self.active:
            torch = _torch()
            torch.cuda.set_sync_debug_mode(self._mode)
            self._catcher.__exit__(*exc)
            self.syncs = sum("synchroniz" in str(w.message) for w in self._records)
        return False

    def counts(self) -> Optional[dict]:
        if not self.active:
            return None
        return {"host_syncs": self.syncs, "host_to_device_copies": 0, "device_to_host_copies": 0}


def _host_copy(t):
    return t.detach().to("cpu").contiguous()


class KernelAdapter:
    """Runs a spec.KernelBackend on the harness's launches."""

    def __init__(self, backend: spec.KernelBackend):
        self.backend = backend

    def available(self) -> str:
        return _device_problem(self.backend.capabilities.device)

    def run_launch(self, q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   softmax_scale):
        tq, tk, tv, to = (_as_torch(x) for x in (q, k, v, o))
        cq, ck = _as_torch(cu_seqlens_q), _as_torch(cu_seqlens_k)
        target = to
        if self.backend.capabilities.device == "cuda":
            tq, tk, tv, cq, ck = (x.to("cuda") for x in (tq, tk, tv, cq, ck))
            target = to.to("cuda")
        result = self.backend.fn(tq, tk, tv, target, cq, ck, int(max_seqlen_q), int(max_seqlen_k),
                                 float(softmax_scale))
        if result is not None:
            if tuple(result.shape) != tuple(target.shape):
                raise ValueError(f"{self.backend.name} returned shape {tuple(result.shape)}; the "
                                 f"output is {tuple(target.shape)} ([tokens, heads, head_dim_v])")
            if result.dtype != target.dtype:  # copy_ would convert it silently
                raise ValueError(f"{self.backend.name} returned {result.dtype}; the output is "
                                 f"{target.dtype}")
            target.copy_(result)
        if target is not to:
            to.copy_(target.to("cpu"))


class AttentionModule:
    """The module an attention function receives first: the attributes of
    the engine's layer (transformers' VisionAttention: num_heads, head_dim,
    scaling, is_causal, ...) and its config's `_attn_implementation`."""

    def __init__(self, attributes: dict, implementation: str):
        self.__dict__.update(attributes)
        self.config = _Config(implementation)

    def __repr__(self):
        return f"AttentionModule({', '.join(sorted(self.__dict__))})"


class _Config:
    def __init__(self, implementation: str):
        self._attn_implementation = implementation


def _as_interface_layout(t):
    """[T, H, D] token rows as transformers hands them to its attention
    functions: query_states.transpose(0, 1).unsqueeze(0), [1, H, T, D]."""
    return t.transpose(0, 1).unsqueeze(0)


class CallAdapter:
    """Calls a spec.CallBackend as its engine calls it."""

    def __init__(self, backend: spec.CallBackend):
        self.backend = backend

    def available(self) -> str:
        return _device_problem(self.backend.capabilities.device)

    def _context(self, q, k, v, d, sdpa) -> spec.CallContext:
        layer = d.get("vllm_layer")
        if layer is not None:  # MMEncoderAttention(num_heads, head_size, scale, num_kv_heads)
            return spec.CallContext(
                num_heads=layer["num_heads"], num_kv_heads=layer["num_kv_heads"],
                head_dim=layer["head_size"], head_dim_v=layer["head_size"], dtype=q.dtype,
                device=q.device.type, profile=d["profile"], engine=self.backend.engine,
                version=d["version"], entry=d["entry"], graph_mode=False,
                softmax_scale=layer["scale"])
        return spec.CallContext(
            num_heads=int(q.shape[-2]), num_kv_heads=int(k.shape[-2]), head_dim=int(q.shape[-1]),
            head_dim_v=int(v.shape[-1]), dtype=q.dtype, device=q.device.type,
            profile=d["profile"], engine=self.backend.engine, version=d["version"],
            entry=d["entry"], graph_mode=bool(d["graph_mode"]),
            flatten_batch=bool(sdpa["flatten_batch"]),
            softmax_in_single_precision=bool(sdpa["softmax_in_single_precision"]),
            softmax_scale=sdpa["softmax_scale"])

    def _call_function(self, d: dict, m: "_Materializer", fn) -> Any:
        """The engine's calls of an attention function (transformers'
        VisionAttention: one over the pack, `out, _ = fn(...)`, or one per
        sequence, `fn(...)[0]`, joined with torch.cat(..., dim=1)), and the
        layer's reshape(seq_length, -1).contiguous() of the result. The
        calls are described apart from the whole call: their tensors are
        numbered on their own."""
        tokens = int(m.tensor(d["q"]).shape[0])
        m = _Materializer(self.backend, m.on_gpu)
        module = AttentionModule({key: m.value(value) for key, value in d["module"].items()},
                                 self.backend.profile)
        outputs = []
        for c in d["function_calls"]:
            q, k, v = (_as_interface_layout(m.tensor(c[x])) for x in ("q", "k", "v"))
            kwargs = {key: m.value(value) for key, value in c["kwargs"].items()}
            if c["unpacks_result"]:
                out, _ = fn(module, q, k, v, **kwargs)
            else:
                out = fn(module, q, k, v, **kwargs)[0]
            outputs.append(out)
        out = outputs[0] if d["function_calls"][0]["unpacks_result"] else \
            _torch().cat(outputs, dim=1)
        return out.reshape(tokens, -1).contiguous()

    def call(self, d: dict) -> dict:
        on_gpu = self.backend.capabilities.device == "cuda" and _cuda_available()
        m = _Materializer(self.backend, on_gpu)
        q, k, v = m.tensor(d["q"]), m.tensor(d["k"]), m.tensor(d["v"])
        kwargs = {key: m.value(value) for key, value in d["kwargs"].items()}
        if d["forward_metadata"] is not None:
            fields = {key: m.value(value) for key, value in d["forward_metadata"].items()}
            kwargs["forward_metadata"] = _make(
                self.backend.metadata_class or VisionAttentionMetadata, fields)
        # The constructor's softmax_scale is the caller's value, in its form.
        sdpa = dict(d["sdpa"], softmax_scale=m.value(d["sdpa"]["softmax_scale"]))
        obj = self.backend.make(self._context(q, k, v, d, sdpa))
        result = {"raised": None, "output": None, "device_events": None}
        with _SyncCounter(on_gpu) as syncs:
            try:
                if "function_calls" in d:
                    out = self._call_function(d, m, obj)
                elif self.backend.engine == "vllm":  # forward(query, key, value, **keywords)
                    out = obj.forward(q, k, v, cu_seqlens=m.value(d["cu_seqlens"]), **kwargs)
                else:
                    out = obj.forward(q, k, v, bsz=d["bsz"], seq_len=d["seq_len"],
                                      cu_seqlens=m.value(d["cu_seqlens"]), **kwargs)
                if d["entry"] == "layer" and "function_calls" not in d:
                    out.dim()  # what VisionAttention does with the result first
            except Exception as e:  # the engine's exception is the observation
                result["raised"] = (type(e).__name__, str(e))
                out = None
        result["device_events"] = syncs.counts()
        if out is not None:
            torch = _torch()
            if not isinstance(out, torch.Tensor):
                result["raised"] = ("TypeError", f"forward returned a {type(out).__name__}, "
                                                 "not a tensor")
            else:
                result["output"] = _host_copy(out)
        return result

    def run_launch(self, q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   softmax_scale):
        """A ground-truth launch as the engine's plainest correct call: the
        offsets and the max as keyword arguments, one batch item (vLLM: the
        layer's scale is the launch's, given at construction)."""
        del cu_seqlens_k, max_seqlen_k  # self-attention: one set of offsets
        torch = _torch()
        on_gpu = self.backend.capabilities.device == "cuda" and _cuda_available()
        device = "cuda" if on_gpu else "cpu"
        cu = _as_torch(cu_seqlens_q)
        tokens = int(cu[-1])
        tq, tk, tv = (_as_torch(x)[:tokens].to(device) for x in (q, k, v))
        to = _as_torch(o)
        ctx = spec.CallContext(
            num_heads=int(tq.shape[1]), num_kv_heads=int(tk.shape[1]), head_dim=int(tq.shape[2]),
            head_dim_v=int(tv.shape[2]), dtype=tq.dtype, device=device,
            profile=self.backend.profile, engine=self.backend.engine,
            version=self.backend.version, entry="direct", graph_mode=False, flatten_batch=True,
            softmax_in_single_precision=False, softmax_scale=float(softmax_scale))
        cu = cu.to(device=device, dtype=torch.int32)
        if self.backend.engine == "transformers":
            out = self._launch_function(ctx, tq, tk, tv, cu, int(max_seqlen_q))
        elif self.backend.engine == "vllm":
            # A vLLM model's call: [1, T, H, D] and a 0-d host int32 max.
            out = self.backend.make(ctx).forward(
                tq[None], tk[None], tv[None], cu_seqlens=cu,
                max_seqlen=torch.tensor(int(max_seqlen_q), dtype=torch.int32))
        else:
            out = self.backend.make(ctx).forward(
                tq, tk, tv, bsz=1, seq_len=tokens, cu_seqlens=cu, max_seqlen=int(max_seqlen_q),
                softmax_scale=float(softmax_scale))
        to[:tokens].copy_(out.reshape(to[:tokens].shape).to("cpu"))

    def _launch_function(self, ctx, q, k, v, cu, max_seqlen):
        """A launch as transformers' 5.15.0-on layer makes it: a flash name
        one call with the four varlen keywords and an int max, any other
        name one call per sequence."""
        fn = self.backend.make(ctx)
        module = AttentionModule(
            {"num_heads": ctx.num_heads, "head_dim": ctx.head_dim, "scaling": ctx.softmax_scale,
             "attention_dropout": 0.0, "is_causal": False, "training": False,
             "num_key_value_groups": 1}, self.backend.profile)
        common = {"attention_mask": None, "scaling": ctx.softmax_scale, "dropout": 0.0}
        if "flash" in self.backend.profile:
            out, _ = fn(module, *(_as_interface_layout(x) for x in (q, k, v)), **common,
                        cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max_seqlen,
                        max_length_k=max_seqlen, is_causal=False)
            return out
        lengths = (cu[1:] - cu[:-1]).tolist()
        chunks = zip(*(_as_interface_layout(x).split(lengths, dim=2) for x in (q, k, v)))
        return _torch().cat([fn(module, *chunk, **common, is_causal=False)[0]
                             for chunk in chunks], dim=1)


def adapter_for(backend):
    if isinstance(backend, spec.KernelBackend):
        return KernelAdapter(backend)
    if isinstance(backend, spec.CallBackend):
        return CallAdapter(backend)
    raise TypeError(f"{backend!r} is neither a varlen.KernelBackend nor a varlen.CallBackend")


def capabilities_dict(caps: spec.Capabilities) -> dict:
    return dataclasses.asdict(caps)
