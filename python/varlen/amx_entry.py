"""The AMX kernel's door, as SGLang's amx_attn calls it on a CPU with AMX:
what sgl-kernel's CPU op `flash_attn_varlen_func` does with its arguments
before it computes, written from sgl-kernel's sources, not from the C++
model.

VisionAMXAttention calls `torch.ops.sgl_kernel.flash_attn_varlen_func(q, k,
v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=m, max_seqlen_k=m,
causal=False)`. The entry is sgl-kernel/csrc/cpu/flash_attn.cpp (read at
sgl-project/sglang 05837a8 and 6aa7668, whose entries are the same), its
checks the macros of csrc/cpu/common.h: CHECK_CPU, CHECK_CONTIGUOUS,
CHECK_LAST_DIM_CONTIGUOUS (whose text has no space after the name),
CHECK_DIM and CHECK_EQ, then AT_DISPATCH_REDUCED_FLOATING_TYPES on q's
dtype, then the kernel's own TORCH_CHECK of every length against the max.

The op is registered for the CPU: a tensor on the device meets torch's
dispatcher first, whose message (the registered backends) is not modelled,
nor is the op's schema (which SGLang's path, an int from `.item()`, never
tests). Raises what the source raises, in its order; returns None when the
kernel runs; raises NotModelled where no readable source decides.
"""

from __future__ import annotations

from typing import Any, Callable

from varlen.kernel_entry import NotModelled

# c10::ScalarType's names, as ATen prints a dtype in a message.
_SCALAR_TYPE = {"torch.float32": "Float", "torch.float16": "Half", "torch.bfloat16": "BFloat16",
                "torch.float64": "Double", "torch.int32": "Int", "torch.int64": "Long",
                "torch.bool": "Bool", "torch.int16": "Short", "torch.int8": "Char",
                "torch.uint8": "Byte"}

# TORCH_CHECK(cond) without a message.
_UNEXPLAINED = ("Expected {} to be true, but got false.  (Could this error message be improved?  "
                "If so, please report an enhancement request to PyTorch.)")


def _torch_check(condition: bool, message: str) -> None:
    if not condition:
        raise RuntimeError(message)


def _check_eq(a_text: str, b_text: str, a: Any, b: Any) -> None:
    _torch_check(a == b, f"CHECK_EQ({a_text}, {b_text}) failed. {a} vs {b}")


def amx_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                     is_device: Callable[[Any], bool]) -> None:
    import torch
    tensors = (q, k, v, cu_seqlens_q, cu_seqlens_k)
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise NotModelled("the op's schema given a non-tensor")
    if any(is_device(t) for t in tensors):
        raise NotModelled("a device tensor meets the CPU op's dispatcher")
    if not all(type(m) is int for m in (max_seqlen_q, max_seqlen_k)) or causal is not False:
        raise NotModelled("the op's schema given a non-int max, or a causal call")
    for name, t in (("q", q), ("k", k), ("v", v)):  # CHECK_LAST_DIM_CONTIGUOUS_INPUT
        if t.dim() == 0:
            raise NotModelled("strides()[-1] of a 0-d tensor")
        _torch_check(t.stride()[-1] == 1, f"{name}must be contiguous at last dimension")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _torch_check(t.dim() == 3, f"{name} must be a 3D tensor")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _torch_check(t.is_contiguous(), f"{name} must be contiguous")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_eq(f"{name}.scalar_type()", "at::kInt", _SCALAR_TYPE[str(t.dtype)], "Int")
    if cu_seqlens_q.dim() == 0 or cu_seqlens_k.dim() == 0:
        raise NotModelled("size(0) of a 0-d cu_seqlens")
    num_seqs = cu_seqlens_q.shape[0] - 1
    num_heads, head_size = q.shape[1], q.shape[2]
    num_heads_kv, head_size_v = k.shape[1], v.shape[2]
    _check_eq("k.size(2)", "head_size", k.shape[2], head_size)
    _check_eq("v.size(1)", "num_heads_kv", v.shape[1], num_heads_kv)
    _check_eq("cu_seqlens_k.size(0)", "num_seqs + 1", cu_seqlens_k.shape[0], num_seqs + 1)
    _torch_check(head_size % 2 == 0, f"invalid head_size {head_size}")
    _torch_check(head_size_v % 2 == 0, f"invalid head_size_v {head_size_v}")
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise NotImplementedError(
            f"\"flash_attn_varlen_func\" not implemented for '{_SCALAR_TYPE[str(q.dtype)]}'")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise NotModelled("data_ptr<scalar_t>() of a k or v of another dtype")
    if num_seqs < 1:
        raise NotModelled("no sequences: the output is left as torch.empty made it")
    if num_heads_kv == 0 or num_heads % num_heads_kv != 0:
        raise NotModelled("key/value heads that do not divide the query heads")
    # data_ptr<int32_t>()[b]: the contiguous storage, read flat.
    q_ends = cu_seqlens_q.reshape(-1)[:num_seqs + 1].tolist()
    k_ends = cu_seqlens_k.reshape(-1)[:num_seqs + 1].tolist()
    for b in range(num_seqs):
        seqlen_q, seqlen_k = q_ends[b + 1] - q_ends[b], k_ends[b + 1] - k_ends[b]
        if seqlen_q < 0 or seqlen_k < 0:
            raise NotModelled("a negative length, whose path depends on the sgl-kernel build")
        _torch_check(seqlen_q <= max_seqlen_q and seqlen_k <= max_seqlen_k,
                     _UNEXPLAINED.format("seqlen_q <= max_seqlen_q && seqlen_k <= max_seqlen_k"))
