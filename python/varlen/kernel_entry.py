"""The kernels' own doors, for the differentials' shims: what a kernel's
launch does with the arguments an engine hands it, before any element is
read, written from the kernels' sources (not from the C++ model, so that the
two can disagree).

* Triton's launcher (triton 3.9: runtime/jit.py JITFunction.run and
  backends/nvidia/driver.c launch()): `kernel[grid](*args)` reads the grid as
  three C ints (PyArg_ParseTuple "iii": a float is refused, a tensor is read
  by its __index__, a host sync on the device), then each tensor argument's
  data_ptr() (0, an empty tensor's, is a valid null pointer; a host tensor is
  refused), and launches nothing for a grid of no blocks. `TritonJit` stands
  in for `triton.jit`, so that an engine's own kernel wrapper (its BLOCK, its
  grid, its argument list) runs unchanged up to the launch.

What it does not cover: compilation (a kernel's constexpr and dtype rules),
what the kernel computes, and argument kinds the launcher's specialization
has no rule for here (they raise NotModelled).
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

_INT_MAX = 2**31 - 1
_INT_MIN = -(2**31)


class NotModelled(Exception):
    """The kernel's response to this argument is not modelled here."""


def c_int(value: Any) -> int:
    """CPython's PyArg_ParseTuple "i": __index__, then the C int's range."""
    index = operator.index(value)  # TypeError: 'float' object cannot be interpreted ...
    if index > _INT_MAX:
        raise OverflowError("signed integer is greater than maximum")
    if index < _INT_MIN:
        raise OverflowError("signed integer is less than minimum")
    return index


def triton_launch_grid(grid, args: Sequence[Any], is_device: Callable[[Any], bool]):
    """What Triton's launcher does with `kernel[grid](*args)` before any block
    runs: the grid as three C ints, or None when it has no blocks (nothing is
    launched); its exceptions are the launcher's."""
    # jit.py: a callable grid is called; the axes are grid[0], then 1s.
    assert grid is not None
    if callable(grid):
        raise NotModelled("a callable Triton grid")
    size = len(grid)
    axes = (grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1)
    for arg in args:
        # The JIT specializes None as a constexpr, ints, floats and bools as
        # scalars, and anything with data_ptr() as a pointer.
        if not (arg is None or isinstance(arg, (bool, int, float)) or hasattr(arg, "data_ptr")):
            raise NotModelled(f"a Triton kernel argument of type {type(arg).__name__}")
    # driver.c launch(): the grid, then every pointer (extractPointer).
    blocks = tuple(c_int(axis) for axis in axes)
    for arg in args:
        if hasattr(arg, "data_ptr") and arg.data_ptr() != 0 and not is_device(arg):
            raise ValueError("Pointer argument cannot be accessed from Triton (cpu tensor?)")
    # _launch: `if (gridX * gridY * gridZ > 0)`, a product of C ints.
    product = (blocks[0] * blocks[1] * blocks[2] + 2**31) % 2**32 - 2**31
    return blocks if product > 0 else None


class TritonJit:
    """`triton.jit`'s stand-in: `kernel[grid](*args, **constexprs)` runs the
    launcher's argument handling (triton_launch_grid) and launches nothing.
    `is_device(tensor)` says whether a tensor lives on the device."""

    def __init__(self, fn: Callable, is_device: Callable[[Any], bool]):
        self.fn = fn
        self.is_device = is_device
        self.launches = 0  # launches with at least one block

    def __getitem__(self, grid):
        return lambda *args, **constexprs: self.run(grid, args)

    def run(self, grid, args: Sequence[Any]) -> None:
        if triton_launch_grid(grid, args, self.is_device) is not None:
            self.launches += 1


# --- FlashAttention as vLLM 0.33.0 builds it ---------------------------------------------
#
# The wheel's vllm/vllm_flash_attn/flash_attn_interface.py calls
# torch.ops._vllm_fa2_C.varlen_fwd and torch.ops._vllm_fa3_C.fwd. Their schemas,
# as the wheel's _vllm_fa2_C.abi3.so and _vllm_fa3_C.abi3.so register them (the
# strings in the libraries; vllm-project/flash-attention's
# csrc/flash_attn/flash_api_torch_lib.cpp and hopper/flash_api_torch_lib.cpp),
# so that the dispatcher's type gate is torch's own. The checks below are the
# C++ entry points' (Dao-AILab/flash-attention v2.8.3 csrc/flash_attn/flash_api.cpp
# mha_varlen_fwd and hopper/flash_api.cpp mha_fwd, which the fork keeps), in
# their order, on the arguments the interface passes.
#
# Not covered: the libraries are stable-ABI builds (they import aoti_torch_*
# and throw std::runtime_error from STD_TORCH_CHECK), which prefixes every
# message with "<function>, <source path>:<line>, "; the texts here are the
# checks' own, without that prefix.

FA2_VARLEN_FWD_SCHEMA = (
    "varlen_fwd(Tensor! q, Tensor k, Tensor v, Tensor!? out, Tensor cu_seqlens_q, "
    "Tensor cu_seqlens_k, Tensor? seqused_k, Tensor? leftpad_k, Tensor? block_table, "
    "Tensor? alibi_slopes, int max_seqlen_q, int max_seqlen_k, float p_dropout, "
    "float softmax_scale, bool zero_tensors, bool is_causal, int window_size_left, "
    "int window_size_right, float softcap, bool return_softmax, int num_splits, "
    "Tensor? gen) -> Tensor[]")
FA3_FWD_SCHEMA = (
    "fwd(Tensor!  q,    Tensor   k,    Tensor   v,    Tensor?  k_new,    Tensor?  v_new,    "
    "Tensor?  q_v,    Tensor!? out,    Tensor?  cu_seqlens_q,    Tensor?  cu_seqlens_k,    "
    "Tensor?  cu_seqlens_k_new,    Tensor?  seqused_q,    Tensor?  seqused_k,    "
    "int?     max_seqlen_q,    int?     max_seqlen_k,    Tensor?  page_table,    "
    "Tensor?  kv_batch_idx,    Tensor?  leftpad_k,    Tensor?  rotary_cos,    "
    "Tensor?  rotary_sin,    Tensor?  seqlens_rotary,    Tensor?  q_descale,    "
    "Tensor?  k_descale,    Tensor?  v_descale,    float    softmax_scale,    "
    "bool     is_causal,    int      window_size_left,    int      window_size_right,    "
    "float    softcap,    bool     is_rotary_interleaved,    Tensor?  scheduler_metadata,    "
    "int      num_splits,    bool?    pack_gqa,    int      sm_margin,    Tensor?  s_aux,    "
    "int      cp_world_size,    int      cp_rank,    Tensor?  cp_tot_seqused_k) -> Tensor[]")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RuntimeError(message)


class FlashEntry:
    """The two entry points' checks; `is_device(tensor)` says whether a tensor
    lives on the device."""

    def __init__(self, is_device: Callable[[Any], bool]):
        self.is_device = is_device

    def _half(self, t) -> bool:
        return str(t.dtype) in ("torch.float16", "torch.bfloat16")

    def _output(self, q, out, head_size_v):
        import torch
        if out is not None:
            return out
        return torch.empty(q.shape[0], q.shape[1], head_size_v, dtype=q.dtype)

    def fa2_varlen_fwd(self, q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, leftpad_k,
                       block_table, alibi_slopes, max_seqlen_q, max_seqlen_k, p_dropout,
                       softmax_scale, zero_tensors, is_causal, window_size_left,
                       window_size_right, softcap, return_softmax, num_splits, gen):
        import torch
        if any(x is not None for x in (seqused_k, leftpad_k, block_table, alibi_slopes)) or \
                p_dropout != 0 or softcap != 0 or return_softmax or num_splits > 1:
            raise NotModelled("FlashAttention 2 features a vision call does not use")
        _check(gen is None, "flash-attn: the RNG `generator` argument is no longer supported and "
                            "must be None; dropout (when enabled) uses the default CUDA "
                            "generator.")
        _check(self._half(q), "FlashAttention only support fp16 and bf16 data type")  # L545
        _check(k.dtype == q.dtype, "query and key must have the same dtype")
        _check(v.dtype == q.dtype, "query and value must have the same dtype")
        _check(cu_seqlens_q.dtype == torch.int32, "cu_seqlens_q must have dtype int32")
        _check(cu_seqlens_k.dtype == torch.int32, "cu_seqlens_k must have dtype int32")
        for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                        ("cu_seqlens_k", cu_seqlens_k)):
            _check(self.is_device(t), f"{name} must be on CUDA")  # L552-554
        for t in (q, k, v):
            _check(t.stride(-1) == 1, "Input tensor must have contiguous last dimension")
        _check(cu_seqlens_q.is_contiguous(), "cu_seqlens_q must be contiguous")
        _check(cu_seqlens_k.is_contiguous(), "cu_seqlens_k must be contiguous")
        if q.dim() != 3 or k.dim() != 3:
            raise NotModelled("mha_varlen_fwd reads q.sizes()[2] and k.size(1) unchecked")
        batch_size = cu_seqlens_q.numel() - 1  # L573-576
        num_heads, head_size, num_heads_k = q.shape[1], q.shape[2], k.shape[1]
        if num_heads_k == 0:
            raise NotModelled("no key/value heads: mha_varlen_fwd divides by num_heads_k")
        if max_seqlen_q == 1 and alibi_slopes is None:
            is_causal = False  # L585
        if is_causal:
            window_size_right = 0
        # L592-599: one-row queries under GQA swap the head groups into the
        # sequence axis, a reshape that assumes one row per sequence.
        if max_seqlen_q == 1 and num_heads > num_heads_k and window_size_left < 0 and \
                window_size_right < 0 and p_dropout == 0 and head_size % 8 == 0:
            ngroups = num_heads // num_heads_k
            shape = [batch_size, num_heads_k, ngroups, head_size]
            # (batch_size -1, from an empty cu_seqlens_q, is reshape's "infer".)
            if batch_size >= 0 and batch_size * num_heads_k * ngroups * head_size != q.numel():
                raise RuntimeError(f"shape '[{', '.join(map(str, shape))}]' is invalid for "
                                   f"input of size {q.numel()}")
        _check(batch_size > 0, "batch size must be positive")  # L603
        _check(head_size <= 256, "FlashAttention forward only supports head dimension at most 256")
        _check(head_size % 8 == 0, "query, key, value, and out_ must have a head_size that is a "
                                   "multiple of 8")
        _check(num_heads % num_heads_k == 0,
               "Number of heads in key/value must divide number of heads in query")
        total_k = k.shape[0]
        _check(tuple(k.shape) == (total_k, num_heads_k, head_size),
               "k must have shape (total_k, num_heads_k, head_size)")  # L614-615
        _check(tuple(v.shape) == (total_k, num_heads_k, head_size),
               "v must have shape (total_k, num_heads_k, head_size)")
        _check(tuple(cu_seqlens_q.shape) == (batch_size + 1,),
               "cu_seqlens_q must have shape (batch_size + 1)")  # L622-623
        _check(tuple(cu_seqlens_k.shape) == (batch_size + 1,),
               "cu_seqlens_k must have shape (batch_size + 1)")
        if out is not None:  # L635-638
            _check(out.dtype == q.dtype, "Output must have the same dtype as inputs")
            _check(self.is_device(out), "out must be on CUDA")
            _check(out.stride(-1) == 1, "Output tensor must have contiguous last dimension")
            _check(tuple(out.shape) == (q.shape[0], num_heads, head_size),
                   "out must have shape (sizes[0], sizes[1], head_size)")
        out = self._output(q, out, head_size)
        return [out, torch.empty(num_heads, q.shape[0], dtype=torch.float32)]

    def fa3_fwd(self, q, k, v, k_new, v_new, q_v, out, cu_seqlens_q, cu_seqlens_k,
                cu_seqlens_k_new, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, page_table,
                kv_batch_idx, leftpad_k, rotary_cos, rotary_sin, seqlens_rotary, q_descale,
                k_descale, v_descale, softmax_scale, is_causal, window_size_left,
                window_size_right, softcap, is_rotary_interleaved, scheduler_metadata,
                num_splits, pack_gqa, sm_margin, s_aux, cp_world_size, cp_rank,
                cp_tot_seqused_k):
        import torch
        if any(x is not None for x in (k_new, v_new, q_v, cu_seqlens_k_new, seqused_q, seqused_k,
                                       page_table, kv_batch_idx, leftpad_k, rotary_cos,
                                       q_descale, k_descale, v_descale, scheduler_metadata,
                                       s_aux)) or cu_seqlens_q is None or cu_seqlens_k is None:
            raise NotModelled("FlashAttention 3 features a vision call does not use")
        # The stable wrapper narrows the optional ints (mha_fwd_stable).
        for m in (max_seqlen_q, max_seqlen_k):
            if m is not None and not -2**31 <= m <= 2**31 - 1:
                raise NotModelled("mha_fwd_stable's narrowing of max_seqlen")
        _check(self._half(q) or str(q.dtype) == "torch.float8_e4m3fn",
               "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type")  # L680
        _check(k.dtype == q.dtype, "query and key must have the same dtype")
        _check(v.dtype == q.dtype, "query and value must have the same dtype")
        for name, t in (("q", q), ("k", k), ("v", v)):
            _check(self.is_device(t), f"{name} must be on CUDA")  # L689
        for t in (q, k, v):
            _check(t.stride(-1) == 1, "Input tensor must have contiguous last dimension")
        for name, t, m in (("q", cu_seqlens_q, max_seqlen_q), ("k", cu_seqlens_k, max_seqlen_k)):
            _check(self.is_device(t), f"cu_seqlens_{name} must be on CUDA")  # L708-720
            _check(t.is_contiguous(), f"cu_seqlens_{name} must be contiguous")
            _check(t.dtype == torch.int32, f"cu_seqlens_{name} must have dtype torch.int32")
            _check(m is not None,
                   f"max_seqlen_{name} must be provided if cu_seqlens_{name} is provided")
        if q.dim() != 3 or k.dim() != 3 or v.dim() != 3 or cu_seqlens_q.dim() == 0 or \
                cu_seqlens_k.dim() == 0:
            raise NotModelled("mha_fwd reads sizes it has not checked")
        batch_size = cu_seqlens_q.shape[0] - 1  # L723-734
        batch_size_k = cu_seqlens_k.shape[0] - 1
        num_heads, head_size = q.shape[1], q.shape[2]
        num_heads_k, head_size_v = k.shape[1], v.shape[-1]
        if num_heads_k == 0:
            raise NotModelled("no key/value heads: mha_fwd divides by num_heads_k")
        _check(batch_size == batch_size_k, "batch_size must be equal to batch_size_k")  # L742
        _check(head_size <= 256, "FlashAttention forward only supports head dimension at most 256")
        _check(num_heads % num_heads_k == 0,
               "Number of heads in key/value must divide number of heads in query")
        if head_size_v != head_size:  # L748-756
            _check((128 < head_size <= 192 and 96 < head_size_v <= 128) or
                   (head_size <= 64 and head_size_v <= 512),
                   "If V headdim is different from Q/K dim, we only support Q/K headdim in "
                   "(128, 192] and V headdim in (96, 128], or (Q/K <= 64 and V <= 512).")
            _check(head_size_v <= 256 or self._half(q),
                   "HeaddimV > 256 requires fp16 and bf16 data type")
        total_q, total_k = q.shape[0], k.shape[0]
        _check(tuple(q.shape) == (total_q, num_heads, head_size),
               "q must have shape (total_q, num_heads, head_size)")  # L775-785
        _check(tuple(cu_seqlens_q.shape) == (batch_size + 1,),
               "cu_seqlens_q must have shape (batch_size + 1)")
        _check(tuple(k.shape) == (total_k, num_heads_k, head_size),
               "k must have shape (total_k, num_heads_k, head_size)")
        _check(tuple(v.shape) == (total_k, num_heads_k, head_size_v),
               "v must have shape (total_k, num_heads_k, head_size_v)")
        _check(tuple(cu_seqlens_k.shape) == (batch_size + 1,),
               "cu_seqlens_k must have shape (batch_size + 1)")
        _check(head_size % 8 == 0, "head_size should be a multiple of 8")  # L819-821
        _check(head_size_v % 8 == 0, "head_size_v should be a multiple of 8")
        if out is not None:  # L828-834
            _check(out.dtype == q.dtype, "For FP16/BF16 input, output must have the same dtype as "
                                         "inputs. For FP8 input, output must have dtype BF16")
            _check(self.is_device(out), "out must be on CUDA")
            _check(out.stride(-1) == 1, "Output tensor must have contiguous last dimension")
            _check(tuple(out.shape) == (total_q, num_heads, head_size_v),
                   "out must have shape (total_q, num_heads, head_size_v)")
        out = self._output(q, out, head_size_v)
        lse = torch.empty(num_heads, total_q, dtype=torch.float32)
        return [out, lse, lse, lse]


def register_vllm_flash_ops(is_device: Callable[[Any], bool],
                            wrap: Callable[[Callable], Callable]) -> list:
    """Defines _vllm_fa2_C::varlen_fwd and _vllm_fa3_C::fwd with the wheel's
    schemas, their kernels the entry checks (for the CPU dispatch key: the
    stand-in device tensors are host tensors; `wrap` adapts a kernel to the
    caller's device mode). Returns the libraries, which must be kept alive."""
    import torch
    entry = FlashEntry(is_device)
    libraries = []
    for namespace, schema, kernel in (("_vllm_fa2_C", FA2_VARLEN_FWD_SCHEMA, entry.fa2_varlen_fwd),
                                      ("_vllm_fa3_C", FA3_FWD_SCHEMA, entry.fa3_fwd)):
        library = torch.library.Library(namespace, "DEF")
        library.define(schema)
        library.impl(schema.split("(")[0], wrap(kernel), "CPU")
        libraries.append(library)
    return libraries
