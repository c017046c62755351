"""Checks the third-party backends (varlen.backends.torch_sdpa, varlen.backends.sglang)
against a float64 reference, without varlen's compiled core.

Run inside the environment scripts/python-env builds:

    build/python-env/bin/python -m pytest python/tests/test_thirdparty_backends.py

Every case packs a few sequences, a zero-length one among them, and compares
the output with per-sequence softmax(q k^T * scale) v computed in float64 from
the same (rounded) inputs. Tolerances are relative to max|reference|. The
kernel-level backends are called with the harness's kernel signature, the
call-level ones as SGLang's VisionAttention calls them. SGLang's Triton kernel
runs under Triton's interpreter (about a second per call), so its cases are
few and small.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))
try:
    import varlen  # noqa: F401
except ImportError:
    # The package's __init__ needs the compiled core; these modules do not.
    _package = types.ModuleType("varlen")
    _package.__path__ = [str(PYTHON_DIR / "varlen")]
    sys.modules["varlen"] = _package

# sglang first: it turns Triton's interpreter on before triton is imported.
from varlen.backends import sglang  # noqa: E402
from varlen.backends import torch_sdpa  # noqa: E402
from varlen import spec  # noqa: E402

import torch  # noqa: E402

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Geometry:
    name: str
    lens: tuple
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def tokens(self):
        return sum(self.lens)

    @property
    def max_len(self):
        return max(self.lens)

    def cu_seqlens(self, dtype=torch.int32):
        return torch.tensor([0, *itertools.accumulate(self.lens)], dtype=dtype)


GQA_D80 = Geometry("gqa2_d80", (23, 0, 41, 17), heads=4, kv_heads=2, head_dim=80)
GQA_D8 = Geometry("gqa2_d8", (0, 37, 20, 0, 9), heads=2, kv_heads=1, head_dim=8)
MHA1_D8 = Geometry("mha1_d8", (31, 0, 44), heads=1, kv_heads=1, head_dim=8)
MHA3_D80 = Geometry("mha3_d80", (12, 0, 50, 20), heads=3, kv_heads=3, head_dim=80)


def inputs(g: Geometry, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(g.tokens, g.heads, g.head_dim, generator=gen).to(dtype)
    k = torch.randn(g.tokens, g.kv_heads, g.head_dim, generator=gen).to(dtype)
    v = torch.randn(g.tokens, g.kv_heads, g.head_dim, generator=gen).to(dtype)
    return q, k, v


def reference(q, k, v, cu_seqlens, scale):
    group = q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float64)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        if end == start:
            continue
        qs = q[start:end].double().transpose(0, 1)
        ks = k[start:end].double().repeat_interleave(group, dim=1).transpose(0, 1)
        vs = v[start:end].double().repeat_interleave(group, dim=1).transpose(0, 1)
        weights = torch.softmax(qs @ ks.transpose(1, 2) * scale, dim=-1)
        out[start:end] = (weights @ vs).transpose(0, 1)
    return out


def relative_error(out, ref):
    # NaN compares as an infinite error.
    return torch.nan_to_num((out.double() - ref).abs().max() / ref.abs().max(), nan=float("inf")).item()


def backend(module, name):
    found = [b for b in module.BACKENDS if b.name == name]
    assert found, f"{module.__name__} has no backend {name!r} ({getattr(module, 'UNAVAILABLE_REASON', None)})"
    return found[0]


def run_kernel(b: spec.KernelBackend, g: Geometry, dtype, scale=None, o=None, seed=0):
    q, k, v = inputs(g, dtype, seed)
    scale = g.head_dim ** -0.5 if scale is None else scale
    cu = g.cu_seqlens()
    if o is None:
        o = torch.zeros(g.tokens, g.heads, g.head_dim, dtype=dtype)
    returned = b.fn(q, k, v, o, cu, cu, g.max_len, g.max_len, scale)
    assert returned is None or returned is o
    return o, reference(q, k, v, cu, scale)


needs_sglang = pytest.mark.skipif(not sglang.BACKENDS, reason=f"SGLang unavailable: {sglang.UNAVAILABLE_REASON}")


# --- torch_sdpa -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (*DTYPES, torch.float64), ids=str)
@pytest.mark.parametrize("g", (GQA_D80, GQA_D8, MHA1_D8, MHA3_D80), ids=lambda g: g.name)
def test_torch_sdpa_matches_reference(g, dtype):
    o, ref = run_kernel(backend(torch_sdpa, "torch_sdpa"), g, dtype, scale=0.3)
    assert relative_error(o, ref) <= TOLERANCE[dtype]


def test_torch_sdpa_takes_strided_views():
    g = GQA_D80
    gen = torch.Generator().manual_seed(1)
    # q, k and v sliced out of one packed projection, as an engine's qkv_proj gives them.
    qkv = torch.randn(g.tokens, g.heads + 2 * g.kv_heads, g.head_dim, generator=gen)
    q, k, v = qkv.split([g.heads, g.kv_heads, g.kv_heads], dim=1)
    # o with a non-unit stride on every dimension.
    buffer = torch.zeros(g.tokens, g.head_dim, 2 * g.heads)
    o = buffer[:, :, ::2].transpose(1, 2)
    cu = g.cu_seqlens()
    backend(torch_sdpa, "torch_sdpa").fn(q, k, v, o, cu, cu, g.max_len, g.max_len, 0.2)
    assert relative_error(o, reference(q, k, v, cu, 0.2)) <= TOLERANCE[torch.float32]
    assert not buffer[:, :, 1::2].any(), "wrote outside o"


@pytest.mark.parametrize("dtype", (*DTYPES, torch.float64), ids=str)
def test_torch_sdpa_runs_the_cpu_flash_kernel(dtype):
    from torch.profiler import ProfilerActivity, profile

    g = GQA_D8
    q, k, v = inputs(g, dtype)
    o = torch.zeros_like(q)
    cu = g.cu_seqlens()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        backend(torch_sdpa, "torch_sdpa").fn(q, k, v, o, cu, cu, g.max_len, g.max_len, 0.3)
    ops = {event.key for event in prof.key_averages()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops
    assert "aten::_scaled_dot_product_attention_math" not in ops
    assert "aten::repeat_interleave" not in ops  # GQA without copying k and v


def test_torch_sdpa_rejects_a_distinct_value_head_dim():
    g = GQA_D8
    q, k, _ = inputs(g, torch.float32)
    v = torch.randn(g.tokens, g.kv_heads, 16)
    o = torch.zeros(g.tokens, g.heads, 16)
    with pytest.raises(ValueError, match="head dim 16 differs"):
        torch_sdpa.sdpa_varlen(q, k, v, o, g.cu_seqlens(), g.cu_seqlens(), g.max_len, g.max_len, 0.3)


# --- SGLang's Triton kernel, kernel level ---------------------------------------------


@needs_sglang
def test_sglang_kernel_uses_the_sm90_tiles():
    assert sglang.kernel._is_cuda and sglang.kernel.CUDA_CAPABILITY == (9, 0)
    assert type(sglang.kernel._fwd_kernel.interpreted).__name__ == "InterpretedFunction"


@needs_sglang
def test_sglang_kernel_is_launched_as_a_gpu_launches_it():
    # Triton's GPU launcher parses the grid as C ints (the interpreter would
    # iterate range() over it) and launches nothing for a grid of no blocks.
    g = GQA_D8
    q, k, v = inputs(g, torch.float32)
    o = torch.full_like(q, 7.0)
    cu = g.cu_seqlens()
    seq_lens = (cu[1:] - cu[:-1]).to(torch.int32)
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        sglang.kernel.context_attention_fwd(q, k, v, o, cu, seq_lens, float(g.max_len),
                                            is_causal=False)
    with pytest.raises(OverflowError, match="signed integer is greater than maximum"):
        sglang.kernel.context_attention_fwd(q, k, v, o, cu, seq_lens, 2**40, is_causal=False)
    sglang.kernel.context_attention_fwd(q, k, v, o, cu, seq_lens, 0, is_causal=False)
    assert bool((o == 7.0).all())  # no blocks: nothing written


@needs_sglang
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
@pytest.mark.parametrize("g", (GQA_D80, GQA_D8), ids=lambda g: g.name)
def test_sglang_kernel_matches_reference(g, dtype):
    o, ref = run_kernel(backend(sglang, "sglang_triton_kernel"), g, dtype)
    assert relative_error(o, ref) <= TOLERANCE[dtype]


@needs_sglang
def test_sglang_kernel_is_badly_wrong_in_bf16_under_the_interpreter():
    # Triton issue 11584: the interpreter's tl.dot multiplies bf16 bit patterns.
    o, ref = run_kernel(backend(sglang, "sglang_triton_kernel"), GQA_D8, torch.bfloat16)
    assert relative_error(o, ref) > 1.0


@needs_sglang
@pytest.mark.parametrize("g", (GQA_D80, GQA_D8), ids=lambda g: g.name)
def test_sglang_kernel_bf16_fix_matches_reference(g):
    o, ref = run_kernel(backend(sglang, "sglang_triton_kernel_bf16_interpreter_fix"), g, torch.bfloat16)
    assert relative_error(o, ref) <= TOLERANCE[torch.bfloat16]
    from triton.runtime.interpreter import interpreter_builder

    assert "create_dot" not in vars(interpreter_builder) and "cast_impl" not in vars(interpreter_builder)


@needs_sglang
def test_sglang_kernel_bf16_fix_leaves_float32_alone():
    fixed, _ = run_kernel(backend(sglang, "sglang_triton_kernel_bf16_interpreter_fix"), GQA_D8, torch.float32)
    plain, _ = run_kernel(backend(sglang, "sglang_triton_kernel"), GQA_D8, torch.float32)
    assert torch.equal(fixed, plain)


@needs_sglang
def test_sglang_kernel_leaves_rows_beyond_max_seqlens_tiles_unwritten():
    # A max_seqlen below the real length shrinks the grid: with 128-token
    # tiles, rows from the first tile past cdiv(max_seqlen, 128) on are never
    # written (rows inside a launched tile still are).
    g = Geometry("one_long", (150,), heads=1, kv_heads=1, head_dim=8)
    q, k, v = inputs(g, torch.float32)
    o = torch.full((g.tokens, 1, 8), float("nan"))
    cu = g.cu_seqlens()
    backend(sglang, "sglang_triton_kernel").fn(q, k, v, o, cu, cu, 100, 100, 0.35)
    ref = reference(q, k, v, cu, 0.35)
    assert relative_error(o[:128], ref[:128]) <= TOLERANCE[torch.float32]
    assert o[128:].isnan().all()


# --- SGLang's classes, call level -----------------------------------------------------


def context(g: Geometry, dtype, profile, **options):
    return spec.CallContext(num_heads=g.heads, num_kv_heads=g.kv_heads, head_dim=g.head_dim,
                            head_dim_v=g.head_dim, dtype=dtype, device="cpu", profile=profile,
                            engine="sglang", version=sglang.SGLANG_VERSION, entry="layer",
                            graph_mode=options.pop("graph_mode", False), **options)


def layer_call(obj, q, k, v, cu_seqlens, max_seqlen, softmax_scale=None, **overrides):
    # Every keyword VisionAttention.forward passes its backend in 0.5.23.
    arguments = dict(q=q, k=k, v=v, bsz=1, seq_len=q.shape[0], cu_seqlens=cu_seqlens,
                     attention_mask=None, forward_metadata=None, sequence_lengths=None,
                     max_seqlen=max_seqlen, output_ws=None, softmax_scale=softmax_scale,
                     window_size=(-1, -1), s_aux=None)
    arguments.update(overrides)
    return obj.forward(**arguments)


@needs_sglang
@pytest.mark.parametrize("single_precision", (False, True), ids=("sdpa", "single_precision_softmax"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("g", (MHA1_D8, MHA3_D80), ids=lambda g: g.name)
def test_sglang_vision_sdpa_matches_reference(g, dtype, single_precision):
    b = backend(sglang, "sglang_vision_sdpa")
    obj = b.make(context(g, dtype, "sdpa", flatten_batch=True,
                         softmax_in_single_precision=single_precision))
    q, k, v = inputs(g, dtype)
    out = layer_call(obj, q, k, v, g.cu_seqlens(), g.max_len)
    assert out.shape == q.shape and out.dtype == dtype
    assert relative_error(out, reference(q, k, v, g.cu_seqlens(), g.head_dim ** -0.5)) <= TOLERANCE[dtype]


@needs_sglang
def test_sglang_vision_sdpa_odd_inputs_raise_as_in_sglang():
    b = backend(sglang, "sglang_vision_sdpa")
    # No GQA: k and v are reshaped to num_kv_heads and SDPA is called without
    # enable_gqa, so 4:2 heads raise...
    q, k, v = inputs(GQA_D80, torch.float32)
    with pytest.raises(RuntimeError, match="must match the size"):
        layer_call(b.make(context(GQA_D80, torch.float32, "sdpa", flatten_batch=True)),
                   q, k, v, GQA_D80.cu_seqlens(), GQA_D80.max_len)
    # ...while one key/value head broadcasts, and is right.
    q, k, v = inputs(GQA_D8, torch.float32)
    out = layer_call(b.make(context(GQA_D8, torch.float32, "sdpa", flatten_batch=True)),
                     q, k, v, GQA_D8.cu_seqlens(), GQA_D8.max_len)
    ref = reference(q, k, v, GQA_D8.cu_seqlens(), GQA_D8.head_dim ** -0.5)
    assert relative_error(out, ref) <= TOLERANCE[torch.float32]
    # Without flatten_batch, bsz=1 and several sequences: a [B, 1, s, s] padding mask.
    q, k, v = inputs(MHA1_D8, torch.float32)
    with pytest.raises(RuntimeError, match="broadcast shape"):
        layer_call(b.make(context(MHA1_D8, torch.float32, "sdpa")), q, k, v,
                   MHA1_D8.cu_seqlens(), MHA1_D8.max_len)


@needs_sglang
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
@pytest.mark.parametrize("g", (GQA_D80, GQA_D8), ids=lambda g: g.name)
def test_sglang_vision_triton_matches_reference(g, dtype):
    obj = backend(sglang, "sglang_vision_triton").make(context(g, dtype, "triton_attn"))
    q, k, v = inputs(g, dtype)
    out = layer_call(obj, q, k, v, g.cu_seqlens(), g.max_len)
    assert out.shape == q.shape and out.dtype == dtype
    assert relative_error(out, reference(q, k, v, g.cu_seqlens(), g.head_dim ** -0.5)) <= TOLERANCE[dtype]


@needs_sglang
def test_sglang_vision_triton_with_sglangs_own_metadata():
    g = GQA_D8
    b = backend(sglang, "sglang_vision_triton")
    assert b.metadata_class is sglang.vision.VisionAttentionMetadata
    assert b.singleton_cache_class is sglang.vision.SingletonCache
    metadata = sglang.vision.prepare_vision_attention_metadata(g.cu_seqlens(torch.int64), torch.device("cpu"))
    assert isinstance(metadata, b.metadata_class) and metadata.max_seqlen == g.max_len
    q, k, v = inputs(g, torch.float32)
    # The metadata wins over the (here deliberately useless) cu_seqlens.
    out = layer_call(b.make(context(g, torch.float32, "triton_attn")), q, k, v, None, None,
                     softmax_scale=0.25, forward_metadata=metadata)
    assert relative_error(out, reference(q, k, v, g.cu_seqlens(), 0.25)) <= TOLERANCE[torch.float32]


@needs_sglang
def test_sglang_vision_triton_graph_mode():
    g = GQA_D8
    obj = backend(sglang, "sglang_vision_triton").make(context(g, torch.float16, "triton_attn", graph_mode=True))
    q, k, v = inputs(g, torch.float16)
    cu = g.cu_seqlens()
    with pytest.raises(RuntimeError, match="output_ws should be prepared for cuda-graph mode"):
        obj.forward(q, k, v, cu, 1, g.tokens)  # a direct call without the output_ws key
    with pytest.raises(RuntimeError, match="cuda-graph mode cu_seqlens should be a list"):
        layer_call(obj, q, k, v, cu, g.max_len, output_ws=torch.empty_like(q))
    workspace = torch.empty_like(q)
    out = layer_call(obj, q, k, v, [cu, cu[1:] - cu[:-1], g.max_len], None, output_ws=workspace)
    assert out is workspace
    assert relative_error(out, reference(q, k, v, cu, g.head_dim ** -0.5)) <= TOLERANCE[torch.float16]
    # Graph mode belongs to the object made with it, not to the process.
    plain = backend(sglang, "sglang_vision_triton").make(context(g, torch.float16, "triton_attn"))
    with pytest.raises(AssertionError, match="cu_seqlens must be a torch.Tensor"):
        layer_call(plain, q, k, v, [cu, cu[1:] - cu[:-1], g.max_len], None)


@needs_sglang
def test_sglang_singleton_cache_is_sglangs_own():
    vision = sglang.vision
    cache = vision.SingletonCache()
    resolved = vision.resolve_seqlens(cache, 2, 5, device=torch.device("cpu"))
    assert resolved.tolist() == [0, 5, 10] and cache.get_data() is resolved
    assert vision.resolve_max_seqlen(cache, torch.tensor([0, 2, 7])) == 5 and cache._max_seqlen == 5


# --- what the module does without its inputs ------------------------------------------


def _probe(code, **env):
    environment = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "VARLEN_SGLANG_WHEEL")}
    environment.update(env)
    environment["PYTHONPATH"] = os.pathsep.join([str(PYTHON_DIR), environment.get("PYTHONPATH", "")])
    preamble = ("import sys, types\n"
                "try:\n    import varlen\n"
                "except ImportError:\n"
                f"    p = types.ModuleType('varlen'); p.__path__ = [{str(PYTHON_DIR / 'varlen')!r}]; "
                "sys.modules['varlen'] = p\n")
    done = subprocess.run([sys.executable, "-c", preamble + code], env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_sglang_without_its_wheel_has_no_backends_and_says_why():
    out = _probe("from varlen.backends import sglang as s\n"
                 "print(len(s.BACKENDS)); print(s.UNAVAILABLE_REASON)",
                 VARLEN_SGLANG_WHEEL="/nonexistent/sglang-0.5.23-none.whl")
    count, reason = out.splitlines()[:2]
    assert count == "0" and "VARLEN_SGLANG_WHEEL" in reason


@needs_sglang
def test_sglang_after_a_compiled_triton_keeps_only_sdpa():
    out = _probe("import triton\n"
                 "from varlen.backends import sglang as s\n"
                 "print([b.name for b in s.BACKENDS]); print(s.UNAVAILABLE_REASON)",
                 VARLEN_SGLANG_WHEEL=sglang.WHEEL)
    names, reason = out.splitlines()[:2]
    assert names == "['sglang_vision_sdpa']" and "TRITON_INTERPRET=1" in reason
