"""A case as a standalone script for the engine's own issue tracker.

`python -m varlen repro CASE --emit-python` writes a short script that makes
the case's call on the engine's own class, from its installed package, and
prints what happened beside what faithful mode predicts:

* SGLang, direct entry: the backend class (`VisionFlash3Attention`, ...)
  constructed as VisionAttention constructs it, then
  `forward(q, k, v, bsz=, seq_len=, cu_seqlens=, **kwargs)`;
* vLLM: `MMEncoderAttention(heads, head_size, scale=, num_kv_heads=)` with
  the backend and FlashAttention version of the case's profile set as
  `--mm-encoder-attn-backend` (and `flash_attn_version`) would choose them,
  then `layer(q, k, v, cu_seqlens=, **kwargs)`.

Every argument has the case's form: shapes, strides, dtypes, devices, and
the values of every tensor but q, k and v (random, seeded: the script
reproduces how the call is resolved, not the case's numbers) and of large
workspaces (left empty). The script does not judge the output: a call that
returns prints the output's shape, and the case's `varlen repro` report is
where a silent corruption shows. Not emitted yet: SGLang's layer entry,
transformers, warmup calls, and graph-mode capture (the environment
variable is set, the capture is not made).
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List

# Tensors of more elements than this, other than q, k and v, are workspaces:
# emitted empty, of their shape.
LITERAL_ELEMENTS = 1 << 16

SGLANG_MODULE = "sglang.srt.layers.attention.vision"
VLLM_LAYER_MODULE = "vllm.model_executor.layers.attention.mm_encoder_attention"
VLLM_REGISTRY_MODULE = "vllm.v1.attention.backends.registry"


class NotEmitted(ValueError):
    """A case whose call the script cannot make yet; the message says why."""


def _literal(x) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return f'float("{x}")'
    return repr(x)


class _Script:
    """The lines of one script: tensors get a name each, once per id."""

    def __init__(self):
        self.lines: List[str] = []
        self.names: Dict[int, str] = {}
        self.uses_strided = False

    def tensor(self, t: dict, name: str = "") -> str:
        import torch
        key = t["id"]
        if key in self.names:
            return self.names[key]
        array = torch.from_dlpack(t["__tensor__"])
        if not name or name in self.names.values():
            name = f"t{len(self.names)}"
        self.names[key] = name
        dtype = f"torch.{str(array.dtype).replace('torch.', '')}"
        device = "DEVICE" if t["device"] == "cuda" else '"cpu"'
        shape, strides = list(array.shape), list(array.stride())
        dense = array.is_contiguous()
        if name in ("q", "k", "v") or array.numel() > LITERAL_ELEMENTS:
            make = "torch.randn" if name in ("q", "k", "v") else "torch.empty"
            if dense:
                self.lines.append(f"{name} = {make}({shape}, dtype={dtype}, device={device})")
            else:
                extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
                self.lines.append(f"{name} = {make}({extent}, dtype={dtype}, "
                                  f"device={device}).as_strided({shape}, {strides})")
            return name
        values = [_literal(v) for v in array.reshape(-1).tolist()]
        literal = f"torch.tensor([{', '.join(values)}], dtype={dtype}, device={device})"
        if dense:
            reshape = "" if len(shape) == 1 else f".reshape({shape})"
            self.lines.append(f"{name} = {literal}{reshape}")
        else:
            self.lines.append(f"{name} = strided({literal}, {shape}, {strides})")
            self.uses_strided = True
        return name

    def value(self, v, name: str = "") -> str:
        """`v` as an expression; a tensor becomes a variable, named `name`
        where it can be."""
        if isinstance(v, dict) and "__tensor__" in v:
            return self.tensor(v, name if name.isidentifier() else "")
        if isinstance(v, dict) and "__cache__" in v:
            data = v["__cache__"]
            name = f"cache{len(self.lines)}"
            self.lines.append(f"{name} = SingletonCache()")
            if data is not None:
                self.lines.append(f"{name}.set_data({self.tensor(data)})")
            return name
        if isinstance(v, list):
            return "[" + ", ".join(self.value(item) for item in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {self.value(item)}" for k, item in v.items()) + "}"
        return _literal(v)

    def keywords(self, kwargs: dict) -> str:
        return "".join(f", {key}={self.value(value, key)}" if key.isidentifier()
                       else f", **{{{key!r}: {self.value(value)}}}"
                       for key, value in kwargs.items())


_PREAMBLE = '''
def strided(values, shape, strides):
    """A view of `shape` and `strides` holding `values` (the rows between are zeros)."""
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    out = torch.zeros(extent, dtype=values.dtype, device=values.device)
    out = out.as_strided(shape, strides)
    out.copy_(values.reshape(shape))
    return out
'''

_RUN = '''
try:
    output = {call}
    print(f"returned: an output of shape {{tuple(output.shape)}}")
except Exception as error:
    print(f"raised {{type(error).__name__}}: {{error}}")
print({prediction!r})
'''


def _prediction(predicted: dict, case: dict, case_text: str, core) -> str:
    """What faithful mode says the call does: the resolution's exception,
    else the kernel entry's, else the one raised after the kernel returned."""
    from varlen.engines import compare
    raised = predicted.get("raised")
    if raised is None:
        raised = compare.kernel_prediction(core, case_text) or predicted.get("after_kernel")
    said = f"raised {raised[0]}: {raised[1]}" if raised else "returned"
    if raised and raised[0] == "Unimplemented":
        said = f"not modelled: {raised[1]}"
    expect = case.get("expect", {})
    if expect.get("outcome") == "silent_corruption":
        said += " (a silent corruption: `varlen repro` compares the output)"
    return f"varlen's faithful mode predicts: {said}"


def python_script(case_text: str, core=None) -> str:
    """The script of case `case_text` (its JSON); NotEmitted for a case whose
    call it cannot make."""
    if core is None:
        from varlen import _core as core
    case = json.loads(case_text)
    if case.get("warmup"):
        raise NotEmitted("the case's warmup calls are not emitted yet")
    predicted = core.faithful_call(case_text)
    if "builder_error" in predicted:
        raise NotEmitted("the case's metadata builder raises before any call is made: "
                         f"{predicted['builder_error'][1]}")
    d = predicted["call"]
    engine = d.get("engine", "sglang")
    script = _Script()
    for name in ("q", "k", "v"):
        script.tensor(d[name], name)
    if engine == "sglang":
        imports, call, install = _sglang(d, script)
    elif engine == "vllm":
        imports, call, install = _vllm(d, script)
    else:
        raise NotEmitted(f"scripts for {engine} are not emitted yet")
    version = d.get("version", "")
    header = [f'"""Reproduces the varlen case {case.get("name", "")!r} on '
              f'{install[0]}\'s own code.', "",
              f"Source: {case.get('source', '')}",
              f"Install the release the case models: pip install \"{install[1]}=={version}\"",
              "Run it on a machine with the platform the case names "
              f"({case.get('platform', 'a CUDA GPU')}): python this_script.py", '"""', "",
              "import torch", *imports, "", 'DEVICE = "cuda"',
              f"torch.manual_seed({int(case.get('data', {}).get('seed', 0)) % (1 << 63)})"]
    preamble = _PREAMBLE if script.uses_strided else ""
    return "\n".join(header) + "\n" + preamble + "\n" + "\n".join(script.lines) + "\n" + \
        _RUN.format(call=call, prediction=_prediction(predicted, case, case_text, core))


def _sglang(d: dict, script: _Script):
    from varlen import spec
    if d["entry"] != "direct":
        raise NotEmitted(f"SGLang's {d['entry']} entry is not emitted yet (only direct calls)")
    cls = spec.SGLANG_BACKEND_CLASSES[d["profile"]]
    imports = []
    if d.get("graph_mode"):
        imports = ["import os", 'os.environ["SGLANG_VIT_ENABLE_CUDA_GRAPH"] = "1"']
    imports.append(f"from {SGLANG_MODULE} import {cls}, SingletonCache, "
                   "VisionAttentionMetadata")
    sdpa = d["sdpa"]
    script.lines.append(
        f"backend = {cls}(head_dim=q.shape[-1], num_heads=q.shape[-2], "
        f"num_kv_heads=k.shape[-2], dropout=0.0, flatten_batch={bool(sdpa['flatten_batch'])}, "
        f"softmax_in_single_precision={bool(sdpa['softmax_in_single_precision'])}, "
        f"softmax_scale={script.value(sdpa['softmax_scale'])}, use_data_parallel=False, "
        "workspace_buffer=None)")
    kwargs = dict(d["kwargs"])
    if d.get("forward_metadata") is not None:
        fields = script.value(d["forward_metadata"])
        script.lines.append(f"forward_metadata = VisionAttentionMetadata(**{fields})")
        kwargs_text = ", forward_metadata=forward_metadata" + script.keywords(kwargs)
    else:
        kwargs_text = script.keywords(kwargs)
    call = (f"backend.forward(q, k, v, bsz={d['bsz']!r}, seq_len={d['seq_len']!r}, "
            f"cu_seqlens={script.value(d['cu_seqlens'], 'cu_seqlens')}{kwargs_text})")
    return imports, call, ("SGLang", "sglang")


def _vllm(d: dict, script: _Script):
    profile = d["profile"]
    backend, _, version = profile.partition("/fa")
    layer = d["vllm_layer"]
    imports = [f"from {VLLM_LAYER_MODULE} import MMEncoderAttention",
               f"from {VLLM_REGISTRY_MODULE} import AttentionBackendEnum"]
    script.lines.append(
        f"layer = MMEncoderAttention({int(layer['num_heads'])}, {int(layer['head_size'])}, "
        f"scale={_literal(layer.get('scale'))}, num_kv_heads={_literal(layer.get('num_kv_heads'))})")
    script.lines.append(f"# As --mm-encoder-attn-backend {backend}"
                        + (f" with flash_attn_version={version}" if version else "")
                        + " sets the layer up:")
    script.lines.append(f"layer.attn_backend = AttentionBackendEnum.{backend}")
    script.lines.append(f"layer.is_flash_attn_backend = {backend == 'FLASH_ATTN'}")
    script.lines.append(f"layer._fa_version = {int(version) if version else None}")
    kwargs = dict(d["kwargs"])
    if d.get("forward_metadata") is not None:
        kwargs["forward_metadata"] = d["forward_metadata"]
    named = "" if d.get("cu_seqlens") is None else \
        f", cu_seqlens={script.value(d['cu_seqlens'], 'cu_seqlens')}"
    call = f"layer(q, k, v{named}{script.keywords(kwargs)})"
    return imports, call, ("vLLM", "vllm")


def script_outcome(stdout: str) -> Any:
    """What an emitted script printed of its call: None for a call that
    returned, else (exception type, message), a message of several lines
    included."""
    said = stdout.split("\nvarlen's faithful mode predicts:")[0]
    if said.startswith("returned"):
        return None
    kind, _, message = said[len("raised "):].partition(": ")
    return kind, message
