"""A case as a standalone script for the engine's own issue tracker.

`python -m varlen repro CASE --emit-python` writes a short script that makes
the case's call on the engine's own class, from its installed package, and
prints what happened beside what faithful mode predicts:

* SGLang: the backend class (`VisionFlash3Attention`, ...) constructed as
  VisionAttention constructs it, then `forward(q, k, v, bsz=, seq_len=,
  cu_seqlens=, **kwargs)`; for the layer entry, with the keywords
  VisionAttention.forward passes its backend (None where the model gave
  nothing);
* vLLM: `MMEncoderAttention(heads, head_size, scale=, num_kv_heads=)` with
  the backend and FlashAttention version of the case's profile set as
  `--mm-encoder-attn-backend` (and `flash_attn_version`) would choose them,
  then `layer(q, k, v, cu_seqlens=, **kwargs)`;
* transformers, direct entry: the attention function registered under the
  profile (`eager_attention_forward` for eager), handed Qwen2.5-VL's vision
  attention module and q, k, v as `[1, heads, tokens, head_dim]`; layer
  entry: that module called as its tower calls it, with its projection
  handing it the case's q, k and v and its output projection the identity;
  tower entry: Qwen3-VL's tower's own step from `grid_thw` to `cu_seqlens`
  (and its max, from 5.15.0) before the same layer call.

Warmup calls come first, in order, each printing its outcome on a line of
its own; a warmup call whose constructor is the case's uses the same object,
as a model's repeated calls do.

Every argument has the case's form: shapes, strides, dtypes, devices, and
the values of every tensor but large workspaces (left empty). q, k and v are
random and seeded (the script reproduces how the call is resolved, not the
case's numbers), or, for a case whose `data` names .npy files (a recording
made with save_data), loaded from those files, which go beside the script. A call that returns prints the output's shape and
its largest difference from each sequence's own attention (float32, torch's
SDPA; not for a window, sinks or a causal mask), which is how a silent
corruption shows; the case's `varlen repro` report judges it with the
float64 oracle and a tolerance. Not emitted yet: Qwen2.5-VL's window tower,
a hub kernel's registration, and graph-mode capture (the environment
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
        self.shapes: Dict[str, List[int]] = {}  # of each named tensor
        self.constructed: Dict[str, List[str]] = {}  # the lines that made each object
        self.uses_strided = False
        self.files: Dict[str, str] = {}

    def begin_call(self, files: Dict[str, str]) -> None:
        """The next call's tensors get their names afresh; `files`: its q, k
        and v's .npy files, when it has them."""
        self.names = {}
        self.files = files

    def construct(self, name: str, lines: List[str]) -> None:
        """The lines that make object `name`, unless the last ones that made
        it were these (a warmup's object is then the case's)."""
        if self.constructed.get(name) != lines:
            self.constructed[name] = lines
            self.lines += lines

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
        self.shapes[name] = shape
        dense = array.is_contiguous()
        if name in self.files:
            loaded = f"load_values({self.files[name]!r}, {dtype})"
            if dense:
                self.lines.append(f"{name} = {loaded}.reshape({shape})")
            else:
                self.lines.append(f"{name} = strided({loaded}, {shape}, {strides})")
                self.uses_strided = True
            return name
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

_LOAD = '''
HERE = os.path.dirname(os.path.abspath(__file__))


def load_values(name, dtype):
    """q, k or v of the case, from its .npy file beside this script."""
    return torch.from_numpy(numpy.load(os.path.join(HERE, name))).to(dtype).to(DEVICE)
'''

_RUN = '''
try:
{body}
except Exception as error:
    print(f"raised {{type(error).__name__}}: {{error}}")
else:
    print(f"returned: an output of shape {{tuple(output.shape)}}")
    print(compare_with_reference(output))
print({prediction!r})
'''

_WARMUP = '''
try:
{body}
except Exception as error:
    print(f"warmup call {number} raised {{type(error).__name__}}: "
          f"{{(str(error).splitlines() or [''])[0]}}")
else:
    print("warmup call {number} returned")
'''

# The intended attention, per sequence in float32, beside a returned output:
# what makes a silent corruption visible to whoever runs the script.
_REFERENCE = '''
SEQ_LENS = {seq_lens}
STARTS = {starts}
SCALE = {scale}


def compare_with_reference(output):
    """The largest difference between the output and each sequence's own
    attention (float32, torch's scaled_dot_product_attention)."""
    heads, kv_heads, head_dim, head_dim_v = {heads}, {kv_heads}, {head_dim}, {head_dim_v}
    rows = q.numel() // (heads * head_dim)
    if output.numel() != rows * heads * head_dim_v or k.numel() != rows * kv_heads * head_dim:
        return f"not compared: an output of {{output.numel()}} elements for {{rows}} rows"
    qs, ks, vs = (x.reshape(rows, n, d).float() for x, n, d in
                  ((q, heads, head_dim), (k, kv_heads, head_dim), (v, kv_heads, head_dim_v)))
    out = output.reshape(rows, heads, head_dim_v).float()
    worst = 0.0
    for start, length in zip(STARTS, SEQ_LENS):
        if length == 0:
            continue
        part = [x[start:start + length].transpose(0, 1) for x in (qs, ks, vs)]
        part[1] = part[1].repeat_interleave(heads // kv_heads, dim=0)
        part[2] = part[2].repeat_interleave(heads // kv_heads, dim=0)
        want = torch.nn.functional.scaled_dot_product_attention(*part, scale=SCALE)
        got = out[start:start + length].transpose(0, 1)
        difference = (got - want).abs().nan_to_num(nan=float("inf"))  # NaN is the worst
        worst = max(worst, difference.max().item())
    return (f"largest difference from each sequence's own attention (float32): {{worst:.3g}} "
            f"over {{sum(SEQ_LENS)}} rows")
'''


def _reference(case: dict) -> str:
    """The reference check of the case's geometry; a geometry with a window,
    sinks or a causal mask is not compared (the script prints why)."""
    g = case["geometry"]
    if g.get("window") not in (None, [-1, -1]) or g.get("sinks") or g.get("causal"):
        return ('\n\ndef compare_with_reference(output):\n'
                '    return "not compared: the case attends within a window, with sinks or '
                'causally"\n')
    lengths = [int(n) for n in g["seq_lens"]]
    padding = g.get("padding", 0)
    gaps = padding if isinstance(padding, list) else [0] * len(lengths) + [padding]
    starts, row = [], 0
    for gap, length in zip(gaps, lengths):
        row += gap
        starts.append(row)
        row += length
    scale = g.get("softmax_scale", float(g["head_dim"]) ** -0.5)
    return _REFERENCE.format(seq_lens=lengths, starts=starts, scale=repr(float(scale)),
                             heads=int(g["num_heads"]), head_dim=int(g["head_dim"]),
                             kv_heads=int(g.get("num_kv_heads", g["num_heads"])),
                             head_dim_v=int(g.get("head_dim_v", g["head_dim"])))


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


def python_script(case_text: str, core=None, path=None) -> str:
    """The script of case `case_text` (its JSON), read from `path` when
    given (a case whose data is in .npy files needs its folder); NotEmitted
    for a case whose call it cannot make."""
    if core is None:
        from varlen import _core as core
    case = json.loads(case_text)
    files = case.get("data", {}).get("files", {})
    if files and path is None:
        raise NotEmitted("the case's q, k and v are in .npy files: emit it from its file")
    source = case_text if path is None else str(path)
    predicted = core.faithful_call(source)
    script = _Script()
    imports: List[str] = []
    # Warmups draw their own values (never the case's files).
    for number, text in enumerate(predicted.get("warmups", []), 1):
        warmup = core.faithful_call(text)
        if "builder_error" in warmup:
            raise NotEmitted(f"warmup call {number}'s metadata builder raises before any call "
                             f"is made: {warmup['builder_error'][1]}")
        script.begin_call({})
        script.lines.append(f"\n# Warmup call {number}, made before the case's own.")
        more, body, _ = _call(warmup["call"], script, json.loads(text))
        imports += [line for line in more if line not in imports]
        script.lines.append(_WARMUP.format(body=_indented(body), number=number).strip("\n"))
    if "builder_error" in predicted:
        raise NotEmitted("the case's metadata builder raises before any call is made: "
                         f"{predicted['builder_error'][1]}")
    d = predicted["call"]
    script.begin_call(files)
    if predicted.get("warmups"):
        script.lines.append("\n# The case's call.")
    more, body, install = _call(d, script, case)
    imports += [line for line in more if line not in imports]
    version = d.get("version", "")
    # A release ("0.5.23"), or a commit of the engine's repository ("0026249").
    install_line = (f"Install the release the case models: pip install \"{install[1]}=={version}\""
                    if "." in version else
                    f"Install the code the case models: {install[0]} at commit {version}")
    header = [f'"""Reproduces the varlen case {case.get("name", "")!r} on '
              f'{install[0]}\'s own code.', "",
              f"Source: {case.get('source', '')}", install_line,
              "Run it on a machine with the platform the case names "
              f"({case.get('platform', 'a CUDA GPU')}): python this_script.py",
              *([f"q, k and v are the case's values: put {', '.join(files.values())} beside "
                 "this script."] if files else []), '"""', "",
              *(["import os", "", "import numpy"] if files else []),
              "import torch", *imports, "", 'DEVICE = "cuda"',
              f"torch.manual_seed({int(case.get('data', {}).get('seed', 0)) % (1 << 63)})"]
    preamble = (_LOAD if files else "") + (_PREAMBLE if script.uses_strided else "") + \
        _reference(case)
    return "\n".join(header) + "\n" + preamble + "\n" + "\n".join(script.lines) + "\n" + \
        _RUN.format(body=_indented(body), prediction=_prediction(predicted, case, source, core))


def _indented(lines: List[str]) -> str:
    return "\n".join("    " + line for line in lines)


def _call(d: dict, script: _Script, case: dict):
    """The lines of call `d` of `case`: (imports, the statements that make
    the call and set `output`, (engine, package)); q, k and v and the
    objects the call needs are added to the script."""
    for name in ("q", "k", "v"):
        script.tensor(d[name], name)
    engine = d.get("engine", "sglang")
    if engine == "sglang":
        return _sglang(d, script)
    if engine == "vllm":
        return _vllm(d, script)
    if engine == "transformers":
        return _transformers(d, script, case)
    raise NotEmitted(f"scripts for {engine} are not emitted yet")


def _sglang(d: dict, script: _Script):
    from varlen import spec
    cls = spec.SGLANG_BACKEND_CLASSES[d["profile"]]
    imports = []
    if d.get("graph_mode"):
        imports = ["import os", 'os.environ["SGLANG_VIT_ENABLE_CUDA_GRAPH"] = "1"']
    imports.append(f"from {SGLANG_MODULE} import {cls}, SingletonCache, "
                   "VisionAttentionMetadata")
    sdpa = d["sdpa"]
    q_shape, k_shape = script.shapes["q"], script.shapes["k"]
    script.construct("backend", [
        f"backend = {cls}(head_dim={q_shape[-1]}, num_heads={q_shape[-2]}, "
        f"num_kv_heads={k_shape[-2]}, dropout=0.0, flatten_batch={bool(sdpa['flatten_batch'])}, "
        f"softmax_in_single_precision={bool(sdpa['softmax_in_single_precision'])}, "
        f"softmax_scale={script.value(sdpa['softmax_scale'])}, use_data_parallel=False, "
        "workspace_buffer=None)"])
    kwargs = dict(d["kwargs"])
    if d.get("forward_metadata") is not None:
        fields = script.value(d["forward_metadata"])
        script.lines.append(f"forward_metadata = VisionAttentionMetadata(**{fields})")
        kwargs_text = ", forward_metadata=forward_metadata" + script.keywords(kwargs)
    else:
        kwargs_text = script.keywords(kwargs)
    body = [] if d["entry"] == "direct" else \
        ["# As VisionAttention.forward calls its backend (None where the model gave nothing)."]
    body.append(f"output = backend.forward(q, k, v, bsz={d['bsz']!r}, seq_len={d['seq_len']!r}, "
                f"cu_seqlens={script.value(d['cu_seqlens'], 'cu_seqlens')}{kwargs_text})")
    return imports, body, ("SGLang", "sglang")


def _vllm(d: dict, script: _Script):
    profile = d["profile"]
    backend, _, version = profile.partition("/fa")
    layer = d["vllm_layer"]
    imports = [f"from {VLLM_LAYER_MODULE} import MMEncoderAttention",
               f"from {VLLM_REGISTRY_MODULE} import AttentionBackendEnum"]
    script.construct("layer", [
        f"layer = MMEncoderAttention({int(layer['num_heads'])}, {int(layer['head_size'])}, "
        f"scale={_literal(layer.get('scale'))}, num_kv_heads={_literal(layer.get('num_kv_heads'))})",
        f"# As --mm-encoder-attn-backend {backend}"
        + (f" with flash_attn_version={version}" if version else "") + " sets the layer up:",
        f"layer.attn_backend = AttentionBackendEnum.{backend}",
        f"layer.is_flash_attn_backend = {backend == 'FLASH_ATTN'}",
        f"layer._fa_version = {int(version) if version else None}"])
    kwargs = dict(d["kwargs"])
    if d.get("forward_metadata") is not None:
        kwargs["forward_metadata"] = d["forward_metadata"]
    named = "" if d.get("cu_seqlens") is None else \
        f", cu_seqlens={script.value(d['cu_seqlens'], 'cu_seqlens')}"
    return imports, [f"output = layer(q, k, v{named}{script.keywords(kwargs)})"], ("vLLM", "vllm")


_GIVEN_PROJECTIONS = [
    "# The layer's projections are the case's q, k and v: its qkv hands them over as",
    "# its reshape, permute and unbind would; its output projection is the identity.",
    "class GivenProjections:",
    "    def reshape(self, *shape):",
    "        return self",
    "",
    "    def permute(self, *dims):",
    "        return self",
    "",
    "    def unbind(self, dim=0):",
    "        return q, k, v",
    "",
    "",
    "module.qkv.forward = lambda hidden_states: GivenProjections()",
    "module.proj.forward = lambda x: x"]


def _release(version: str):
    return tuple(int(part) for part in version.split(".")[:3] if part.isdigit())


def _transformers(d: dict, script: _Script, case: dict):
    from varlen import spec
    profile, entry = d["profile"], d["entry"]
    if profile == spec.TRANSFORMERS_HUB_FLASH:
        raise NotEmitted("a hub kernel's registration (the `kernels` package) is not emitted")
    if d.get("windows"):
        raise NotEmitted("Qwen2.5-VL's window tower (its window index) is not emitted yet")
    models = "transformers.models.qwen2_5_vl"
    imports = [f"from {models}.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig",
               f"from {models}.modeling_qwen2_5_vl import Qwen2_5_VLVisionAttention"]
    geometry = case["geometry"]
    heads, head_dim = int(geometry["num_heads"]), int(geometry["head_dim"])
    construct = [
        "# Qwen2.5-VL's vision attention module (its weights are never read).",
        f"config = Qwen2_5_VLVisionConfig(hidden_size={heads * head_dim}, num_heads={heads}, "
        "depth=1, intermediate_size=8, out_hidden_size=8)",
        f"config._attn_implementation = {profile!r}",
        "module = Qwen2_5_VLVisionAttention(config).eval()"]
    kwargs = dict(d["kwargs"])
    if entry == "direct":
        script.construct("module", construct)
        if profile == "eager":
            imports.append(f"from {models}.modeling_qwen2_5_vl import eager_attention_forward")
            function = "eager_attention_forward"
        else:
            imports.append("from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS")
            function = f"ALL_ATTENTION_FUNCTIONS[{profile!r}]"
        script.lines += ["# [1, heads, tokens, head_dim], as the layer hands them over.",
                         "query, key, value = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))"]
        return imports, [f"output = {function}(module, query, key, value"
                         f"{script.keywords(kwargs)})[0]"], ("transformers", "transformers")
    script.construct("module", construct + _GIVEN_PROJECTIONS)
    script.lines.append("hidden_states = torch.zeros(q.shape[0], 1, device=DEVICE)")
    body, step = [], []
    if entry == "tower":
        tower = "transformers.models.qwen3_vl.modeling_qwen3_vl"
        grid = script.value(kwargs.pop("grid_thw"), "grid_thw")
        script.lines.append(f"kwargs = {script.value(kwargs)}")
        release = _release(d.get("version", ""))
        step.append("# Qwen3-VL's tower, from grid_thw to its blocks' cu_seqlens:")
        if release >= (5, 15):
            imports.append(f"from {tower} import get_vision_attention_seqlens")
            step.append(f"cu_seqlens, max_seqlen = get_vision_attention_seqlens({grid}, config, "
                        "kwargs=kwargs)")
            own = ", max_seqlen=max_seqlen"
        elif release >= (5,):
            imports.append(f"from {tower} import get_vision_cu_seqlens")
            step.append(f"cu_seqlens = get_vision_cu_seqlens({grid}, kwargs=kwargs)")
            own = ""
        else:  # 4.x computes it in the tower's forward
            step += [f"cu_seqlens = torch.repeat_interleave({grid}[:, 1] * {grid}[:, 2], "
                     f"{grid}[:, 0]).cumsum(",
                     f"    dim=0, dtype={grid}.dtype if torch.jit.is_tracing() else torch.int32)",
                     "cu_seqlens = torch.nn.functional.pad(cu_seqlens, (1, 0), value=0)"]
            own = ""
        call = f"module(hidden_states, cu_seqlens=cu_seqlens{own}, " \
            "position_embeddings=angle_zero, **kwargs)"
    else:
        call = f"module(hidden_states, cu_seqlens={script.value(d['cu_seqlens'], 'cu_seqlens')}, " \
            f"position_embeddings=angle_zero{script.keywords(kwargs)})"
    # The rotary embedding at angle zero leaves q's and k's values as they
    # are; a case without it hands the kernel q and k as projected.
    script.lines.append("angle_zero = (torch.ones(q.shape[0], q.shape[-1], device=DEVICE), "
                        "torch.zeros(q.shape[0], q.shape[-1], device=DEVICE))")
    if d.get("rotary"):
        body = step + [f"output = {call}"]
    else:
        imports += ["from unittest import mock",
                    f"from {models} import modeling_qwen2_5_vl"]
        body = step + ["# Without the rotary embedding: q and k reach attention as projected.",
                       "with mock.patch.object(modeling_qwen2_5_vl, "
                       "\"apply_rotary_pos_emb_vision\", lambda q, k, cos, sin: (q, k)):",
                       f"    output = {call}"]
    return imports, body, ("transformers", "transformers")


def script_outcome(stdout: str) -> Any:
    """What an emitted script printed of its call: None for a call that
    returned, else (exception type, message), a message of several lines
    included."""
    lines = stdout.split("\nvarlen's faithful mode predicts:")[0].split("\n")
    while lines and lines[0].startswith("warmup call "):
        lines.pop(0)
    said = "\n".join(lines)
    if said.startswith("returned"):
        return None
    kind, _, message = said[len("raised "):].partition(": ")
    return kind, message
