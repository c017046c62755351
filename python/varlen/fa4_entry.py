"""FlashAttention 4 (CuTe DSL) as SGLang 0.5.23 ships it: the checks its varlen
entry path makes before any kernel is compiled or launched, for the call
VisionFlash4Attention makes (flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu,
cu_seqlens_k=cu, max_seqlen_q=m, max_seqlen_k=m, softmax_scale=s, ver=4)).

Written from the wheel's sources (file:line below, relative to the wheel):
sglang/kernels/ops/attention/flash_attention_v4.py flash_attn_varlen_func, then
sglang/kernels/ops/attention/flash_attn/cute/interface.py flash_attn_varlen_func,
FlashAttnVarlenFunc.forward and _flash_attn_fwd, up to its compile cache.
`fa4_varlen_entry` raises what the source raises, in the source's order, and
returns None when the call goes on unrefused (to the compile and launch, or to
the early return for empty q or k/v).

The GPU's compute capability decides some checks. Pass `arch` (e.g. 90, 100)
to pick one. With `arch=None`, the checks run for the three generic families
(80, 90, 100; 11.x takes 10.x's branches). When they agree, you get that
outcome. When they differ, you get NotModelled.

Not covered (NotModelled or assumed): the import of the vendored FA4 package
(flash_attention_v4.py:224 ImportError; assumed importable). The sm120
forward-host path (fa4_sm120). The shared-kv MLA path (k is v, head dim
512). The FLASH_ATTENTION_ARCH / fake-mode /
SGLANG_KERNEL_API_LOGLEVEL environment. The constructors' check of the CuTe
DSL's target arch. Anything the CuTe DSL or TVM FFI decides when it converts
arguments (to_cute_tensor / cute.compile / the compiled call): non-float
softmax_scale, unaligned q/k/v layouts, a batch of 0 or less or no heads
(the launch grid), the sm8x compile of unusual head dims. What the
kernel computes.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from varlen.kernel_entry import NotModelled

_GENERIC_ARCHES = (80, 90, 100)


def fa4_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale, is_device: Callable[[Any], bool], *,
                     arch: Optional[int] = None) -> None:
    # --- flash_attention_v4.py flash_attn_varlen_func (181) -------------------------
    # flash_attention_v4.py:123/231: q, k, v made contiguous when stride(-1) != 1.
    q, k, v = [_maybe_contiguous(t) for t in (q, k, v)]
    # flash_attention_v4.py:232-236: hd (256, 256, 256) makes q, k, v fully dense.
    if q.shape[-1] == 256 and k.shape[-1] == 256 and v.shape[-1] == 256:
        q, k, v = [t.contiguous() for t in (q, k, v)]
    # flash_attention_v4.py:241-243 (via :123): cu_seqlens_q, then cu_seqlens_k, read
    # with x.stride(-1). An int or list raises AttributeError ("'int' object has no
    # attribute 'stride'"). A 0-d tensor raises IndexError ("Dimension specified as
    # -1 but tensor has no dimensions").
    cu_seqlens_q = _maybe_contiguous(cu_seqlens_q)
    cu_seqlens_k = _maybe_contiguous(cu_seqlens_k)

    # --- interface.py flash_attn_varlen_func (2158) ---------------------------------
    # interface.py:2241-2242: _get_device_arch() (torch.cuda capability); sm12x gets
    # the fa4_sm120 forward host (try_cached_varlen, then its own launch plan).
    if arch is not None and arch // 10 == 12:
        raise NotModelled("FA4 on sm12x: the fa4_sm120 forward host's path")
    # interface.py:2359 FlashAttnVarlenFunc.apply -> forward; interface.py:2034-2035:
    # k is v with head dim 512 turns the call into the MLA (qv) formula.
    if k is v and v.shape[-1] == 512:
        raise NotModelled("FA4's shared-kv MLA path (k is v, head dim 512)")

    # --- interface.py _flash_attn_fwd (352) -----------------------------------------
    num_head, head_dim = q.shape[-2:]                        # interface.py:473-474
    if cu_seqlens_q is None:                                  # interface.py:475-479
        batch_size, seqlen_q = q.shape[:2]
        total_q = batch_size * seqlen_q
    else:                                                     # interface.py:481-484
        batch_size, seqlen_q, total_q = cu_seqlens_q.shape[0] - 1, None, q.shape[0]
    seqlen_k, num_head_kv, head_dim_v = v.shape[-3], v.shape[-2], v.shape[-1]  # :501-504
    if cu_seqlens_k is None:
        # interface.py:507: a 3-d k never equals the 4-d (batch, seqlen, heads, dim).
        if k.shape != (batch_size, seqlen_k, num_head_kv, head_dim):
            raise AssertionError()
    else:
        # interface.py:513: k has v's length and heads and q's head dim.
        if k.shape != (seqlen_k, num_head_kv, head_dim):
            raise AssertionError()
        # interface.py:514 (v.shape against itself: always true for a 3-d v).
        if cu_seqlens_k.shape != (batch_size + 1,):          # interface.py:515-517
            raise AssertionError("cu_seqlens_k must have shape (batch_size + 1,)")
    if cu_seqlens_q is not None and cu_seqlens_q.shape != (batch_size + 1,):  # :519-522
        raise AssertionError("cu_seqlens_q must have shape (batch_size + 1,)")
    # interface.py:563-568: without block scales, v's dtype (q's and k's come next).
    if str(v.dtype) not in ("torch.float16", "torch.bfloat16", "torch.float8_e4m3fn",
                            "torch.float8_e5m2"):
        raise AssertionError("inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2")
    # interface.py:580-586: pairwise dtypes, in the order (q, k), (q, v), (k, v).
    named = (("q", q), ("k", k), ("v", v))
    for i in range(len(named)):
        for j in range(i + 1, len(named)):
            (a, ta), (b, tb) = named[i], named[j]
            if ta.dtype != tb.dtype:
                raise AssertionError(f"{a}.dtype {ta.dtype} != {b}.dtype {tb.dtype}")
    # interface.py:590-597: cu_seqlens_q, then cu_seqlens_k: int32, then stride(0) == 1.
    for t in (cu_seqlens_q, cu_seqlens_k):
        if t is not None:
            if str(t.dtype) != "torch.int32":
                raise AssertionError(
                    "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be int32")
            if t.stride(0) != 1:
                raise AssertionError(
                    "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be contiguous")
    # interface.py:602-620: every tensor argument on the GPU (t.is_cuda).
    if not all(t is None or is_device(t) for t in (q, k, v, cu_seqlens_q, cu_seqlens_k)):
        raise AssertionError("inputs must be on CUDA device")

    state = dict(q=q, k=k, v=v, num_head=num_head, head_dim=head_dim, batch_size=batch_size,
                 total_q=total_q, seqlen_k=seqlen_k, num_head_kv=num_head_kv,
                 head_dim_v=head_dim_v, max_seqlen_q=max_seqlen_q,
                 max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale)
    if arch is not None:
        return _arch_tail(arch, **state)
    outcomes = []
    for family in _GENERIC_ARCHES:
        try:
            outcomes.append((family, _arch_tail(family, **state)))
        except Exception as exc:  # noqa: BLE001 - compared below
            outcomes.append((family, exc))
    keys = {_outcome_key(o) for _, o in outcomes}
    if len(keys) == 1:
        first = outcomes[0][1]
        if isinstance(first, Exception):
            raise first
        return None
    described = "; ".join(f"sm{a}: {_outcome_key(o)}" for a, o in outcomes)
    raise NotModelled(f"FA4's outcome depends on the compute capability ({described})")


def _arch_tail(arch, *, q, k, v, num_head, head_dim, batch_size, total_q, seqlen_k,
               num_head_kv, head_dim_v, max_seqlen_q, max_seqlen_k, softmax_scale) -> None:
    """_flash_attn_fwd from interface.py:621 on, for one compute capability."""
    family = arch // 10
    if family not in (8, 9, 10, 11):                          # interface.py:621-624
        raise AssertionError(
            "Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, "
            "and architectures registered through the forward-host bridge")
    # interface.py:625: num_head % num_head_kv (no kv heads: ZeroDivisionError
    # "integer modulo by zero").
    if num_head % num_head_kv != 0:
        raise AssertionError("num_head must be divisible by num_head_kv")
    alignment = 16 // v.element_size()                        # interface.py:626
    hd, hdv = head_dim, head_dim_v
    aligned = hd % alignment == 0 and hdv % alignment == 0
    if family == 9:                                           # :627-628 -> :133-140
        if not (((8 <= hd <= 256 and 8 <= hdv <= 256) or hd == hdv == 512) and aligned):
            raise AssertionError(
                f"(head_dim, head_dim_v)=({hd}, {hdv}) is not supported on SM90. "
                f"head_dim and head_dim_v must be between 8 and 256 and divisible by "
                f"{alignment}, or both equal to 512.")
    elif family in (10, 11):                                  # :627-628 -> :141-154
        shapes = ((8 <= hd <= 128 and 8 <= hdv <= 128) or (hd, hdv) == (192, 128)
                  or ((hd == 64 or hd == hdv) and hdv == 512) or (hd, hdv) == (256, 256))
        if not (shapes and aligned):
            raise AssertionError(
                f"(head_dim, head_dim_v)=({hd}, {hdv}) is not supported on SM100/SM110. "
                f"head_dim and head_dim_v must be between 8 and 128 and divisible by "
                f"{alignment}, or (192, 128) for DeepSeek, or (256, 256) for hd256.")
    # interface.py:629-631: the default scale (sm8x has no head-dim check: hd 0
    # gives ZeroDivisionError "float division by zero").
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(hd)
    qhead_per_kvhead = num_head // num_head_kv                # interface.py:637
    # interface.py:706-710: empty q or k/v: out.zero_() and return, nothing compiled.
    if seqlen_k == 0 or total_q == 0:
        return None
    # interface.py:747-799: the tile. Its size changes no outcome here except through
    # sm10x's comparison with tile_m, which is 128 there.
    tile_m = tile_n = 128
    # interface.py:805-808: None max_seqlen defaults to total_q / seqlen_k.
    if max_seqlen_q is None:
        max_seqlen_q = total_q
    if max_seqlen_k is None:
        max_seqlen_k = seqlen_k
    # interface.py:811-837: host arithmetic on max_seqlen (its only use; the kernel
    # never receives it). A str raises TypeError here.
    packed = max_seqlen_q * qhead_per_kvhead                  # interface.py:811
    q_stage = 1
    if family in (10, 11):                                    # interface.py:812-814
        q_stage = 2 if packed > tile_m else 1
    m_block = q_stage * tile_m
    num_m_blocks = (packed + m_block - 1) // m_block          # interface.py:833-835
    _ = batch_size * num_head_kv * num_m_blocks               # interface.py:836
    _ = (max_seqlen_k + tile_n - 1) // tile_n                 # interface.py:837

    # --- interface.py:1350 on: to_cute_tensor, kernel object, cute.compile, call ---
    # Nothing below is checked in Python; the CuTe DSL / TVM FFI decide. The usual
    # case (fp16/bf16, float or None scale, 16-byte aligned layout) goes on: None.
    if family == 8 and not (aligned and hd <= 256 and hdv <= 256):
        raise NotModelled("FA4 sm8x: no head-dim check before the compile (:627)")
    if family in (10, 11) and hdv == 512:
        raise NotModelled("FA4 sm10x: the MLA head dims (x, 512) pass :124-126 without qv; "
                          "FlashAttentionForwardSm100's compile decides")
    if type(softmax_scale) is not float:
        raise NotModelled(f"FA4: a softmax_scale of type {type(softmax_scale).__name__} "
                          "is converted by the CuTe DSL at compile/call (:1676, :1824)")
    for t in (q, k, v):
        unit = 16 // t.element_size()
        if t.stride(-1) != 1 or t.storage_offset() % unit or any(
                size > 1 and (stride <= 0 or stride % unit)
                for size, stride in zip(t.shape[:-1], t.stride()[:-1])):
            raise NotModelled("FA4: a q/k/v layout outside the 16-byte alignment that "
                              "to_cute_tensor(t) assumes (interface.py:1366-1369)")
    if batch_size <= 0 or num_head == 0:
        raise NotModelled("FA4: batch_size (cu_seqlens.shape[0] - 1) <= 0 or no heads: "
                          "the kernel's grid and launch decide")
    return None


def _maybe_contiguous(x):
    # flash_attention_v4.py:123 (and interface.py:222).
    return x.contiguous() if x is not None and x.stride(-1) != 1 else x


def _outcome_key(outcome) -> str:
    if isinstance(outcome, NotModelled):
        return "NotModelled"
    if isinstance(outcome, Exception):
        return f"{type(outcome).__name__}: {outcome}"
    return "unrefused"
