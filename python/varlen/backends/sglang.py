"""SGLang 0.5.23's own vision attention code as varlen backends, read from its wheel.

Nothing of SGLang is copied into varlen or pip-installed (its dependencies are
several GB): at import this module opens SGLang's wheel with zipfile, checks
the SHA-256 of the two files it uses, and compiles them in memory:

* sglang/kernels/ops/attention/prefill_attention.py
  (SHA-256 eb158c4c03e69091eb95a1bce093c9b054ac1ca5aab12769063d2e84630ca7f3),
  loaded whole: the Triton kernel _fwd_kernel and its launcher
  context_attention_fwd, which VisionTritonAttention calls.
* sglang/srt/layers/attention/vision.py
  (SHA-256 cf52c360c4ad29d2214cd389d676df0329f4ab38071c6416e1de6a6a70b0d1a0),
  from which the definitions below are extracted by AST, unchanged, with the
  module-level definitions and imports they reach: SingletonCache,
  VisionAttentionMetadata, prepare_vision_attention_metadata,
  prepare_flashinfer_cudnn_vision_attention_metadata (and the BATCH_BUCKETS,
  FLASHINFER_MAX_SEQLEN_BUCKETS constants it reads), _get_cu_seqlens_for_shape,
  resolve_seqlens, resolve_max_seqlen, resolve_precomputed_max_seqlen,
  VisionSdpaAttention and VisionTritonAttention. The extracted code is a module
  registered in sys.modules (dataclasses look their class's module up there);
  `vision` below is that module.

The wheel is $VARLEN_SGLANG_WHEEL, else the newest
build/python-env/wheels/sglang-0.5.23-*.whl of the repository (scripts/python-env
downloads sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl, SHA-256
00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937). Without it,
or without torch and triton, BACKENDS is empty; UNAVAILABLE_REASON says why
whenever any backend is left out (it is None when all four are there).

Stubs, the only code of this module that SGLang's code sees, each standing for
an SGLang import the extracted code makes:

* for prefill_attention.py, `sglang.srt.utils.is_cuda` and `is_hip`, both
  returning False, so the module's import does not query a GPU; the module's
  `_is_cuda` is then set to True and its `CUDA_CAPABILITY` to (9, 0), which is
  what context_attention_fwd reads to choose its tiles: 128 tokens, as on an
  H100/H200 (64 on anything below sm90);
* for vision.py, `envs.SGLANG_VIT_ENABLE_CUDA_GRAPH`, an object whose get()
  returns the graph mode of the CallContext the backend object was made from
  (SGLang reads the environment variable on every call; here each object
  carries its own), and `context_attention_fwd`, the real kernel above.

The kernel runs under Triton's interpreter, on CPU tensors (or CUDA tensors,
which the interpreter copies to the host and back), with the interpreter's
integer-overflow checks off (sanitize_overflow): they are device_asserts, which
a GPU build compiles only in debug mode, and they took about 40 % of an
interpreted launch. Triton decides at
`@triton.jit` time whether a function is interpreted, and triton.language's
own jit functions (tl.zeros among them) are decorated when triton is
imported, so TRITON_INTERPRET=1 must be set before anything imports triton:
this module sets it when triton is not imported yet, which turns the
interpreter on for the whole process. Import it first (or set
TRITON_INTERPRET=1 yourself); where triton was imported without it, the
three backends that launch the kernel are left out and UNAVAILABLE_REASON
says so. The interpreter
keeps its grid position in one global builder, so every launch here holds one
lock.

Backends:

* sglang_triton_kernel (kernel level): context_attention_fwd launched as
  VisionTritonAttention launches it: b_start_loc = cu_seqlens (all B+1
  offsets), b_seq_len = their differences as int32 on q's device,
  max_input_len = max_seqlen_q (unchecked, as in SGLang: a value below a real
  length shrinks the grid, and rows past the 128-token tiles it covers stay
  unwritten), is_causal=False, sm_scale = softmax_scale. The kernel indexes
  the head dim without a stride, so a q, k, v or o whose last stride is not 1
  goes through a contiguous copy (SGLang hands it none such); cu_seqlens_k
  must equal cu_seqlens_q.
* sglang_triton_kernel_bf16_interpreter_fix: the same, with Triton's
  interpreter fixed for bfloat16 during the call (see bf16_interpreter_fix).
* sglang_vision_sdpa, sglang_vision_triton (call level, profiles "sdpa" and
  "triton_attn"): SGLang's VisionSdpaAttention and VisionTritonAttention,
  constructed as VisionAttention constructs them; the triton one runs the
  unfixed kernel. make() returns an EngineCall whose forward() is the SGLang
  object's own.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import contextvars
import glob
import os
import sys
import threading
import types
from pathlib import Path

# Before anything of this module imports triton: see the docstring.
if "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"

from varlen import kernel_entry, spec  # noqa: E402
from varlen.engines import source as _engine_source  # noqa: E402
from varlen.engines.source import Unavailable as _Unavailable  # noqa: E402

SGLANG_VERSION = "0.5.23"
KERNEL_FILE = "sglang/kernels/ops/attention/prefill_attention.py"
KERNEL_SHA256 = "eb158c4c03e69091eb95a1bce093c9b054ac1ca5aab12769063d2e84630ca7f3"
VISION_FILE = "sglang/srt/layers/attention/vision.py"
VISION_SHA256 = "cf52c360c4ad29d2214cd389d676df0329f4ab38071c6416e1de6a6a70b0d1a0"

# What is taken from vision.py; the extraction adds what these reach.
VISION_ROOTS = (
    "SingletonCache",
    "VisionAttentionMetadata",
    "prepare_vision_attention_metadata",
    "prepare_flashinfer_cudnn_vision_attention_metadata",
    "_get_cu_seqlens_for_shape",
    "resolve_seqlens",
    "resolve_max_seqlen",
    "resolve_precomputed_max_seqlen",
    "VisionSdpaAttention",
    "VisionTritonAttention",
)
# Imports of vision.py kept as they are; any other import a root reaches must
# be stubbed, else the extraction fails naming it.
REAL_MODULES = ("__future__", "dataclasses", "functools", "math", "warnings", "typing",
                "torch", "torch.nn", "torch.nn.functional", "einops")

# The interpreter's builder is global state (the grid position, and the bf16
# fix while it is on): one launch at a time.
INTERPRETER_LOCK = threading.RLock()

# Interpreted kernel launches are slow (about a second per 100 tokens and 4
# heads on one core); larger cases are "not supported" rather than minutes long.
INTERPRETER_MAX_TOKENS = 1024

UNAVAILABLE_REASON: str | None = None
BACKENDS: list = []
WHEEL: str | None = None
vision = None  # the module extracted from vision.py
kernel = None  # the module loaded from prefill_attention.py


_MISSING = object()


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def find_wheel() -> str:
    """The SGLang wheel to read: $VARLEN_SGLANG_WHEEL, else the newest (by modification time)
    sglang-0.5.23-*.whl in the source tree's build/python-env/wheels."""
    explicit = os.environ.get("VARLEN_SGLANG_WHEEL")
    if explicit:
        if not os.path.isfile(explicit):
            raise _Unavailable(f"VARLEN_SGLANG_WHEEL={explicit!r} is not a file")
        return explicit
    pattern = str(_repo_root() / "build" / "python-env" / "wheels" / f"sglang-{SGLANG_VERSION}-*.whl")
    found = sorted(glob.glob(pattern), key=os.path.getmtime)
    if not found:
        raise _Unavailable(f"no SGLang {SGLANG_VERSION} wheel: set VARLEN_SGLANG_WHEEL or run "
                           f"scripts/python-env (looked for {pattern})")
    return found[-1]


# --- prefill_attention.py -------------------------------------------------------------


def _interpreter_reason():
    """Why Triton's interpreter cannot run the kernel here, or None."""
    import triton
    import triton.language as tl

    if type(tl.standard.zeros).__name__ != "InterpretedFunction":
        return ("triton was imported before varlen.backends.sglang without TRITON_INTERPRET=1, "
                "so triton.language's own functions are compiled ones and the interpreter cannot "
                "run SGLang's kernel: import varlen.backends.sglang first, or set TRITON_INTERPRET=1")
    return None


def _read(wheel: str, member: str, sha256: str) -> str:
    return _engine_source.read_member(wheel, member, sha256, f"the SGLang {SGLANG_VERSION} code")


def _load_kernel(wheel: str):
    import triton

    source = _read(wheel, KERNEL_FILE, KERNEL_SHA256)
    filename = f"{wheel}/{KERNEL_FILE}"
    utils = types.ModuleType("sglang.srt.utils")
    utils.is_cuda = lambda: False
    utils.is_hip = lambda: False

    def stubbed_import(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "sglang.srt.utils":
            return utils
        if name.split(".")[0] == "sglang":
            raise ImportError(f"{KERNEL_FILE} imports {name}, which varlen does not stub")
        return builtins.__import__(name, globals, locals, fromlist, level)

    module = types.ModuleType(f"{__name__}.prefill_attention")
    module.__file__ = filename
    module.__builtins__ = dict(vars(builtins), __import__=stubbed_import)
    sys.modules[module.__name__] = module
    try:
        with triton.knobs.runtime.scope():
            triton.knobs.runtime.interpret = True
            _engine_source.compile_into(module, source, ast.parse(source, filename), filename)
    except BaseException:
        del sys.modules[module.__name__]
        raise
    if type(module._fwd_kernel).__name__ != "InterpretedFunction":
        raise RuntimeError(f"{KERNEL_FILE}: _fwd_kernel was not made an interpreted function "
                           f"(it is a {type(module._fwd_kernel).__name__})")
    module._fwd_kernel = _BehindGpuLauncher(module._fwd_kernel)
    # The tiles of an H100/H200 (context_attention_fwd: BLOCK = 128 when
    # CUDA_CAPABILITY[0] > 8 on CUDA, else 64).
    module._is_cuda = True
    module.CUDA_CAPABILITY = (9, 0)
    return module


class _BehindGpuLauncher:
    """An interpreted kernel launched as a GPU launches it: `kernel[grid](...)`
    first does what Triton's GPU launcher does with the grid (three C ints: a
    float is a TypeError, a value past a C int an OverflowError; a grid of no
    blocks launches nothing; kernel_entry.triton_launch_grid), where the
    interpreter would iterate range() over it, then runs the interpreter on
    the parsed grid. Every tensor here stands for a device tensor."""

    def __init__(self, interpreted):
        self.interpreted = interpreted

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            blocks = kernel_entry.triton_launch_grid(grid, args, is_device=lambda t: True)
            if blocks is not None:
                self.interpreted[blocks](*args, **kwargs)
        return launch


# --- vision.py ------------------------------------------------------------------------

_GRAPH_MODE = contextvars.ContextVar("varlen_sglang_vit_cuda_graph", default=False)


class _GraphModeSwitch:
    """Stands for SGLang's envs.SGLANG_VIT_ENABLE_CUDA_GRAPH (an EnvBool, False by default)."""

    def get(self) -> bool:
        return _GRAPH_MODE.get()


def _load_vision(wheel: str, kernel_launcher):
    source = _read(wheel, VISION_FILE, VISION_SHA256)
    stubs = {
        "envs": types.SimpleNamespace(SGLANG_VIT_ENABLE_CUDA_GRAPH=_GraphModeSwitch()),
        "context_attention_fwd": kernel_launcher,
    }
    return _engine_source.load_module(f"{__name__}.vision", source, f"{wheel}/{VISION_FILE}",
                                      VISION_ROOTS, stubs, REAL_MODULES)


# --- Triton's interpreter and bfloat16 ------------------------------------------------


@contextlib.contextmanager
def bf16_interpreter_fix():
    """Fixes Triton 3.9's interpreter for bfloat16 while the block runs.

    The interpreter stores a bfloat16 tensor as numpy uint16 holding its bit
    pattern (numpy has no bfloat16). Two of its operations then go wrong (Triton
    issue 11584; the proposed fix was declined):

    * tl.dot (InterpreterBuilder.create_dot) hands those uint16 arrays to
      np.matmul, which multiplies the bit patterns as integers: scores near
      1e9 instead of near 1;
    * a float32 -> bfloat16 cast (InterpreterBuilder.cast_impl, reached from
      fp_trunc, as in `p.to(v.dtype)` and in tl.store into a bfloat16 tensor)
      drops the low 16 bits, rounding toward zero, where a GPU rounds to
      nearest even.

    The fix replaces exactly these two methods on the interpreter's one builder
    object (triton.runtime.interpreter.interpreter_builder), for this block
    only: create_dot first widens bfloat16 operands to float32 (exact: the bits
    shifted up by 16), and cast_impl rounds float32 -> bfloat16 to nearest
    even (NaN stays a quiet NaN). Every other operation, and every dtype other
    than bfloat16, goes to the interpreter's own code. Hold INTERPRETER_LOCK
    around the block: the builder is shared by every interpreted launch.
    """
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    own_dot, own_cast = builder.create_dot, builder.cast_impl
    saved = {name: builder.__dict__.get(name, _MISSING) for name in ("create_dot", "cast_impl")}

    def widen(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        wide = (handle.data.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return interpreter.TensorHandle(wide, tl.float32)

    def create_dot(a, b, d, input_precision, max_num_imprecise_acc):
        return own_dot(widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    def cast_impl(src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            x = np.asarray(src.data, dtype=np.float32)
            bits = x.view(np.uint32)
            nearest_even = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
                            >> np.uint32(16))
            quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
            data = np.where(np.isnan(x), quiet_nan, nearest_even).astype(np.uint16)
            return interpreter.TensorHandle(data, tl.bfloat16)
        return own_cast(src, dst_type)

    builder.create_dot, builder.cast_impl = create_dot, cast_impl
    try:
        yield
    finally:
        for name, value in saved.items():  # the class's own methods again (or an outer fix's)
            if value is _MISSING:
                builder.__dict__.pop(name, None)
            else:
                builder.__dict__[name] = value


# --- the backends ---------------------------------------------------------------------


def _unit_last_stride(t):
    # The kernel indexes the head dim as offs_d without a stride (SGLang hands
    # it views whose only non-unit strides are over tokens and heads).
    return t if t.stride(-1) == 1 else t.contiguous()


def _kernel_launch(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale):
    import torch

    if cu_seqlens_q is not cu_seqlens_k and not torch.equal(cu_seqlens_q.cpu(), cu_seqlens_k.cpu()):
        raise ValueError("cu_seqlens_k differs from cu_seqlens_q: SGLang's vision kernel takes one set "
                         "of offsets for queries and keys (self-attention)")
    if v.shape[-1] != q.shape[-1]:
        raise ValueError(f"v's head dim {v.shape[-1]} differs from q's {q.shape[-1]}: the kernel "
                         "uses one head dim for q, k, v and o")
    seq_lens = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).to(device=q.device, dtype=torch.int32)
    out = o if o.stride(-1) == 1 else torch.empty_like(o, memory_format=torch.contiguous_format)
    with INTERPRETER_LOCK:
        kernel.context_attention_fwd(_unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v),
                                     out, cu_seqlens_q, seq_lens, int(max_seqlen_q),
                                     is_causal=False, sm_scale=softmax_scale)
    if out is not o:
        o.copy_(out)


def launch_kernel(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale):
    """sglang_triton_kernel: SGLang's context_attention_fwd under Triton's own interpreter."""
    _kernel_launch(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale)


def launch_kernel_bf16_fix(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale):
    """sglang_triton_kernel_bf16_interpreter_fix: the same launch inside bf16_interpreter_fix()."""
    with INTERPRETER_LOCK, bf16_interpreter_fix():
        _kernel_launch(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale)


class EngineCall:
    """An SGLang attention backend object as the harness calls it.

    forward(*args, **kwargs) goes to the SGLang object's own forward unchanged,
    with SGLANG_VIT_ENABLE_CUDA_GRAPH reading as this object's graph mode, and
    under INTERPRETER_LOCK for the Triton backend. `backend` is the SGLang
    object itself.
    """

    def __init__(self, backend, graph_mode: bool, interpreted: bool):
        self.backend = backend
        self.graph_mode = bool(graph_mode)
        self._lock = INTERPRETER_LOCK if interpreted else contextlib.nullcontext()

    def forward(self, *args, **kwargs):
        token = _GRAPH_MODE.set(self.graph_mode)
        try:
            with self._lock:
                return self.backend.forward(*args, **kwargs)
        finally:
            _GRAPH_MODE.reset(token)

    __call__ = forward

    def __getattr__(self, name):
        if name == "backend":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self.backend, name)

    def __repr__(self):
        return f"EngineCall({type(self.backend).__name__}, graph_mode={self.graph_mode})"


def _constructor_arguments(ctx: spec.CallContext) -> dict:
    # As VisionAttention.__init__ builds QKV_BACKEND_IMPL[backend](...) in 0.5.23.
    return dict(
        head_dim=ctx.head_dim,
        num_heads=ctx.num_heads,
        num_kv_heads=ctx.num_kv_heads,
        dropout=0.0,
        flatten_batch=ctx.flatten_batch,
        softmax_in_single_precision=ctx.softmax_in_single_precision,
        softmax_scale=ctx.softmax_scale,
        use_data_parallel=False,
        workspace_buffer=None,
    )


def make_vision_sdpa(ctx: spec.CallContext) -> EngineCall:
    return EngineCall(vision.VisionSdpaAttention(**_constructor_arguments(ctx)), ctx.graph_mode,
                      interpreted=False)


def make_vision_triton(ctx: spec.CallContext) -> EngineCall:
    return EngineCall(vision.VisionTritonAttention(**_constructor_arguments(ctx)), ctx.graph_mode,
                      interpreted=True)


def _backends(with_kernel: bool):
    interpreted = dict(device="cpu", distinct_value_head_dim=False, max_tokens=INTERPRETER_MAX_TOKENS)
    sdpa = spec.CallBackend(
        name="sglang_vision_sdpa",
        make=make_vision_sdpa,
        profile="sdpa",
        engine="sglang",
        version=SGLANG_VERSION,
        # No GQA: it reshapes k and v to num_kv_heads and calls SDPA without
        # enable_gqa, which raises unless there is one key/value head.
        capabilities=spec.Capabilities(dtypes=("float32", "float16", "bfloat16"),
                                       grouped_query_attention=False,
                                       distinct_value_head_dim=False, device="cpu"),
        metadata_class=vision.VisionAttentionMetadata,
        singleton_cache_class=vision.SingletonCache,
        description=f"SGLang {SGLANG_VERSION}'s own VisionSdpaAttention",
    )
    if not with_kernel:
        return [sdpa]
    return [
        spec.KernelBackend(
            name="sglang_triton_kernel",
            fn=launch_kernel,
            capabilities=spec.Capabilities(dtypes=("float32", "float16", "bfloat16"), **interpreted),
            description=f"SGLang {SGLANG_VERSION}'s Triton kernel context_attention_fwd "
                        "(128-token tiles, as on sm90) under Triton's interpreter; bfloat16 hits "
                        "the interpreter's bf16 bug",
        ),
        spec.KernelBackend(
            name="sglang_triton_kernel_bf16_interpreter_fix",
            fn=launch_kernel_bf16_fix,
            capabilities=spec.Capabilities(dtypes=("float32", "float16", "bfloat16"), **interpreted),
            description=f"SGLang {SGLANG_VERSION}'s context_attention_fwd under Triton's "
                        "interpreter with its bf16 tl.dot and float32->bf16 rounding fixed",
        ),
        sdpa,
        spec.CallBackend(
            name="sglang_vision_triton",
            make=make_vision_triton,
            profile="triton_attn",
            engine="sglang",
            version=SGLANG_VERSION,
            # bfloat16 is left out: under the interpreter it fails for the
            # interpreter's reason, which says nothing about the call path.
            capabilities=spec.Capabilities(dtypes=("float32", "float16"), **interpreted),
            metadata_class=vision.VisionAttentionMetadata,
            singleton_cache_class=vision.SingletonCache,
            description=f"SGLang {SGLANG_VERSION}'s own VisionTritonAttention, its kernel under "
                        "Triton's interpreter",
        ),
    ]


def _without_overflow_checks():
    # The interpreter executes the int32 overflow checks that Triton inserts
    # for every integer add and multiply (sanitize_overflow), which take about
    # 40 % of an interpreted launch here. A GPU build drops them: they are
    # device_asserts, compiled only in debug mode. Turning them off keeps the
    # interpreter's arithmetic as it is and the launch as a GPU runs it.
    import dataclasses

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)


def _load():
    global WHEEL, kernel, vision, UNAVAILABLE_REASON
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError as error:
        raise _Unavailable(f"SGLang's code needs torch and triton: {error}") from error
    WHEEL = find_wheel()
    reason = _interpreter_reason()
    if reason is None:
        kernel = _load_kernel(WHEEL)
        launcher = kernel.context_attention_fwd
        _without_overflow_checks()
    else:
        UNAVAILABLE_REASON = f"the Triton backends are left out: {reason}"

        def launcher(*args, **kwargs):
            raise RuntimeError(reason)
    vision = _load_vision(WHEEL, launcher)
    return _backends(with_kernel=reason is None)


try:
    BACKENDS = _load()
except _Unavailable as why:
    UNAVAILABLE_REASON = str(why)
    BACKENDS = []
